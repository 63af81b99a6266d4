"""Reward faults that end or stop a process: a reward stuck in C code ends its interpreter, and a reward that exits
or interrupts fails a tiny run with one line."""

import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, TIMED, tiny_doc


@pytest.mark.parametrize("timed", TIMED)
def test_reward_stuck_in_c_code_ends_the_process(timed):
    """A regular expression that backtracks for ages holds the interpreter lock; faulthandler ends the process."""
    code = (
        "import re; from grpo_ext.rewards.guard import Guarded\n"
        "def stuck(completions, **kw): return [float(bool(re.match(r'(a+)+$', 'a' * 60 + 'b')))]\n"
        "Guarded(stuck, 'stuck', timeout=0.5)(completions=['a'])\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Timeout (0:00:02)!") and "stuck" in proc.stderr
    if timed:
        assert time.monotonic() - t0 < 15


EXITING_REWARDS = """
import sys

def exits(completions, **kwargs):
    sys.exit(0)

def interrupts(completions, **kwargs):
    raise KeyboardInterrupt
"""


@pytest.mark.parametrize(
    "name,eval_enabled",
    [
        ("exits", True),  # sys.exit(0) in the eval before training
        ("exits", False),  # ... in the first training step
        ("interrupts", False),
    ],
)
def test_run_with_an_exiting_reward_fails(name, eval_enabled, digit_doc, tiny_model, write_recipe, tmp_path, no_hub, capsys):
    import json

    from grpo_ext import cli

    (tmp_path / "exiting.py").write_text(EXITING_REWARDS)
    reward = f"./exiting.py:{name}"
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", rewards=[reward], eval={"enabled": eval_enabled})
    assert cli.main(["train", str(write_recipe(doc))]) == 1
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and f"reward {name!r} raised" in summary["error"]
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"error: reward {name!r} raised ")
