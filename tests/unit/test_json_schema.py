"""The recipe's JSON Schema (``grpo-ext schema``): the shipped file is what the command writes, every shipped
recipe passes it and names it, and it never refuses a recipe that validation accepts (on the shipped recipes
and on generated changes of them), while it does refuse what an editor should underline: an unknown key, a
value of the wrong kind, a value outside its choices or range."""

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_ext import cli
from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import SCHEMA, TOP_LEVEL, json_schema, validate

SHIPPED = catalog.shipped_recipes()
VALIDATOR = jsonschema.Draft202012Validator(json_schema.json_schema())


def schema_accepts(doc) -> bool:
    return VALIDATOR.is_valid(doc)


def validate_accepts(doc, path: Path) -> bool:
    try:
        validate(copy.deepcopy(doc), path)
    except RecipeError:
        return False
    return True


def test_the_shipped_schema_file_is_what_the_command_writes(capsys):
    """recipes/recipe.schema.json is regenerated with `grpo-ext schema --out recipes/recipe.schema.json --force`."""
    assert cli.main(["schema"]) == 0
    printed = capsys.readouterr().out
    regenerate = "run: grpo-ext schema --out recipes/recipe.schema.json --force"
    assert printed == catalog.schema_file().read_text(encoding="utf-8"), regenerate
    jsonschema.Draft202012Validator.check_schema(json.loads(printed))


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_recipe_passes_the_schema_and_names_it(name):
    path = SHIPPED[name]
    text = path.read_text(encoding="utf-8")
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(yaml.safe_load(text))]
    assert not errors
    lines = [line for line in text.splitlines() if line.startswith(catalog.SCHEMA_LINE)]
    assert len(lines) == 1, f"{name}: one line '{catalog.SCHEMA_LINE}...' after the header"
    assert (path.parent / lines[0].removeprefix(catalog.SCHEMA_LINE)).resolve() == catalog.schema_file().resolve()


def test_every_key_validation_knows_is_in_the_schema():
    props = json_schema.json_schema()["properties"]
    assert set(props) == set(TOP_LEVEL)
    for section, specs in SCHEMA.items():
        where = props["rewards"]["items"]["anyOf"][1] if section == "reward" else props[section]
        assert set(where["properties"]) == set(specs), section


def test_a_copied_recipe_names_the_shipped_schema(tmp_path, capsys):
    """`grpo-ext cp` rewrites the relative schema line so that the copy still finds the schema."""
    assert cli.main(["cp", "digit", str(tmp_path / "mine.yaml")]) == 0
    text = (tmp_path / "mine.yaml").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.startswith(catalog.SCHEMA_LINE)]
    assert line == catalog.SCHEMA_LINE + catalog.schema_file().resolve().as_uri()
    assert text.replace(line, "") == SHIPPED["digit"].read_text(encoding="utf-8").replace(
        f"{catalog.SCHEMA_LINE}recipe.schema.json", ""
    )


def test_schema_out_writes_a_file_and_says_the_line(tmp_path, capsys):
    assert cli.main(["schema", "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text()) == json_schema.json_schema()
    assert catalog.SCHEMA_LINE in capsys.readouterr().out
    assert cli.main(["schema", "--out", str(tmp_path / "no" / "s.json")]) == 2
    assert "error: --out: folder" in capsys.readouterr().err


DIGIT = yaml.safe_load(SHIPPED["digit"].read_text(encoding="utf-8"))
# (where, value, the schema refuses it): what an editor underlines; validation refuses each too
CASES = [
    (("model", "dtyp"), "auto", True),  # an unknown key
    (("training", "learning_rat"), 1e-5, True),  # an unknown GRPOConfig key
    (("training", "learning_rate"), "1e-5", False),  # YAML reads 1e-5 as text; validation converts it
    (("training", "learning_rate"), "fast", True),
    (("training", "save_strategy"), False, False),  # YAML 1.1 reads an unquoted `no` as false
    (("training", "output_dir"), "runs/x", True),  # set at the top level
    (("model", "dtype"), "float64", True),  # not one of the choices
    (("seed",), -1, True),  # below the minimum
    (("seed",), 2**32, True),  # above the maximum
    (("algorithm",), "dr_grpo", False),
    (("algorithm",), "dr-grpo", True),
    (("eval", "samples"), "8", True),  # an integer key takes no text
    (("rewards",), [], True),
    (("rewards",), ["digit_exact", {"name": "digit_shaped", "weight": "0.5"}], False),
    (("rewards",), [{"name": "digit_exact", "wieght": 1.0}], True),
    (("resume",), "yes", True),
]


@pytest.mark.parametrize("where,value,refused", CASES)
def test_the_schema_refuses_what_an_editor_should_underline(where, value, refused, tmp_path):
    doc = copy.deepcopy(DIGIT)
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    assert schema_accepts(doc) is not refused
    if refused:
        assert not validate_accepts(doc, SHIPPED["digit"])


SPECS = [(section, key, spec) for section, specs in SCHEMA.items() if section != "reward" for key, spec in specs.items()]
SPECS += [("", key, spec) for key, spec in TOP_LEVEL.items() if key not in SCHEMA and key not in ("rewards", "training")]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**33), 2**33),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.sampled_from(["1e-5", " 2.5 ", "1_000", ".5", "5.", "auto", "warn", "group", "4bit"]),
    st.lists(st.text(max_size=5), max_size=2),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SPECS), VALUES), min_size=1, max_size=3))
def test_the_schema_never_refuses_what_validation_accepts(changes):
    """Keys of the shipped digit recipe set to generated values: whenever the schema refuses one, so does
    validation (the schema may let through what only validation can see)."""
    doc = copy.deepcopy(DIGIT)
    for (section, key, _spec), value in changes:
        (doc.setdefault(section, {}) if section else doc)[key] = value
    if not schema_accepts(doc):
        assert not validate_accepts(doc, SHIPPED["digit"]), f"the schema refuses a recipe validation accepts: {changes}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(json_schema.training_schema()["properties"])), VALUES)
def test_training_keys_agree(key, value):
    doc = copy.deepcopy(DIGIT)
    doc["training"][key] = value
    if not schema_accepts(doc):
        assert not validate_accepts(doc, SHIPPED["digit"]), f"training.{key}={value!r}"
