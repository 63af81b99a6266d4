"""The shipped digit recipe, for real: SmolLM2-135M-Instruct learns to answer with one digit on a CPU.

Slow (about 3 minutes on 2 cores, plus a one-time fetch and conversion of the model). Runs in CI.
"""

import json
import os
import time
from pathlib import Path

import pytest

from grpo_ext import train

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_digit_recipe_learns(tmp_path, no_hub):
    t0 = time.monotonic()
    assert train.main([str(ROOT / "recipes" / "digit.yaml"), f"output_dir={tmp_path / 'run'}"]) == 0
    wall = time.monotonic() - t0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    before = summary["eval_before"]["rewards"]["digit_exact"]["pass_rate"]
    after = summary["eval_after"]["rewards"]["digit_exact"]["pass_rate"]
    print(f"digit recipe: pass rate {before} -> {after}, {wall:.0f} s wall, cache {os.environ.get('GRPO_EXT_CACHE', '~/.cache/grpo_ext')}")
    assert after >= 0.8
    assert after - before >= 0.5
    assert summary["reward_last"] > summary["reward_first"]
