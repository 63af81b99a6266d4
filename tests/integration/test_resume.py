"""Crash and resume on the tiny model: a run made to look killed resumes from its last complete checkpoint, never a
step twice, and skipped reward errors are counted per step (real kills at random moments: tests/slow/test_resume_sigkill.py)."""

import json

import yaml

from grpo_ext import cli
from grpo_ext.run import rundir
from tests.helpers import logged_steps, resumable_doc


def test_skipped_reward_errors_and_reward_time_are_counted_per_step(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    (tmp_path / "slow.py").write_text(
        "import time\ndef slow(completions, **kwargs):\n    time.sleep(0.3)\n    return [0.5] * len(completions)\n"
    )
    (tmp_path / "picky.py").write_text(
        "def picky(completions, prompts, **kwargs):\n"
        "    if any('bad' in str(p) for p in prompts):\n"
        "        raise ValueError('cannot judge a bad prompt')\n"
        "    return [1.0] * len(completions)\n"
    )
    doc = resumable_doc(digit_doc, tiny_model, tmp_path / "run", max_steps=2, num_generations=2)
    doc["data"]["prompts"] = ["a good prompt", "a bad prompt"]  # every step holds both (2 prompts x 2 completions)
    doc["rewards"] = [{"name": "./picky.py:picky", "on_error": "skip"}, "digit_exact", "./slow.py:slow"]
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["reward_errors/picky"] for line in lines] == [2.0, 2.0]  # the two bad-prompt samples, each step
    assert [line["rewards/picky/mean"] for line in lines] == [1.0, 1.0]  # the skipped samples are left out
    # the time each reward took is logged per step: slow sleeps 0.3 s per call, one call a step (not the eval's)
    assert all(0.3 <= line["reward_seconds/slow"] < 3 for line in lines), [line["reward_seconds/slow"] for line in lines]
    assert all(line["reward_seconds/digit_exact"] < 0.3 for line in lines)
    assert "reward_errors/slow" not in lines[0]  # counted only for rewards that skip errors
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| reward slow, per step | 0.3 s" in report or "| reward slow, per step | 0.4 s" in report, report
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning: reward 'picky'" in line]  # not health's
    assert len(warnings) == 1 and "raised ValueError: cannot judge a bad prompt on sample" in warnings[0]


def test_resume_after_crash_continues_from_complete_checkpoint(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    run = tmp_path / "run"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(resumable_doc(digit_doc, tiny_model, run)))
    assert cli.main(["train", str(path)]) == 0
    rundir.release(run)
    kept = rundir.checkpoints(run)  # save_total_limit=2, applied after each new checkpoint is marked complete
    assert [c.name for c in kept] == ["checkpoint-2", "checkpoint-3"] and all(map(rundir.is_complete, kept))
    # Make it look killed while saving step 3: no final model, checkpoint-3 without its manifest, a line cut short.
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    (run / "checkpoint-3" / rundir.MANIFEST).unlink()
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 3, "rewa')
    capsys.readouterr()
    assert cli.main(["train", str(path)]) == 2  # an unfinished run is not continued without --resume
    assert "--resume to continue it (it stopped; last complete checkpoint: checkpoint-2)" in capsys.readouterr().err
    assert cli.main(["train", str(path), "resume=auto"]) == 0
    rundir.release(run)
    assert "resuming from checkpoint-2" in capsys.readouterr().err
    assert logged_steps(run) == [1, 2, 3]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3 and summary["reward_first"] is not None
    assert cli.main(["train", str(path), "--resume"]) == 2  # a finished run is not trained again
    rundir.release(run)
