"""``grpo-ext rewards score`` where a real process or a worker is needed: a reward that calls ``os._exit`` fails the
command as it fails training (a process of its own), tests given on several lines run in the sandbox, and None
from math-verify comes with its reason (the in-process cases: tests/unit/test_rewards_score.py)."""

import subprocess
import sys

import pytest

from grpo_ext import cli

EXITING = """
import os
import sys

def hard(completions, **kwargs):
    os._exit(0)

def soft(completions, **kwargs):
    sys.exit(0)
"""


@pytest.mark.parametrize(
    ("name", "did"),
    [
        ("hard", "called os._exit(0)"),  # ended the process with status 0 and no line
        ("soft", "raised SystemExit: 0"),  # the same through sys.exit
    ],
)
def test_a_reward_that_exits_fails_the_command(name, did, tmp_path):
    (tmp_path / "exiting.py").write_text(EXITING)
    argv = [sys.executable, "-m", "grpo_ext", "rewards", "score", f"./exiting.py:{name}", "--completion", "hi"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (
        f"error: reward {name!r} {did} on a batch of 1 completions; a reward returns scores and never exits: "
        f"fix the reward (rewards[i])\n"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # tests on two lines, as a data row holds them: both cases run (YAML folded them into one line that did not parse)
        (["code_tests", "--column", "tests=assert area(2, 3) == 6\nassert area(0, 5) == 0"], "code_tests: 1.0"),
        # input/output pairs need YAML: --column-yaml reads them
        (["code_tests", "--column-yaml", "tests=[{input: '', output: '6'}]"], "code_tests: 0.0"),
        # a reference math-verify cannot read: None, and why
        (
            ["math_accuracy", "--answer", "not a number"],
            "math_accuracy: None; math-verify could not judge the answer against the reference 'not a number' "
            "(unparsable, or out of time)",
        ),
    ],
)
def test_scores_that_need_a_worker(argv, expected, capsys):
    completion = "def area(w, h):\n    return w * h"
    assert cli.main(["rewards", "score", argv[0], "--completion", completion, *argv[1:]]) == 0
    assert capsys.readouterr().out == expected + "\n"
