"""Recipe loading, validation and overrides: every bad input is one line naming its key path (the same as a user's
whole command, before anything heavy is imported: tests/integration/test_recipe_commands.py)."""

import pytest

from grpo_ext import cli, recipe
from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from tests.helpers import mutate

ROOT = catalog.PACKAGE_DIR.parent


BAD = [
    # (key path to change, new value, text the error must contain)
    ("model.dtyp", "auto", "model.dtyp: unknown key; did you mean 'dtype'?"),  # misspelled key
    ("training.learnin_rate", 1e-5, "training.learnin_rate: unknown GRPOConfig key; did you mean 'learning_rate'?"),
    ("rewards.0", "digit_exat", "rewards[0].name: unknown reward 'digit_exat'; did you mean 'digit_exact'?"),
    ("training.learning_rate", "fast", "training.learning_rate: expected a finite number, got str 'fast'"),  # wrong type
    ("training.max_steps", "ten", "training.max_steps: expected an integer"),
    ("model.dtype", "int8", "model.dtype: 'int8' is not one of"),
    ("data.prompts", [], "data.prompts: is empty"),
    ("data.prompts", ["ok", 3], "data.prompts[1]: each prompt is a non-empty string"),
    ("data.file", "missing.jsonl", "data.file: "),  # missing file
    ("model.name", "./no/such/model", "model.name: "),  # missing local model
    ("model.name", "not a model", "model.name: 'not a model' is not a catalog alias"),
    ("training.num_generations", 3, "not divisible by num_generations=3"),
    ("training.num_generations", 1, "training.num_generations: GRPO compares completions within a group"),
    ("training.vllm_device", "cuda:1", "training.vllm_device: removed in trl 0.18"),
    ("training.output_dir", "x", "training.output_dir: set it at the top level"),
    ("rewards.1", {"name": "digit_shaped", "args": {"scale": 2}}, "rewards[1].args: "),  # args a reward does not take
    ("rewards.1", {"name": "digit_shaped", "wieght": 2}, "rewards[1].wieght: unknown key; did you mean 'weight'?"),
    ("eval.samples", 0, "eval.samples: must be at least 1"),
    ("output_dir", KeyError, "output_dir: missing"),
    ("rewards", [], "rewards: is empty"),
    ("sed", 1, "sed: unknown key; did you mean 'seed'?"),
    # a NUL reaches no path: the OS refuses it with a ValueError, so validation names it before any path is touched
    ("output_dir", "runs/a\0b", "output_dir: holds a NUL character (\\0), which no path or text may; remove it"),
    ("data.system_prompt", "Be brief.\0", "data.system_prompt: holds a NUL character"),
    ("rewards.1", {"name": "digit_shaped", "we\0ight": 2}, "rewards[1].we\\0ight: holds a NUL character"),
]


