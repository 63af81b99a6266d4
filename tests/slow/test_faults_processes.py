"""Faults on several processes: two CPU processes over gloo, launched as a run is (accelerate launch with
configs/cpu-ddp.yaml), on the tiny model. A reward that raises on one process, a process killed mid-step and a
process that hangs each stop every process within a bounded time, with one line that says what happened; a run
trained on two processes is resumed on one only when the change is accepted.

Each launch is bounded by a subprocess timeout, so that a hang fails its test instead of holding CI. The reward
writes the moment of its fault into ``FAULT_MARK``; the time from there to the launch's end is the stop time, and
each test prints it (``pytest -s``)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, logged_steps, resumable_doc

# Each reward misbehaves on one process (RANK) from its second call on (the second training step; a raising reward
# is called again on each sample alone), and writes the moment it first does so. The others score every completion 0.
FAULTS = """
import os, time

calls = 0

def _fault():
    global calls
    calls += 1
    if os.environ.get("RANK", "0") != os.environ.get("FAULT_RANK") or calls < 2:
        return False
    if not os.path.exists(os.environ["FAULT_MARK"]):
        with open(os.environ["FAULT_MARK"], "w") as fh:
            fh.write(repr(time.time()))
    return True

def raises(completions, **kwargs):
    if _fault():
        raise ValueError("refused on this process")
    return [0.0] * len(completions)

def killed(completions, **kwargs):
    if _fault():
        os.kill(os.getpid(), 9)
    return [0.0] * len(completions)

def hangs(completions, **kwargs):
    if _fault():
        time.sleep(3600)
    return [0.0] * len(completions)
