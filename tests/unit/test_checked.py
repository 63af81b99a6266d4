"""The checked recipe's typed shape (grpo_ext/recipe/checked.py) against the one source of every key, recipe/schema.py:
every key a field, every field a key, each field's type the key's kinds (and its choices a Literal of them); and the
problems validation collects, each at its key path and written as one line in one place (core/errors.py)."""

import dataclasses
import types
import typing

import pytest

from grpo_ext import recipe
from grpo_ext.core.errors import Problem, RecipeError, where
from grpo_ext.data import mixture
from grpo_ext.recipe import checked
from grpo_ext.recipe.schema import MIXTURE_SOURCE, SCHEMA, TOP_LEVEL

KIND_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "null": type(None), "list": list, "dict": dict}

SECTIONS = [
    # (class, the specs its fields follow)
    (checked.Model, SCHEMA["model"]),
    (checked.Data, SCHEMA["data"]),
    (checked.Source, MIXTURE_SOURCE),
    (checked.Eval, SCHEMA["eval"]),
    (checked.Health, SCHEMA["health"]),
    (checked.Explore, SCHEMA["explore"]),
    (checked.Logging, SCHEMA["logging"]),
    (checked.Groups, SCHEMA["groups"]),
    (checked.Reward, SCHEMA["reward"]),
]
# what a Recipe holds beside its TOP_LEVEL keys: where it was read and what checking it found and built
RECIPE_EXTRAS = {
    "path",
    "base_dir",
    "given",
    "resolved",
    "origins",
    "columns",
    "reward_names",
    "tool_functions",
    "environment_class",
    "environment_classes",
    "notes",
    "_funcs",
}


def kinds_of(annotation) -> tuple[set[str], set]:
    """(the YAML kinds a field's type takes, the values its Literals allow)."""
    kinds, literals = set(), set()
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for arm in typing.get_args(annotation) if union else (annotation,):
        origin = typing.get_origin(arm) or arm
        if origin is typing.Literal:
            literals |= set(typing.get_args(arm))
            kinds |= {k for value in typing.get_args(arm) for k, t in KIND_TYPES.items() if type(value) is t}
        elif dataclasses.is_dataclass(origin):
            kinds.add("dict")  # a section, or an entry written as a mapping
        else:
            kinds |= {k for k, t in KIND_TYPES.items() if t is origin}
    return kinds, literals


@pytest.mark.parametrize(("cls", "specs"), SECTIONS, ids=[c.__name__ for c, _ in SECTIONS])
def test_each_key_is_a_field_of_its_kinds(cls, specs):
    hints = typing.get_type_hints(cls, include_extras=True)
    assert [f.name for f in dataclasses.fields(cls)] == list(specs)  # every key a field, in the schema's order
    assert cls.__dataclass_params__.frozen
    for name, spec in specs.items():
        kinds, literals = kinds_of(hints[name])
        assert kinds == set(spec.kinds), (name, kinds, spec.kinds)
        if spec.choices is not None:  # each choice is allowed, and a Literal allows nothing else
            allowed = literals | ({True, False} if "bool" in kinds and not {True, False} & literals else set())
            assert set(spec.choices) - {None} <= allowed, (name, spec.choices, literals)
            assert literals <= set(spec.choices), (name, literals, spec.choices)


def test_the_recipe_has_a_field_for_each_top_level_key():
    fields = {f.name for f in dataclasses.fields(checked.Recipe)}
    assert fields - RECIPE_EXTRAS == set(TOP_LEVEL)
    hints = typing.get_type_hints(checked.Recipe)
    for name, spec in TOP_LEVEL.items():
        kinds, _ = kinds_of(hints[name])
        if name in ("tools", "rewards"):  # a list of entries, each written as a name or a mapping
            assert kinds == {"list"} == set(spec.kinds), name
        elif name == "environment":  # a name or a mapping, or null
            assert kinds == {"dict", "null"} and set(spec.kinds) == {"str", "dict", "null"}
        elif name == "training":  # TRL's GRPOConfig keys, from the version tables
            assert hints[name] is checked.Training
        else:
            assert kinds == set(spec.kinds), (name, kinds, spec.kinds)


def test_a_checked_recipe_reads_by_attribute(digit_doc):
    r = recipe.validate(digit_doc)
    assert r.model.name == digit_doc["model"]["name"] and r.model.dtype == "auto"  # a default filled in
    assert r.data.prompts == digit_doc["data"]["prompts"] and r.data.mixture is None
    assert r.eval.samples == SCHEMA["eval"]["samples"].default
    assert [reward.name for reward in r.rewards] == r.reward_names and r.weights == [e.weight for e in r.rewards]
    # training keys by TRL's names: the recipe's, then grpo_ext's and TRL's defaults, computed in one place
    assert r.training.effective("num_generations") == digit_doc["training"]["num_generations"]
    assert r.training.effective("logging_steps") == 1  # grpo_ext's default
    assert not r.training.sets("logging_steps")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.eval.samples = 2  # type: ignore[misc]


def test_the_record_is_the_checked_recipe_read_back(digit_doc):
    r = recipe.validate(digit_doc)
    again = recipe.validate(r.portable())
    assert again.portable() == r.portable()
    assert list(r.portable()["data"]) == list(SCHEMA["data"])  # each section in the schema's order


PROBLEMS = [
    # (key path, message, the line)
    (("data", "mixture", 1, "file"), "a.csv, line 3: 2 fields", "data.mixture[1].file: a.csv, line 3: 2 fields"),
    (("rewards", 0), "a reward is a name", "rewards[0]: a reward is a name"),
    (("seed",), "must be at most 4294967295, got -1", "seed: must be at most 4294967295, got -1"),
    ((), "a recipe is a mapping of sections", "a recipe is a mapping of sections"),  # no key: the message alone
    ((3,), "x", "[3]: x"),  # a list at the top
]


@pytest.mark.parametrize(("loc", "message", "line"), PROBLEMS)
def test_a_problem_is_written_as_one_line(loc, message, line):
    assert str(Problem(loc, message)) == line
    assert RecipeError([Problem(loc, message)], "r.yaml").lines() == [f"error: r.yaml: {line}"]


def test_a_source_s_problems_move_under_its_place_in_the_mixture():
    """A source is checked as a data: section of its own; its problems move to data.mixture[i] by key path, and a
    problem at another path (a reward's, which names the rows in its own words) stays as it is."""
    found = [Problem(("data", "file"), "a.csv, line 3: 2 fields"), Problem(("rewards", 0), "x"), Problem((), "y")]
    moved = [mixture.within(p, 2) for p in found]
    assert [p.loc for p in moved] == [("data", "mixture", 2, "file"), ("rewards", 0), ()]
    assert where(moved[0].loc) == "data.mixture[2].file"


def test_validation_collects_problems_with_their_key_paths(digit_doc):
    digit_doc["eval"]["samples"] = 0
    digit_doc["data"]["mixture"] = [{"prompts": [], "weight": 1}]
    with pytest.raises(RecipeError) as info:
        recipe.validate(digit_doc)
    assert [p.loc for p in info.value.found] == [
        ("eval", "samples"),
        ("data", "prompts"),  # a source's key beside the mixture
        ("data", "mixture", 0, "prompts"),  # the source's own problem, checked as a data: section and moved
    ]
    assert info.value.problems == [str(p) for p in info.value.found]
