"""The doctor on a run whose summary says running, read against the run's lock: a killed run (its pid dead, a real
process that exited) reads as killed, a live one as running."""

import os
import subprocess

import pytest

from grpo_ext import cli
from tests.helpers import two_step_run


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(
    ("lock", "shown", "code"),
    [
        (None, "killed (summary.json says running, and no live process holds the run's lock)", 1),  # no lock file
        (lambda: f"{dead_pid()}\n", "killed (summary.json says running, and no live process holds the run's lock)", 1),
        (lambda: f"{os.getpid()}\n", "running", 0),  # its process is alive: still training
        (lambda: "", "running, or killed (the summary was not closed)", 0),  # a lock being written: cannot tell
        (lambda: "not a pid", "running, or killed (the summary was not closed)", 0),
    ],
    ids=["no-lock", "dead-pid", "live-pid", "empty-lock", "garbage-lock"],
)
def test_running_summary_read_against_the_lock(lock, shown, code, tmp_path, capsys):
    run = two_step_run(tmp_path / "run", status="running")
    if lock is not None:
        (run / ".lock").write_text(lock())
    assert cli.main(["doctor", str(run)]) == code
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"run {run}: {shown}; 2 steps logged; trl 1.16.0"
    assert any(line.startswith("killed: ") and "grpo-ext train r.yaml --resume" in line for line in lines) is (code == 1)