"""

# A launch's own bound: a stop that needs more than this is a hang. The two processes start in about 15 s on two
# busy cores; a hang waits for training.ddp_timeout at most.
BOUND = 150
DDP_TIMEOUT = 15  # seconds: training.ddp_timeout of the hang test


def _recipe(digit_doc: dict, model: Path, tmp_path: Path, reward: str, **entry) -> Path:
    """The digit recipe on the tiny model, 3 steps and a checkpoint at each, rewarded by one of FAULTS."""
    (tmp_path / "faults.py").write_text(FAULTS)
    doc = resumable_doc(digit_doc, model, tmp_path / "run")
    doc["rewards"] = [{"name": f"./faults.py:{reward}", **entry}]
    doc["health"] = {"preflight": "off"}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _launch(recipe: Path, rank: int, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """The recipe trained on two processes, ``rank`` the one at fault: (the launch, seconds from the fault to its end).
    A launch that outlives BOUND fails the test, its processes killed with it (a session of their own)."""
    mark = tmp_path / f"fault-{time.monotonic_ns()}"
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [accelerate, "launch", "--config_file", str(ROOT / "configs" / "cpu-ddp.yaml"), "-m", "grpo_ext.train"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.update(FAULT_RANK=str(rank), FAULT_MARK=str(mark))
    with subprocess.Popen(
        [*cmd, str(recipe), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    ) as popen:
        try:
            out, err = popen.communicate(timeout=BOUND)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            out, err = popen.communicate()
            pytest.fail(f"the launch did not end within {BOUND} s: a hang\n{err[-3000:]}")
    ended = time.time()
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
    assert mark.exists(), err[-3000:]  # the fault happened
    stop = ended - float(mark.read_text())
    print(f"stopped {stop:.1f} s after the fault")
    return proc, stop


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


REWARD_LINE = (
    "error: reward 'raises' raised ValueError: refused on this process on sample 0 of 4 (completion {}); fix the reward "
    "or set rewards[0].on_error: skip"
)


@pytest.mark.parametrize(
    "rank",
    [
        1,  # another process than the main one: the main one records its line in summary.json
        0,  # the main process: it records its own line; process 1 stops without an error line of its own
    ],
)
def test_a_reward_that_raises_on_one_process_stops_both_with_one_error_line(rank, tiny_model, digit_doc, tmp_path):
    recipe = _recipe(digit_doc, tiny_model, tmp_path, "raises")
    proc, stop = _launch(recipe, rank, tmp_path)
    assert proc.returncode != 0
    errors = _errors(proc.stderr)
    assert len(errors) == 1 and errors[0].startswith(REWARD_LINE.split("{}")[0]), proc.stderr[-3000:]
    assert errors[0].endswith(REWARD_LINE.split("{}")[1])
    other = 1 - rank
    said = f"grpo_ext: stopped: process {rank} of 2 failed (its error line says why); process {other} stopped with it"
    assert said in proc.stderr.splitlines()  # torchrun's SIGTERM comes about 0.1 s after the other's exit: it finishes first
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["processes"] == 2
    assert errors[0].removeprefix("error: ") in summary["error"]  # the reward's line, wherever it raised
    # liveness: 7-12 s measured on two busy cores (summary and report written), where a wait for the collective
    # timeout would take training.ddp_timeout's default of 1800 s
    assert stop < 60, f"{stop:.1f} s"


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory, tiny_model):
    """A run of 3 steps on two processes whose process 1 is killed (SIGKILL) in step 2, after checkpoint-1:
    (the launch, its stop time, its run directory, summary.json as the launch left it)."""
    tmp_path = tmp_path_factory.mktemp("killed")
    digit_doc = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
    recipe = _recipe(digit_doc, tiny_model, tmp_path, "killed")
    proc, stop = _launch(recipe, 1, tmp_path)
    run = tmp_path / "run"
    return proc, stop, recipe, json.loads((run / "summary.json").read_text())


KILLED_LINE = (
    "error: process 1 of 2 ended without a word (killed, or out of memory: the launcher's report below gives its exit "
    "code); the run stopped; continue from the last complete checkpoint with --resume"
)


def test_a_process_killed_mid_step_stops_the_others(killed_run):
    """The killed process's sockets close with it: the main process's collective fails at once, and it says which
    process ended. torchrun ends it about 0.1 s later (its monitor interval); the line comes first."""
    proc, stop, _, summary = killed_run
    assert proc.returncode != 0
    assert _errors(proc.stderr) == [KILLED_LINE], proc.stderr[-3000:]
    assert "exitcode  : -9" in proc.stderr  # torchrun's own report names the killed rank
    assert summary["status"] == "failed" and summary["error"] == f"RunError: {KILLED_LINE.removeprefix('error: ')}"
    assert stop < 60, f"{stop:.1f} s"  # liveness: 6 s measured on two busy cores, not training.ddp_timeout's 1800


def test_a_hung_process_stops_the_others_after_ddp_timeout(tiny_model, digit_doc, tmp_path):
    """Process 1 sleeps in its reward (no reward timeout); the main process waits for it in TRL's reward gather for
    training.ddp_timeout, then stops with a line naming the setting, and torchrun ends the sleeper. Before
    training.ddp_timeout reached the process group the wait was gloo's default of 30 minutes."""
    recipe = _recipe(digit_doc, tiny_model, tmp_path, "hangs", timeout=None)
    proc, stop = _launch(recipe, 1, tmp_path, f"training.ddp_timeout={DDP_TIMEOUT}")
    assert proc.returncode != 0
    line = (
        f"error: process 1 of 2 did not answer within training.ddp_timeout ({DDP_TIMEOUT} s): it hangs or runs long "
        "(a reward or tool without a timeout?); the run stopped; raise training.ddp_timeout if its steps need longer, "
        "and continue from the last complete checkpoint with --resume"
    )
    assert _errors(proc.stderr) == [line], proc.stderr[-3000:]
    # the wait is the timeout (the main process may reach the gather a moment before the other process hangs), and
    # the stop after it takes seconds (6-10 s measured)
    assert DDP_TIMEOUT - 2 < stop < DDP_TIMEOUT + 60, f"{stop:.1f} s"


def test_resume_on_another_process_count(killed_run, tmp_path):
    """The killed run (2 processes, checkpoint-1 complete) resumed on one process: refused in one line before the
    model loads, as a changed recipe is; with --accept-changes it continues to its last step, says what differs and
    records the change."""
    _, _, recipe, _ = killed_run
    run = recipe.parent / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    one = [sys.executable, "-m", "grpo_ext.train", str(recipe), "--resume"]
    refused = subprocess.run(one, capture_output=True, text=True, cwd=ROOT, env=env, timeout=BOUND)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"error: --resume: {run} trained on 2 processes and this launch has 1, so each step would take 4 completions "
        "where it took 8 (per_device_train_batch_size x gradient_accumulation_steps x processes) and its prompts would "
        "follow another order; launch it on 2 processes (accelerate launch --num_processes 2), start a new run "
        "(output_dir=runs/new), or pass --accept-changes to continue on 1 with the change recorded"
    ]
    accepted = subprocess.run([*one, "--accept-changes"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=BOUND)
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    notice = (
        "grpo_ext: resume: processes 2 -> 1 (accepted): each step takes 4 completions where it took 8, the prompts "
        "after step 1 follow the new layout, and the random streams start afresh (checkpoint-1 holds none for 1 process)"
    )
    assert notice in accepted.stderr.splitlines()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["steps"], summary["processes"]) == ("completed", 3, 1)
    assert summary["changes"] == [{"at_step": 1, "keys": ["processes (2 -> 1)"]}]
    assert logged_steps(run) == [1, 2, 3]
