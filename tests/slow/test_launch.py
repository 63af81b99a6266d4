"""`accelerate launch --config_file configs/cpu-ddp.yaml -m grpo_ext.train RECIPE`: two processes on the CPU.

Slow (about 30-60 s on 2 cores: two processes each import torch and load the tiny model). Runs in CI.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def launch(*args: str, env: dict) -> subprocess.CompletedProcess:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--config_file", str(ROOT / "configs" / "cpu-ddp.yaml"), "-m", "grpo_ext.train", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


@pytest.mark.slow
def test_cpu_ddp_two_processes_one_run_directory(tiny_model, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    run = tmp_path / "run"
    args = [
        "recipes/digit.yaml",
        f"model.name={tiny_model}",
        "training.max_steps=2",
        "training.per_device_train_batch_size=4",
        "training.num_generations=4",
        "training.max_completion_length=4",
        "eval.samples=2",
        f"output_dir={run}",
    ]
    proc = launch(*args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "terminate called" not in proc.stderr  # each process closes its process group before exiting
    summary = json.loads((run / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["status"] == "completed" and summary["steps"] == 2
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]  # written once
    # every process samples its share of the eval; the main process alone scores and reports, once
    assert proc.stderr.count("eval after: pass rate") == 1
    assert proc.stderr.count("eval after: ") == 2 and re.search(r"eval after: \d+ prompts sampled by 2 processes", proc.stderr)
    assert (run / "final" / "model.safetensors").is_file()

    again = launch(*args, env=env)  # the run directory is taken: one error line, both processes exit 2, no hang
    assert again.returncode != 0
    errors = [line for line in again.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "already holds a run" in errors[0]
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
