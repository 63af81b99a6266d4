"""Crash and resume on the tiny model: kills at any moment lose at most one checkpoint interval, never a step twice."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import rundir

ROOT = Path(__file__).resolve().parents[1]


def tiny_doc(digit_doc: dict, model: Path, run: Path, **training) -> dict:
    doc = digit_doc
    doc["model"]["name"] = str(model)
    doc["training"].update(
        {
            "max_steps": 3,
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 4,
            "save_steps": 1,
            "save_total_limit": 2,
            **training,
        }
    )
    doc["eval"]["enabled"] = False
    doc["output_dir"] = str(run)
    return doc


def steps(run: Path) -> list[int]:
    """Step numbers of metrics.jsonl, failing on any line that is not a JSON record."""
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_skipped_reward_errors_are_counted_per_step(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    (tmp_path / "picky.py").write_text(
        "def picky(completions, prompts, **kwargs):\n"
        "    if any('bad' in str(p) for p in prompts):\n"
        "        raise ValueError('cannot judge a bad prompt')\n"
        "    return [1.0] * len(completions)\n"
    )
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", max_steps=2, num_generations=2)
    doc["data"]["prompts"] = ["a good prompt", "a bad prompt"]  # every step holds both (2 prompts x 2 completions)
    doc["rewards"] = [{"name": "./picky.py:picky", "on_error": "skip"}, "digit_exact"]
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["reward_errors/picky"] for line in lines] == [2.0, 2.0]  # the two bad-prompt samples, each step
    assert [line["rewards/picky/mean"] for line in lines] == [1.0, 1.0]  # the skipped samples are left out
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning: reward 'picky'" in line]  # not health's
    assert len(warnings) == 1 and "raised ValueError: cannot judge a bad prompt on sample" in warnings[0]


def test_resume_after_crash_continues_from_complete_checkpoint(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    run = tmp_path / "run"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(tiny_doc(digit_doc, tiny_model, run)))
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
    assert steps(run) == [1, 2, 3]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3 and summary["reward_first"] is not None
    assert cli.main(["train", str(path), "--resume"]) == 2  # a finished run is not trained again
    rundir.release(run)


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(tiny_model, digit_doc, tmp_path):
    """SIGKILL the training process at random moments (at least 5 times); each start with ``resume=auto`` continues
    (or, killed before its first checkpoint, starts again); the end is clean."""
    total, kills, seed = 30, 5, random.randrange(1 << 30)
    rng = random.Random(seed)
    run = tmp_path / "run"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(tiny_doc(digit_doc, tiny_model, run, max_steps=total)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "grpo_ext.train", str(path), "resume=auto"]
    resumed_from = []
    for attempt in range(kills):
        done_before = len(steps(run)) if (run / "metrics.jsonl").exists() else 0
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        target = done_before + rng.randint(1, 3)  # let it make some progress, then kill at a random moment
        deadline = time.monotonic() + 120
        seen, seen_at, step_seconds = done_before, None, 0.4
        while proc.poll() is None and time.monotonic() < deadline:
            count = len((run / "metrics.jsonl").read_text().splitlines()) if (run / "metrics.jsonl").exists() else 0
            if count > seen:
                now = time.monotonic()
                if seen_at is not None:
                    step_seconds = (now - seen_at) / (count - seen)
                seen, seen_at = count, now
            if count >= target:
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0, step_seconds))  # somewhere inside the next step, however fast steps are
        assert proc.poll() is None, f"seed {seed}: run {attempt} ended before the kill: {proc.stderr.read()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
        err = proc.communicate()[1]
        # grpo_ext's own files are written whole or not at all; a checkpoint cut short is never marked complete
        complete = [c for c in rundir.checkpoints(run) if rundir.is_complete(c)]
        for f in [*run.glob("*.json"), *(f for c in complete for f in c.rglob("*.json"))]:
            json.loads(f.read_text())  # raises on a truncated file
        resumed_from += [line.split("resuming from ")[1].split(";")[0] for line in err.splitlines() if "resuming from" in line]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"seed {seed}: {proc.stderr[-2000:]}"
    resumed_from += [
        line.split("resuming from ")[1].split(";")[0] for line in proc.stderr.splitlines() if "resuming from" in line
    ]
    assert steps(run) == list(range(1, total + 1)), f"seed {seed}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == total
    assert (run / "final" / "config.json").exists()
    # a kill between a step's log line and its checkpoint leaves nothing to resume from; most kills do not
    assert len(resumed_from) >= kills // 2 + 1, f"seed {seed}: resumed from {resumed_from}"
