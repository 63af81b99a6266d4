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
