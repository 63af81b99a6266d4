"""``grpo-ext eval RECIPE --model RUN --checkpoints``: bad input exits 2 before anything loads, and the closing line
counts checkpoints (the sweep on a tiny-model run: tests/integration/test_eval_checkpoints.py)."""

import pytest

from grpo_ext import cli


@pytest.mark.parametrize(
    "models, message",
    [
        (["a", "b"], "--checkpoints: give one --model, the run directory whose checkpoint-N to score"),  # two models
        (["{recipe_dir}"], "has no complete checkpoint-N; train with training.save_steps set"),  # a folder with no run
        (["{recipe_dir}/nowhere"], "is not a directory; pass the run directory (output_dir) of a run"),  # a typo
    ],
)
def test_sweep_bad_input_exits_2(models, message, digit_doc, write_recipe, tmp_path, capsys):
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    recipe = write_recipe(digit_doc)
    argv = ["eval", str(recipe), "--checkpoints"] + [a for m in models for a in ("--model", m.format(recipe_dir=tmp_path))]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "eval_curve.json").exists()


@pytest.mark.parametrize(
    "scored, reused, expected",
    [
        (1, 0, "sweep: 1 checkpoint scored and 0 reused in 2.5 s"),  # one checkpoint: the word in the singular
        (3, 1, "sweep: 3 checkpoints scored and 1 reused in 2.5 s"),  # several
    ],
)
def test_sweep_closing_line_counts_checkpoints(scored, reused, expected):
    from grpo_ext.verbs import sweep

    curve = {"best": None, "points": [{"reused": True}] * reused + [{}] * scored, "scored": scored, "seconds": 2.5}
    assert sweep.closing_lines(curve)[-1] == expected
