"""What a process of a multi-process run says when another one failed, ended or hangs (``launch.lost``), and what a
resume on another process count does (``train._resume_processes``), and how the training line counts a step's
completions over the processes. The launched runs are in tests/slow/test_faults_processes.py."""

from pathlib import Path

import pytest

from grpo_ext import recipe as recipes
from grpo_ext.core.errors import ElsewhereError, RecipeError, RunError
from grpo_ext.run import launch, rundir
from grpo_ext.verbs import train

KILLED = (
    "process 1 of 2 ended without a word (killed, or out of memory: the launcher's report below gives its exit code); "
    "the run stopped; continue from the last complete checkpoint with --resume"
)
HUNG = (
    "process 1 of 2 did not answer within training.ddp_timeout (20 s): it hangs or runs long (a reward or tool without "
    "a timeout?); the run stopped; raise training.ddp_timeout if its steps need longer, and continue from the last "
    "complete checkpoint with --resume"
)
CLOSED = RuntimeError("[third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:22404.")
TIMED_OUT = RuntimeError("[third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 20000ms for recv")

LOST_CASES = [
    # (processes, this rank, what another process left in the store, the exception here, (error type, its line, summary))
    # another process failed with its line: this one stops without an error line of its own, summary.json keeps its line
    (
        2,
        0,
        (1, "reward 'r' raised ValueError: no"),
        CLOSED,
        (
            ElsewhereError,
            "stopped: process 1 of 2 failed (its error line says why); process 0 stopped with it",
            "process 1 of 2: reward 'r' raised ValueError: no",
        ),
    ),
    (2, 0, None, CLOSED, (RunError, KILLED, f"RunError: {KILLED}")),  # its sockets closed with it: killed
    (2, 0, None, TIMED_OUT, (RunError, HUNG, f"RunError: {HUNG}")),  # it did not answer: hangs
    (2, 0, None, launch.Terminated(), (RunError, KILLED, f"RunError: {KILLED}")),  # torchrun ended this one after it
    (2, 1, None, CLOSED, (RunError, KILLED.replace("process 1", "process 0"), None)),  # the main process ended
    # of more than two the one that ended is not known here (torchrun's report names it)
    (4, 0, None, CLOSED, (RunError, KILLED.replace("process 1 of 2", "another process of the 4"), None)),
    (2, 0, None, ValueError("this process's own"), None),  # a failure of its own: not another process's
    (1, 0, None, CLOSED, None),  # one process: nothing to lose
]


@pytest.mark.parametrize(("processes", "rank", "reported", "exc", "expected"), LOST_CASES)
def test_what_a_process_says_when_another_stopped(processes, rank, reported, exc, expected, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", str(processes))
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setattr(launch, "_reported", lambda: reported)
    found = launch.lost(exc, 20)
    if expected is None:
        assert found is None
        return
    kind, line, recorded = expected
    assert (type(found[0]), str(found[0])) == (kind, line)
    if recorded is not None:
        assert found[1] == recorded


@pytest.fixture
def prepared(tmp_path):
    def make(processes: int | None) -> rundir.Prepared:
        previous = {"status": "failed"} if processes is None else {"status": "failed", "processes": processes}
        return rundir.Prepared(tmp_path, resume_from=tmp_path / "checkpoint-3", previous=previous)

    return make


REFUSED = (
    "--resume: {{path}} trained on {before} and this launch has {now}, so each step would take {takes} completions where it "
    "took {took} (per_device_train_batch_size x gradient_accumulation_steps x processes) and its prompts would follow "
    "another order; launch it on {before} (accelerate launch --num_processes {n}), start a new run (output_dir=runs/new), "
    "or pass --accept-changes to continue on {now} with the change recorded"
)

RESUME_CASES = [
    # (processes recorded, processes now, --accept-changes, the change recorded, the note said; or the refusal)
    (2, 2, False, [], None),  # the same count: nothing to say
    (None, 2, False, [], None),  # a summary that records no count (an older run): nothing known, nothing said
    (2, 1, False, RecipeError, REFUSED.format(before="2 processes", now=1, takes=8, took=16, n=2)),
    (1, 2, False, RecipeError, REFUSED.format(before="1 process", now=2, takes=16, took=8, n=1)),
    (
        2,
        1,
        True,
        ["processes (2 -> 1)"],
        "resume: processes 2 -> 1 (accepted): each step takes 8 completions where it took 16, the prompts after step 3 "
        "follow the new layout, and the random streams start afresh (checkpoint-3 holds none for 1 process)",
    ),
    # processes 0 and 1 find their rng_state_N.pth; 2 and 3 start afresh
    (
        2,
        4,
        True,
        ["processes (2 -> 4)"],
        "resume: processes 2 -> 4 (accepted): each step takes 32 completions where it took 16, the prompts after step 3 "
        "follow the new layout, and 2 of the 4 processes start fresh random streams (checkpoint-3 holds none of theirs)",
    ),
    # fewer processes than before: each finds its own
    (
        4,
        2,
        True,
        ["processes (4 -> 2)"],
        "resume: processes 4 -> 2 (accepted): each step takes 16 completions where it took 32, the prompts after step 3 "
        "follow the new layout",
    ),
]


@pytest.mark.parametrize(("before", "now", "accept", "changes", "said"), RESUME_CASES)
def test_resume_on_another_process_count(before, now, accept, changes, said, prepared, monkeypatch):
    """The digit recipe: 8 completions a process a step (per_device_train_batch_size 8, gradient_accumulation_steps 1)."""
    monkeypatch.setenv("WORLD_SIZE", str(now))
    recipe = recipes.load("digit", ["training.per_device_train_batch_size=4", "training.gradient_accumulation_steps=2"])
    run = prepared(before)
    if changes is RecipeError:
        with pytest.raises(RecipeError) as refused:
            train._resume_processes(run, recipe, accept)
        assert refused.value.problems == [said.format(path=Path(run.path))]
        return
    assert train._resume_processes(run, recipe, accept) == changes
    assert run.notes == ([said] if said else [])


@pytest.mark.parametrize(
    ("raised", "status", "printed"),
    [
        (RunError("a fault of this process"), 1, "error: a fault of this process\n"),
        # another process printed the error line: this one says it stopped, in a plain line
        (ElsewhereError("stopped: process 1 of 2 failed"), 1, "grpo_ext: stopped: process 1 of 2 failed\n"),
    ],
)
def test_the_command_line_prints_an_error_once(raised, status, printed, monkeypatch, capsys):
    import argparse

    from grpo_ext import cli

    def fails(args):
        raise raised

    monkeypatch.setattr(cli, "parse_args", lambda argv: argparse.Namespace(fn=fails))
    assert cli.main(["train", "x.yaml"]) == status
    assert capsys.readouterr().err == printed


@pytest.mark.parametrize(
    "per_device, accumulated, processes, said",
    [
        (16, 1, 1, "16 completions (8 per prompt)"),  # one process, as the shipped recipes run
        (8, 1, 2, "16 completions (8 per prompt; 8 on each of 2 processes)"),
        (4, 2, 2, "16 completions (8 per prompt; 2 micro-batches of 4; 8 on each of 2 processes)"),
    ],
)
def test_the_training_line_counts_a_steps_completions_over_every_process(per_device, accumulated, processes, said):
    from types import SimpleNamespace

    args = SimpleNamespace(
        per_device_train_batch_size=per_device, gradient_accumulation_steps=accumulated, world_size=processes, num_generations=8
    )
    assert train._step_completions(args) == said
