"""Single replies sampled under DeepSpeed ZeRO-3 (run/sampling.whole_weights): inside TRL's own
unwrap_model_for_generation, with the weights gathered, and nothing at all on one process, under DDP or ZeRO-2; the
keywords passed to it on each TRL version (settings/compat.unwrap_kwargs)."""

import contextlib
import inspect
from types import SimpleNamespace

import pytest

from grpo_ext.run import sampling
from grpo_ext.settings import compat


class Untouched:
    """A trainer whose model and arguments must not be read."""

    def __init__(self, plugin):
        self.accelerator = SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin))

    @property
    def model_wrapped(self):
        raise AssertionError("the model was read")

    @property
    def args(self):
        raise AssertionError("the arguments were read")


@pytest.mark.parametrize(
    "trainer",
    [
        None,  # the tool loop: TRL's generation gathers on its own
        Untouched(None),  # one process, DDP: no DeepSpeed plugin
        Untouched(SimpleNamespace(zero_stage=2)),  # ZeRO-2: each process holds the whole weights
        Untouched(SimpleNamespace(zero_stage=1)),
    ],
)
def test_nothing_happens_without_zero3(trainer, monkeypatch):
    import trl.models

    monkeypatch.setattr(trl.models, "unwrap_model_for_generation", None)  # not called
    with sampling.whole_weights(trainer):
        pass


def test_zero3_samples_inside_trls_unwrap_with_the_weights_gathered(monkeypatch):
    import trl.models

    calls = []

    @contextlib.contextmanager
    def unwrap(model, accelerator, gather_deepspeed3_params=True, gradient_checkpointing_kwargs=None):
        calls.append((model, accelerator, gather_deepspeed3_params, gradient_checkpointing_kwargs))
        yield model

    monkeypatch.setattr(trl.models, "unwrap_model_for_generation", unwrap)
    trainer = SimpleNamespace(
        accelerator=SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=3))),
        model_wrapped="engine",
        args=SimpleNamespace(gradient_checkpointing_kwargs={"use_reentrant": False}, ds3_gather_for_generation=False),
    )
    with sampling.whole_weights(trainer):
        assert len(calls) == 1
    # gathered even with ds3_gather_for_generation false: before step 1 no hook fetches the weights layer by layer
    assert calls == [("engine", trainer.accelerator, True, {"use_reentrant": False})]


def old(model, accelerator, gather_deepspeed3_params=True): ...  # TRL 0.19.1's signature


def new(model, accelerator, gather_deepspeed3_params=True, generation_kwargs=None, gradient_checkpointing_kwargs=None): ...


@pytest.mark.parametrize(
    "unwrap, expected",
    [
        (old, {}),  # gradient checkpointing left alone while generating
        (new, {"gradient_checkpointing_kwargs": {"use_reentrant": False}}),  # turned back on with the run's kwargs
    ],
)
def test_unwrap_kwargs(unwrap, expected):
    assert compat.unwrap_kwargs(unwrap, {"use_reentrant": False}) == expected


def test_unwrap_kwargs_on_the_installed_trl():
    from trl.models import unwrap_model_for_generation

    takes = "gradient_checkpointing_kwargs" in inspect.signature(unwrap_model_for_generation).parameters
    assert compat.unwrap_kwargs(unwrap_model_for_generation, None) == ({"gradient_checkpointing_kwargs": None} if takes else {})
