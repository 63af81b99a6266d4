"""scripts/gpu_check.sh is valid bash, and its Python part runs on a CPU with --device cpu."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.helpers import ROOT


def test_shell_script_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")]).returncode == 0


def test_python_part_runs_on_cpu(tiny_model, digit_doc, tmp_path, no_hub):
    digit_doc["model"]["name"] = str(tiny_model)
    digit_doc["training"].update(per_device_train_batch_size=4, num_generations=4, max_completion_length=4)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(digit_doc))
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "gpu_check.py"),
        str(recipe),
        "--steps",
        "2",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "run"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("tiny") and "cpu: 2 steps" in last and "s/step" in last and "peak RSS" in last and "plan" in last
    record = json.loads((tmp_path / "run" / "memory.json").read_text())
    assert record["plan_over_measured"] == pytest.approx(record["plan_gib"] / record["peak_rss_gib"], abs=0.01)
    assert sum(record["plan_rows_gib"].values()) == pytest.approx(record["plan_gib"], abs=0.01)


def test_cuda_requested_without_gpu_says_so(tiny_model, tmp_path):
    import torch

    if torch.cuda.is_available():
        return  # on a GPU machine the CUDA path is the real check (scripts/gpu_check.sh)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "digit", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "no CUDA device; pass --device cpu" in proc.stderr
