"""Reward faults that end or stop a process: a reward stuck in C code ends its interpreter, a reward that calls
``os._exit`` fails its call instead of ending the process, and a reward that exits or interrupts fails a tiny run with
one line."""

import subprocess
import sys

import pytest

from tests.helpers import ROOT, best_beside, tiny_doc

STUCK = (
    "import re; from grpo_ext.rewards.guard import Guarded\n"
    "def stuck(completions, **kw): return [float(bool(re.match(r'(a+)+$', 'a' * 60 + 'b')))]\n"
    "Guarded(stuck, 'stuck', timeout=0.5)(completions=['a'])\n"
)
# the same interpreter start and imports, with a reward that returns at once: the reference for the timed test
QUICK = (
    "from grpo_ext.rewards.guard import Guarded\n"
    "Guarded(lambda completions, **kw: [1.0], 'quick', timeout=0.5)(completions=['a'])\n"
)


def test_reward_stuck_in_c_code_ends_the_process():
    """A regular expression that backtracks for ages holds the interpreter lock; faulthandler ends the process at twice
    the limit plus one second (2 s), as its message says. Liveness: the regular expression alone would run for
    centuries, and the run's own cap (60 s) only stops a hang."""
    proc = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Timeout (0:00:02)!") and "stuck" in proc.stderr


@pytest.mark.timing
def test_reward_stuck_in_c_code_costs_its_timer_and_no_more():
    """Beside the same process with a reward that returns at once, the stuck one takes at most twice faulthandler's
    2 s timer more: a wall-clock timer, which a busy machine does not stretch, where it does stretch the start."""
    work, reference = best_beside(
        lambda: subprocess.run([sys.executable, "-c", STUCK], capture_output=True, timeout=60, cwd=ROOT),
        lambda: subprocess.run([sys.executable, "-c", QUICK], capture_output=True, timeout=60, cwd=ROOT, check=True),
    )
    assert work < reference + 2 * (2 * 0.5 + 1), f"{work:.2f} s against {reference:.2f} s"


CALLED_EXIT = (
    "reward 'r' called os._exit({}) on a batch of 2 completions; a reward returns scores and never exits: fix the reward "
    "(rewards[2])"
)

OS_EXIT_CASES = [
    # (the reward's body, on_error, timeout, what the process prints)
    ("os._exit(0)", "fail", 0.5, CALLED_EXIT.format(0)),  # on the reward's own thread: the process lives to say so
    ("os._exit(0)", "fail", None, CALLED_EXIT.format(0)),  # no time limit: on the caller's thread, the same
    ("os._exit(3)", "skip", 0.5, CALLED_EXIT.format(3)),  # never skipped as one sample's error
    # on a thread the reward starts: the exception ends that thread; the call still fails
    (
        "t = threading.Thread(target=os._exit, args=(0,)); t.start(); t.join(); return [1.0] * len(completions)",
        "fail",
        0.5,
        CALLED_EXIT.format(0),
    ),
    # the reward catches what os._exit raised and returns scores: it still meant to exit
    (
        "try:\n        os._exit(0)\n    except BaseException:\n        return [1.0] * len(completions)",
        "fail",
        0.5,
        CALLED_EXIT.format(0),
    ),
    # a child the reward forks (multiprocessing) ends with the real os._exit, and the reward scores
    (
        "p = multiprocessing.get_context('fork').Process(target=int); p.start(); p.join(); return [float(p.exitcode == 0)] * 2",
        "fail",
        0.5,
        "[1.0, 1.0]",
    ),
]


@pytest.mark.parametrize(("body", "on_error", "timeout", "printed"), OS_EXIT_CASES)
def test_os_exit_in_a_reward_fails_the_call(body, on_error, timeout, printed):
    """os._exit cannot be caught; for the length of a reward call it raises instead, and is the real one again after
    (the process's own os._exit(7) ends it with status 7)."""
    code = (
        "import multiprocessing, os, threading\n"
        "from grpo_ext.core.errors import RunError\n"
        "from grpo_ext.rewards.guard import Guarded\n"
        f"def r(completions, **kwargs):\n    {body}\n"
        "try:\n"
        f"    print(Guarded(r, 'r', where='rewards[2]', on_error={on_error!r}, timeout={timeout!r})(completions=['a', 'b']))\n"
        "except RunError as exc:\n"
        "    print(exc)\n"
        "os._exit(7)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (proc.returncode, proc.stdout.splitlines(), proc.stderr) == (7, [printed], "")  # no thread's traceback either


EXITING_REWARDS = """
import os
import sys

def exits(completions, **kwargs):
    sys.exit(0)

def interrupts(completions, **kwargs):
    raise KeyboardInterrupt

def hard_exits(completions, **kwargs):
    os._exit(0)
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


def test_run_with_a_reward_that_calls_os_exit_fails(digit_doc, tiny_model, write_recipe, tmp_path, no_hub):
    """os._exit(0) in the first training step: exit 1 with the reward's line and a failed summary, not exit 0 with a
    summary left at running (a process of its own: the test's would end)."""
    import json

    (tmp_path / "exiting.py").write_text(EXITING_REWARDS)
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", rewards=["./exiting.py:hard_exits"], eval={"enabled": False})
    argv = [sys.executable, "-m", "grpo_ext", "train", str(write_recipe(doc))]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    line = (
        "reward 'hard_exits' called os._exit(0) on a batch of 4 completions; a reward returns scores and never exits: "
        "fix the reward (rewards[0])"
    )
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1] == f"error: {line}", proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == f"RunError: {line}"
