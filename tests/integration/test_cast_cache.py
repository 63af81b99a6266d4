"""On a CPU under bf16 autocast, a training step's forward runs without autocast's cache of the weights' bfloat16
copies (``run/heap.uncached_casts``): each copy is freed after its product instead of living to the pass's end."""

import pytest
import torch
import yaml
from transformers import TrainerCallback

import grpo_ext
from grpo_ext.run import heap
from tests.helpers import tiny_doc


class SeesAutocast(TrainerCallback):
    """Records, at each forward of the model's input embedding in training, whether autocast is on and whether it
    caches casts (inside the model: accelerate's autocast wraps the model's forward, within its hooks)."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, bool]] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        def pre(module, inputs):
            if module.training:
                self.seen.append((torch.is_autocast_enabled("cpu"), torch.is_autocast_cache_enabled()))

        model.get_input_embeddings().register_forward_pre_hook(pre)


@pytest.mark.parametrize("kept", [False, True])
def test_a_training_forward_casts_without_the_cache(digit_doc, tiny_model, tmp_path, monkeypatch, kept):
    if kept:
        monkeypatch.setenv(heap.CAST_CACHE, "1")
    else:
        monkeypatch.delenv(heap.CAST_CACHE, raising=False)
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", eval={"enabled": False})
    doc["training"].update(bf16=True, max_steps=1, save_strategy="no")
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    seen = SeesAutocast()
    grpo_ext.train(path, callbacks=[seen])
    assert seen.seen, "no training forward was seen"
    assert all(on for on, _ in seen.seen)  # the loss pass runs under bf16 autocast
    assert {cached for _, cached in seen.seen} == {kept}
