"""The run directory with real processes: a second run into a locked directory exits 2 and leaves it alone, and two
processes racing for one new output_dir never both hold it."""

import random
import signal
import subprocess
import sys
import time

import pytest

from grpo_ext.run import rundir
from grpo_ext.settings import output_dir
from tests.helpers import ROOT


@pytest.fixture
def run(tmp_path):
    yield tmp_path / "run"
    rundir.release(tmp_path / "run")


def test_second_run_into_locked_directory_exits_2(run, tmp_path, digit_doc, write_recipe):
    """While one process holds the run directory, a second `train` exits 2 and leaves the directory alone."""
    run.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from grpo_ext.run import rundir; "
            "rundir.lock(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)",
            str(run),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        digit_doc["output_dir"] = str(run)
        proc = subprocess.run(
            [sys.executable, "-m", "grpo_ext.train", str(write_recipe(digit_doc))],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2
        assert (
            proc.stderr == f"error: output_dir: {run.resolve()} is in use by another run (pid {holder.pid}); wait for it "
            f"to finish, or choose another: output_dir=runs/new\n"
        )
        assert [p.name for p in run.iterdir()] == [rundir.LOCK]
        assert (run / rundir.LOCK).read_text() == f"{holder.pid}\n"  # the loser rewrote nothing
    finally:
        holder.kill()
        holder.wait()
    rundir.lock(run)  # a killed holder's lock is gone with it
    assert rundir._held[run.resolve()].fd >= 0


RACER = """
import sys, time
from pathlib import Path
from grpo_ext.run import rundir
from grpo_ext.core.errors import RecipeError
run = Path(sys.argv[1])
try:
    prepared = rundir.prepare(str(run), overwrite=False, resume="auto")
except RecipeError:
    sys.exit(2)
rundir.commit(prepared)
# Written aside and renamed so that the test, which polls for this file, never reads it half-written.
tmp = run / f".work-{sys.argv[2]}"
tmp.write_text(repr(time.time()))
tmp.replace(run / f"work-{sys.argv[2]}")
time.sleep(30)
"""


def test_two_processes_racing_for_one_output_dir(tmp_path):
    """Two processes prepare one new output_dir at once and one of them is killed at a random moment, 50 times:
    whatever the winner wrote is still there, and never do both hold the directory at once. (The survivor may win
    after the victim won and died: that is a killed run with no checkpoint, which ``resume: auto`` starts again.)"""
    rng = random.Random(1234)
    for trial in range(50):
        run = tmp_path / f"t{trial}" / "run"
        procs = [subprocess.Popen([sys.executable, "-c", RACER, str(run), str(i)], cwd=ROOT) for i in range(2)]
        time.sleep(rng.uniform(0.0, 0.4))  # about the time a process takes to import and reach the lock
        v = rng.randrange(2)
        victim, survivor = procs[v], procs[1 - v]
        killed_at = time.time()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        mine, theirs = run / f"work-{1 - v}", run / f"work-{v}"
        deadline = time.monotonic() + 20
        while survivor.poll() is None and not mine.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            victim_won = theirs.exists()  # it won and wrote its file (nothing removes a file a run does not write)
            if survivor.poll() is None:  # the survivor won: after the victim was killed, if the victim had won
                assert mine.exists(), f"trial {trial}"
                if victim_won:
                    assert float(mine.read_text()) >= killed_at, f"trial {trial}: both held the directory at once"
                assert (run / output_dir.MARKER).is_file() and (run / rundir.LOCK).read_text() == f"{survivor.pid}\n"
            else:  # the survivor lost to the victim while it lived, and made nothing
                # The victim may have been killed after it took the lock and before it wrote its file (or its marker):
                # what shows that it held the directory is the lock file, which names it and which the loser left alone.
                assert survivor.returncode == 2, f"trial {trial}: exit {survivor.returncode}"
                assert (run / rundir.LOCK).read_text() in (f"{victim.pid}\n", ""), f"trial {trial}"
                assert not mine.exists(), f"trial {trial}"
                if victim_won:
                    assert (run / output_dir.MARKER).is_file(), f"trial {trial}"
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
