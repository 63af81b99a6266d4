"""Generated and hub datasets in a recipe: the arith generator, the gsm8k recipe's dry run, and bad data sections."""

import copy

import pytest

from grpo_ext import cli, recipe
from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from grpo_ext.data import generators
from grpo_ext.rewards.maths import math_accuracy
from grpo_ext.run import data

ROOT = catalog.PACKAGE_DIR.parent


def test_arith_is_deterministic_and_held_out():
    train_rows, eval_rows = generators.arith(train=200, held_out=40, seed=3)
    assert (train_rows, eval_rows) == generators.arith(train=200, held_out=40, seed=3)
    assert len(train_rows) == 200 and len(eval_rows) == 40
    assert not {r["prompt"] for r in train_rows} & {r["prompt"] for r in eval_rows}
    assert generators.arith(train=5, held_out=1, seed=4) != generators.arith(train=5, held_out=1, seed=3)


def test_arith_answers_score_with_math_accuracy():
    rows, _ = generators.arith(train=50, held_out=0)
    answers = [r["answer"] for r in rows]
    assert math_accuracy()(answers, answer=answers) == [1.0] * 50  # the worked answer itself is correct
    wrong = [a.rsplit("#### ", 1)[0] + f"#### {int(a.rsplit('#### ', 1)[1]) + 1}" for a in answers]
    assert math_accuracy()(wrong, answer=answers) == [0.0] * 50


def test_arith_too_few_distinct_problems():
    with pytest.raises(ValueError, match="raise max_operand"):
        generators.arith(train=5000, held_out=10, max_operand=2)


def test_recipe_rows_come_from_the_generator():
    r = recipe.load("arith", ["data.source_args.train=12", "data.source_args.held_out=3"])
    train_rows = data.train_rows(r.data, r.base_dir)
    eval_rows = data.eval_rows(r.data, r.base_dir)
    assert len(train_rows) == 12 and len(eval_rows) == 3
    assert set(train_rows[0]) == {"prompt", "answer"}


@pytest.mark.parametrize(
    "changes,expected",
    [
        ({"source": "arithmetic"}, "data.source: unknown generator 'arithmetic'; did you mean 'arith'?"),
        # a path in source: the key it belongs in
        (
            {"source": "rows.jsonl"},
            "data.source: unknown generator 'rows.jsonl'; for a file of your own write file: rows.jsonl in place of source",
        ),
        (
            {"source": "data/rows"},
            "data.source: unknown generator 'data/rows'; for a file of your own write file: data/rows in place of source",
        ),
        ({"source_args": {"trian": 5}}, "data.source_args: got an unexpected keyword argument 'trian'"),
        ({"prompts": ["a prompt"]}, "data: prompts and source are all given; keep one source of training prompts"),
        ({"source": None, "hub": "gsm8k"}, "data.hub: 'gsm8k' is not a dataset id; give org/name"),
        ({"source": None, "hub": "openai/gsm8k"}, "data.eval_prompts: missing"),  # no eval split for a hub dataset
        ({"source": None}, "data: give prompts"),  # nothing to train on
    ],
)
def test_bad_data_sections(changes, expected):
    doc = recipe.read_yaml(ROOT / "recipes" / "arith.yaml")
    doc = copy.deepcopy(doc)
    doc["data"].update(changes)
    with pytest.raises(RecipeError) as info:
        recipe.validate(doc)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_arith_dry_run(capsys):
    assert cli.main(["train", "arith", "--dry-run"]) == 0
    assert "data: generator arith; 32 eval prompts" in capsys.readouterr().out