@pytest.mark.parametrize("path,value,expected", BAD, ids=[b[0] + ":" + str(b[1])[:12] for b in BAD])
def test_bad_recipe_exits_2_with_key_path(path, value, expected, digit_doc, write_recipe, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    digit_doc["output_dir"] = str(tmp_path / "run")
    file = write_recipe(mutate(digit_doc, path, value))
    assert cli.main(["train", str(file)]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert all(line.startswith("error: ") for line in err.strip().splitlines())
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_all_problems_reported_together(digit_doc, write_recipe):
    doc = mutate(mutate(mutate(digit_doc, "model.dtyp", "x"), "training.learnin_rate", 1), "rewards.0", "nope")
    with pytest.raises(RecipeError) as info:
        recipe.validate(doc)
    assert len(info.value.problems) == 3


# a data: key refused by its own check that the rules on the rows' columns read: its line alone (a KeyError before)
REFUSED_DATA_KEYS = [
    ({"file": "rows.jsonl", "prompt_column": 5, "eval_fraction": 0.5}, "data.prompt_column: expected a string, got int 5"),
    ({"file": "rows.jsonl", "prompt_column": "q", "hub_split": 5, "eval_size": 1}, "data.hub_split: expected a string, got int"),
    ({"source": "arith", "source_args": 5}, "data.source_args: expected a mapping, got int 5"),
    ({"file": "rows.jsonl", "prompt_column": "q", "eval_fraction": 0.5, "eval_size": "x"}, "data.eval_size: expected an"),
    ({"mixture": [{"source": "arith", "weight": 1}], "eval_file": "rows.jsonl", "prompt_column": 5}, "data.prompt_column: "),
]


@pytest.mark.parametrize("section,expected", REFUSED_DATA_KEYS, ids=[str(c[0])[:40] for c in REFUSED_DATA_KEYS])
def test_refused_data_key_read_by_the_column_rules(section, expected, digit_doc, tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"q": "2+2?", "answer": "4"}\n{"q": "3+3?", "answer": "6"}\n')
    digit_doc["data"] = section
    with pytest.raises(RecipeError) as info:
        recipe.validate(digit_doc, tmp_path / "recipe.yaml")
    assert info.value.problems[0].startswith(expected), info.value.problems


@pytest.mark.parametrize(
    "text,expected",
    [
        ("not: [valid", "YAML syntax error at line"),  # syntax error names the line
        ("- a list\n- not a mapping", "a recipe is a mapping of sections"),
        ("", "a recipe is a mapping of sections"),  # empty document
        ("just text", "a recipe is a mapping of sections"),
    ],
)
def test_unreadable_recipe(text, expected, write_recipe, capsys, yaml_loader):
    assert cli.main(["train", str(write_recipe(text))]) == 2
    assert expected in capsys.readouterr().err


def test_missing_recipe_file(capsys):
    assert cli.main(["train", "no/such/recipe.yaml"]) == 2
    assert "recipe file 'no/such/recipe.yaml' does not exist" in capsys.readouterr().err


def test_unknown_shipped_name_suggests(capsys):
    assert cli.main(["train", "digits"]) == 2
    assert "did you mean 'digit'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override,key,expected",
    [
        ("training.learning_rate=1e-5", ("training", "learning_rate"), 1e-5),  # YAML's 1e-5 is a string: coerced
        ("training.max_steps=3", ("training", "max_steps"), 3),
        ("seed=7", ("seed",), 7),
        ("data.system_prompt=Be brief.", ("data", "system_prompt"), "Be brief."),
        ("rewards.1.weight=0.5", ("rewards", 1, "weight"), 0.5),  # list index
        ("eval.enabled=false", ("eval", "enabled"), False),
    ],
)
def test_overrides(override, key, expected, yaml_loader):
    r = recipe.load(str(ROOT / "recipes" / "digit.yaml"), [override])
    node = r.portable()  # the checked recipe as a mapping, by its key paths
    for k in key:
        node = node[k]
    assert node == expected


@pytest.mark.parametrize(
    "override,expected",
    [
        ("training", "must look like section.key=value"),
        ("=3", "must look like section.key=value"),
        ("rewards.9.weight=1", "rewards.9 does not exist (the list has 2 items)"),
        ("seed.x=1", "seed is int, not a section"),
        ("training.bogus_key=1", "training.bogus_key: unknown GRPOConfig key"),
    ],
)
def test_bad_overrides(override, expected, capsys):
    assert cli.main(["train", "digit", override, "--dry-run"]) == 2
    assert expected in capsys.readouterr().err


def test_shipped_name_resolves():
    assert recipe.locate("digit") == ROOT / "recipes" / "digit.yaml"


def test_every_shipped_recipe_validates(yaml_loader):
    shipped = catalog.shipped_recipes()
    assert "digit" in shipped
    for path in shipped.values():
        recipe.load(str(path))


@pytest.mark.parametrize(
    "line, written, path, meaning",
    [
        ("  chat: auto", "  chat: on", ("data", "chat"), True),  # YAML 1.1: on/off/yes/no are booleans; chat takes one
        ("  learning_rate: 3.0e-5", "  learning_rate: 1e-5", ("training", "learning_rate"), 1e-05),  # a string to YAML
        ("seed: 0", "seed: 0x1F", ("seed",), 31),  # hexadecimal is an integer
    ],
)
def test_hand_written_values_with_an_accepted_meaning(line, written, path, meaning, tmp_path, yaml_loader):
    text = (ROOT / "recipes" / "digit.yaml").read_text()
    edited = "\n".join(written if ln.startswith(line) else ln for ln in text.splitlines())
    (tmp_path / "r.yaml").write_text(edited)
    r = recipe.load(str(tmp_path / "r.yaml"))
    value = r.portable()
    for key in path:
        value = value[key]
    assert value == meaning and type(value) is type(meaning)


def test_anchors_and_aliases_expand(tmp_path, yaml_loader):
    """An alias repeats what its anchor names, as YAML defines: the eval prompts may reuse the training prompts."""
    doc = (ROOT / "recipes" / "digit.yaml").read_text().replace("  prompts:", "  prompts: &shared", 1)
    lines = doc.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("  eval_prompts:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    -"))
    (tmp_path / "r.yaml").write_text("\n".join([*lines[:start], "  eval_prompts: *shared", *lines[end:]]))
    r = recipe.load(str(tmp_path / "r.yaml"))
    assert r.data.eval_prompts == r.data.prompts
