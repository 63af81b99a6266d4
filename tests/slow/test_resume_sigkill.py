"""Crash and resume on the tiny model with real kills: SIGKILL at random moments, then ``resume=auto``, until the
run completes with every step logged once."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import yaml

from grpo_ext.run import rundir
from tests.helpers import ROOT, logged_steps, resumable_doc


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(tiny_model, digit_doc, tmp_path):
    """SIGKILL the training process at random moments (at least 5 times); each start with ``resume=auto`` continues
    (or, killed before its first checkpoint, starts again); the end is clean."""
    total, kills, seed = 30, 5, random.randrange(1 << 30)
    rng = random.Random(seed)
    run = tmp_path / "run"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(resumable_doc(digit_doc, tiny_model, run, max_steps=total)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "grpo_ext.train", str(path), "resume=auto"]
    resumed_from = []
    for attempt in range(kills):
        done_before = len(logged_steps(run)) if (run / "metrics.jsonl").exists() else 0
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
    assert logged_steps(run) == list(range(1, total + 1)), f"seed {seed}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == total
    assert (run / "final" / "config.json").exists()
    # a kill between a step's log line and its checkpoint leaves nothing to resume from; most kills do not
    assert len(resumed_from) >= kills // 2 + 1, f"seed {seed}: resumed from {resumed_from}"
