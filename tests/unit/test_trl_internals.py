"""What the fence around TRL's private internals (grpo_ext/run/trl_internals.py) reads of a trainer, without a model:
the batch TRL keeps for its printing, the step's metrics a behaviour logs into, the hooks a behaviour leaves alone,
and a TRL that lacks a method the hooks are called from."""

import collections
import types

import pytest

from grpo_ext.run import trl_internals
from grpo_ext.run.trl_internals import Behaviour, Step


class Trainer:
    """A stand-in holding only what a GRPOTrainer keeps of its last batch, under the attribute its TRL uses."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


BATCH = {"prompt": ["p", "p"], "completion": ["1", "x"], "rewards": {"digit_exact": [1.0, 0.0]}, "advantages": [0.7, -0.7]}
SAMPLED_CASES = [
    # TRL 0.20 and later
    (Trainer(_logs={**BATCH, "images": [], "extra": {}}), BATCH),
    # TRL 0.19
    (Trainer(_textual_logs=BATCH), BATCH),
    # a TRL that keeps no batch: no log, and the run goes on
    (Trainer(), None),
    # a shape moved again: a reward's scores that do not line up with the completions are not guessed at
    (Trainer(_logs={**BATCH, "rewards": {"digit_exact": [1.0]}}), None),
    (Trainer(_logs={"prompt": ["p"], "completion": ["1"]}), None),
]


@pytest.mark.parametrize(("trainer", "expected"), SAMPLED_CASES)
def test_sampled_reads_the_batch_where_trl_keeps_it(trainer, expected):
    assert trl_internals.sampled(trainer) == expected


STEP_CASES = [
    # (training, calls of (method, name, value), the metrics after)
    (True, [("log", "skipped_rows", 0.5), ("log", "skipped_rows", 0.25)], {"train": {"skipped_rows": [0.5, 0.25]}}),
    # a count over the step: one entry, summed into
    (True, [("tally", "dropped", 2), ("tally", "dropped", 1)], {"train": {"dropped": [3]}}),
    (False, [("log", "tools/dropped_frequency", 1.0)], {"eval": {"tools/dropped_frequency": [1.0]}}),  # sampling for an eval
]


@pytest.mark.parametrize(("training", "calls", "expected"), STEP_CASES)
def test_a_step_logs_into_the_mode_the_trainer_is_in(training, calls, expected):
    metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}
    step = Step(types.SimpleNamespace(model=types.SimpleNamespace(training=training)), metrics)
    for method, name, value in calls:
        getattr(step, method)(name, value)
    assert {mode: dict(entries) for mode, entries in metrics.items() if entries} == expected


def test_a_behaviour_passes_through_the_hooks_it_does_not_override():
    class Quiet(Behaviour):
        pass

    step, batch = Step(None, {}), {"advantages": [0.0]}
    assert Quiet().on_rewards(step, [], [], None) is None
    assert Quiet().on_batch(step, batch) is batch
    assert Quiet().on_loss(step, None, batch, lambda inputs: ("loss of", inputs)) == ("loss of", batch)


@pytest.mark.parametrize("name", trl_internals.HOOKED)
def test_a_trl_without_a_hooked_method_refuses_the_behaviours(name, monkeypatch):
    """A TRL that renamed a method the hooks are called from would leave the behaviours uncalled: refused instead."""
    from trl import GRPOTrainer

    from grpo_ext.core.errors import RunError

    monkeypatch.delattr(GRPOTrainer, name)

    class Quiet(Behaviour):
        pass

    with pytest.raises(RunError, match=rf"GRPOTrainer has no {name}, where grpo_ext calls Quiet; install a tested TRL: pip"):
        trl_internals.make({}, [Quiet()])
