"""Reward faults: each stops the run with one line of a fixed shape, or (on_error: skip) scores None and is counted
(a reward that ends its process, and tiny runs with exiting rewards: tests/integration/test_reward_faults_processes.py)."""

import re
import sys
import threading
import time

import pytest

from grpo_ext.core.errors import RunError
from grpo_ext.rewards.guard import Guarded

COMPLETIONS = ["7", "seven is my answer, final", "3", "boom goes the reward"]


def raises_on_boom(completions, **kwargs):
    return [1 / 0 if "boom" in c else 1.0 for c in completions]


def batch_only_failure(completions, **kwargs):
    if len(completions) > 1:
        raise RuntimeError("needs a batch of one")
    return [0.5]


def hangs(completions, **kwargs):
    time.sleep(30)


FAULTS = [
    # (reward, exact message as a regular expression)
    (
        raises_on_boom,  # raises on one sample: names reward, sample index, start of completion, the fix
        r"reward 'r' raised ZeroDivisionError: division by zero on sample 3 of 4 \(completion 'boom goes the reward'\); "
        r"fix the reward or set rewards\[1\]\.on_error: skip",
    ),
    (
        lambda completions, **kw: [1.0] * 3,  # wrong number of scores
        r"reward 'r' returned 3 scores for 4 completions; return one score per completion",
    ),
    (
        lambda completions, **kw: 1.0,  # not a list at all
        r"reward 'r' returned a float for 4 completions; return one score per completion",
    ),
    (
        lambda completions, **kw: [1.0, float("nan"), 0.0, 0.0],  # NaN
        r"reward 'r' gave nan for sample 1 of 4 \(completion 'seven is my answer, final'\); a score is a finite number or None",
    ),
    (
        lambda completions, **kw: [1.0, 0.0, float("inf"), 0.0],  # infinity
        r"reward 'r' gave inf for sample 2 of 4 \(completion '3'\); a score is a finite number or None",
    ),
    (
        lambda completions, **kw: [1.0, "high", 0.0, 0.0],  # a string
        r"reward 'r' gave 'high' for sample 1 of 4 \(completion 'seven is my answer, final'\); "
        r"a score is a finite number or None",
    ),
    (
        lambda completions, **kw: [True, 0.0, 0.0, 0.0],  # a bool is not a score
        r"reward 'r' gave True for sample 0 of 4 \(completion '7'\); a score is a finite number or None",
    ),
    (
        batch_only_failure,  # fails on the batch, each sample alone is fine
        r"reward 'r' raised RuntimeError: needs a batch of one on a batch of 4 completions, though each sample alone scores; "
        r"the reward depends on the batch: fix it",
    ),
    (
        hangs,  # hangs: stopped by the per-call time limit
        r"reward 'r' did not return within 0\.3 s on a batch of 4 completions; make it faster or raise rewards\[1\]\.timeout",
    ),
]


@pytest.mark.parametrize("fn,pattern", FAULTS, ids=[p[:40] for _, p in FAULTS])
def test_fault_message_shape(fn, pattern):
    guarded = Guarded(fn, "r", where="rewards[1]", timeout=0.3)
    with pytest.raises(RunError) as info:
        guarded(completions=COMPLETIONS, prompts=["p"] * 4)
    assert re.fullmatch(pattern, str(info.value)), str(info.value)


def test_skip_scores_none_and_counts(capsys):
    guarded = Guarded(raises_on_boom, "r", where="rewards[0]", on_error="skip", timeout=5)
    assert guarded(completions=COMPLETIONS) == [1.0, 1.0, 1.0, None]  # only the failing sample loses its score
    assert guarded(completions=COMPLETIONS * 2) == [1.0, 1.0, 1.0, None] * 2
    assert guarded.skipped == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "grpo_ext: warning: reward 'r' raised ZeroDivisionError: division by zero on sample 3 of 4 (completion "
        "'boom goes the reward'); scored None (rewards[0].on_error: skip), counted as reward_errors/r in metrics.jsonl"
    ]


