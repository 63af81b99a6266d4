"""``grpo-ext eval RECIPE --model RUN --checkpoints`` on a tiny-model run with three checkpoints."""

import json

import pytest
import yaml

import grpo_ext
from grpo_ext import cli
from grpo_ext.run import rundir
from tests.helpers import tiny_doc


@pytest.fixture(scope="module")
def tiny_run(tiny_model, tmp_path_factory):
    """A 3-step run of the tiny model keeping a checkpoint at every step; float32, so the sweep repeats its eval."""
    from tests.helpers import ROOT

    where = tmp_path_factory.mktemp("sweep")
    doc = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
    doc = tiny_doc(doc, tiny_model, where / "run", training={"max_steps": 3, "save_total_limit": None, "bf16": False})
    path = where / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    summary = grpo_ext.train(path)
    return path, where / "run", summary


def test_sweep_scores_every_checkpoint_and_reuses_scores(tiny_run, capsys, no_hub):
    recipe, run, summary = tiny_run
    assert [c.name for c in rundir.checkpoints(run)] == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    assert cli.main(["eval", str(recipe), "--model", str(run), "--checkpoints"]) == 0
    out = capsys.readouterr().out
    curve = json.loads((run / "eval_curve.json").read_text())
    # step 0 is the run's own eval before (same settings), then each checkpoint
    assert [(p["step"], p["checkpoint"]) for p in curve["points"]] == [
        (0, "before training"),
        (1, "checkpoint-1"),
        (2, "checkpoint-2"),
        (3, "checkpoint-3"),
    ]
    assert curve["scored"] == 3 and (run / "eval_curve.png").stat().st_size > 0
    assert "![held-out pass rate against step](eval_curve.png)" in (run / "eval_curve.md").read_text()
    # the same seeds: the last checkpoint (the final weights) draws the very samples of the run's eval after
    last, after = curve["points"][-1]["rewards"], summary["eval_after"]["rewards"]
    assert {k: v["per_prompt"] for k, v in last.items()} == {k: v["per_prompt"] for k, v in after.items()}
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["step", "checkpoint", "digit_exact"]
    assert any(line.startswith("best: checkpoint-") for line in lines)
    assert "sweep: 3 checkpoints scored and 0 reused" in out

    # again: its three files are not replaced without --force; with it, nothing is sampled twice
    assert cli.main(["eval", str(recipe), "--model", str(run), "--checkpoints"]) == 2
    refused = capsys.readouterr().err
    assert all(f"eval_curve.{ext}" in refused for ext in ("json", "md", "png")) and "pass --force" in refused, refused
    assert cli.main(["eval", str(recipe), "--model", str(run), "--checkpoints", "--force"]) == 0
    again = json.loads((run / "eval_curve.json").read_text())
    assert again["scored"] == 0 and "sweep: 0 checkpoints scored and 3 reused" in capsys.readouterr().out
    assert [p["rewards"] for p in again["points"]] == [p["rewards"] for p in curve["points"]]

    # other eval settings: scored again, into --out; an incomplete checkpoint is left out
    (run / "checkpoint-2" / rundir.MANIFEST).unlink()
    out_dir = run.parent / "curve-4"
    assert cli.main(["eval", str(recipe), "--model", str(run), "--checkpoints", "eval.samples=4", "--out", str(out_dir)]) == 0
    other = json.loads((out_dir / "eval_curve.json").read_text())
    # the run's eval before sampled 2 per prompt, not 4: no step 0
    assert [p["step"] for p in other["points"]] == [1, 3] and other["scored"] == 2
    assert all(r["judged"] == 8 for p in other["points"] for r in p["rewards"].values())  # 2 prompts x 4 samples

    # other prompts, the first settings: the scores kept in the run directory are not theirs, nor the eval before
    assert cli.main(["eval", str(recipe), "--model", str(run), "--checkpoints", "data.eval_prompts=['Say 5.']", "--force"]) == 0
    moved = json.loads((run / "eval_curve.json").read_text())
    assert [p["step"] for p in moved["points"]] == [1, 3] and moved["scored"] == 2 and moved["points"][0]["prompts"] == 1
