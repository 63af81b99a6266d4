"""The gsm8k recipe's dry run as a command: it names the hub dataset and imports and downloads nothing."""

import subprocess
import sys

from tests.helpers import ROOT


def test_gsm8k_dry_run_downloads_nothing(tmp_path):
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(['train', 'gsm8k', '--dry-run']); "
        "assert 'datasets' not in sys.modules and 'torch' not in sys.modules, 'dry run imported a heavy module'; sys.exit(rc)"
    )
    env = {
        "GRPO_EXT_CACHE": str(tmp_path / "cache"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "hub dataset openai/gsm8k (split train; not fetched by a dry run); eval rows from split test (first 64)" in proc.stdout
    assert "math_accuracy (weight 1.0), think_answer_format (weight 0.2), overlong_penalty (weight 0.5)" in proc.stdout
    assert not (tmp_path / "hf").exists() and not (tmp_path / "cache").exists()