def test_every_none_is_counted_per_logged_step():
    """reward_none/NAME counts each sample scored None, the reward's own (nothing to judge) and an error's alike;
    reward_errors/NAME only the errors'. Both start again after each line."""
    from grpo_ext.rewards.guard import reward_meter

    def picky(completions, **kwargs):
        return [None if c == "3" else s for c, s in zip(completions, raises_on_boom(completions), strict=True)]

    guarded = Guarded(picky, "picky", on_error="skip", timeout=5)
    meter = reward_meter([guarded])
    logs = [{"reward": 0.5}, {"reward": 0.5}]
    assert guarded(completions=COMPLETIONS) == [1.0, 1.0, None, None]  # "3" its own None, "boom" an error's
    meter.on_log(None, None, None, logs=logs[0])
    meter.on_log(None, None, None, logs=logs[1])
    assert [(log["reward_none/picky"], log["reward_errors/picky"]) for log in logs] == [(2, 1), (0, 0)]


def test_skip_does_not_hide_bad_scores():
    guarded = Guarded(lambda completions, **kw: [float("nan")] * len(completions), "r", on_error="skip")
    with pytest.raises(RunError, match="gave nan for sample 0"):
        guarded(completions=COMPLETIONS)


def test_per_sample_retry_slices_columns():
    """Dataset columns reach the one-sample retry sliced to that sample, other keyword arguments unchanged."""
    seen = []

    def needs_answer(completions, answer, trainer_state=None, **kwargs):
        seen.append((list(answer), trainer_state))
        if len(completions) == 1 and answer[0] == "x":
            raise KeyError("x")
        return [float(c == a) for c, a in zip(completions, answer, strict=True)] if len(completions) == 1 else 1 / 0

    guarded = Guarded(needs_answer, "r", on_error="skip")
    assert guarded(completions=["1", "2"], answer=["1", "x"], trainer_state="S") == [1.0, None]
    assert seen[1:] == [(["1"], "S"), (["x"], "S")]


def test_time_limit_works_off_the_main_thread():
    """Liveness, not speed: the call, made from a thread that is not the main one, fails at its 0.3 s limit while the
    reward still sleeps out its 30 s; no bound in seconds, so a busy machine cannot fail it."""
    result, woke = {}, threading.Event()

    def hangs_then_wakes(completions, **kwargs):
        time.sleep(30)
        woke.set()

    def call():
        try:
            Guarded(hangs_then_wakes, "r", timeout=0.3)(completions=["a"])
        except RunError as exc:
            result["error"] = str(exc)
            result["reward_woke"] = woke.is_set()

    worker = threading.Thread(target=call)
    worker.start()
    worker.join(30)
    assert result == {
        "error": "reward 'r' did not return within 0.3 s on a batch of 1 completions; make it faster or raise rewards[i].timeout",
        "reward_woke": False,
    }


def test_limit_none_calls_directly():
    assert Guarded(lambda completions, **kw: [0.25] * len(completions), "r", timeout=None)(completions=["a"]) == [0.25]


def test_reward_thread_inherits_grad_mode():
    import torch

    seen = []
    guarded = Guarded(lambda completions, **kw: seen.append(torch.is_grad_enabled()) or [0.0], "r", timeout=5)
    with torch.no_grad():
        guarded(completions=["a"])
    guarded(completions=["a"])
    assert seen == [False, True]


def exits(completions, **kwargs):
    sys.exit(0)


def exits_with_status(completions, **kwargs):
    raise SystemExit(3)


def interrupts(completions, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "fn,timeout,on_error,reason",
    [
        (exits, 0.5, "fail", "SystemExit: 0"),  # sys.exit(0) on the reward's thread: a failure, not a success
        (exits_with_status, 0.5, "skip", "SystemExit: 3"),  # never skipped as a sample's error
        (interrupts, 0.5, "fail", "KeyboardInterrupt"),  # raised by the reward itself, not Ctrl-C
        (exits, None, "fail", "SystemExit: 0"),  # no time limit: on the caller's thread, the same failure
    ],
)
def test_exit_inside_a_reward_is_a_failure_naming_it(fn, timeout, on_error, reason):
    guarded = Guarded(fn, "r", where="rewards[2]", on_error=on_error, timeout=timeout)
    with pytest.raises(RunError) as info:
        guarded(completions=COMPLETIONS)
    assert str(info.value) == (
        f"reward 'r' raised {reason} on a batch of 4 completions; a reward returns scores and never exits: "
        f"fix the reward (rewards[2])"
    )


def test_ctrl_c_without_a_limit_stays_an_interrupt():
    """With ``timeout: null`` the reward runs on the caller's thread, where KeyboardInterrupt may be the user's
    Ctrl-C: the run is interrupted (exit 130), not failed."""
    with pytest.raises(KeyboardInterrupt):
        Guarded(interrupts, "r", timeout=None)(completions=COMPLETIONS)
