"""On a CPU under bf16 autocast, a training step's forward runs without autocast's cache of the weights' bfloat16
copies (``run/heap.uncached_casts``): each copy is freed after its product instead of living to the pass's end; and
training's ``generate()`` runs under one bf16 autocast with that cache (``run/decoding.bf16_decoding``)."""

import pytest
import torch
import yaml
from transformers import TrainerCallback

import grpo_ext
from grpo_ext.run import hardware, heap
from tests.helpers import tiny_doc


class SeesAutocast(TrainerCallback):
    """Records, at each forward of the model's input embedding in training that ``when()`` picks, whether autocast is
    on and whether it caches casts (inside the model: accelerate's autocast wraps the model's forward, within its
    hooks)."""

    def __init__(self, when) -> None:
        self.when = when
        self.seen: list[tuple[bool, bool]] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        def pre(module, inputs):
            if self.when(module):
                self.seen.append((torch.is_autocast_enabled("cpu"), torch.is_autocast_cache_enabled()))

        model.get_input_embeddings().register_forward_pre_hook(pre)


def loss_pass(module) -> bool:
    return module.training and torch.is_grad_enabled()  # not generate(), which runs without gradients


def generation(module) -> bool:
    return not torch.is_grad_enabled()  # generate(): with beta 0 and one iteration a batch, TRL runs no other


@pytest.mark.parametrize("kept", [False, True])
def test_a_training_forward_casts_without_the_cache(digit_doc, tiny_model, tmp_path, monkeypatch, kept):
    if kept:
        monkeypatch.setenv(heap.CAST_CACHE, "1")
    else:
        monkeypatch.delenv(heap.CAST_CACHE, raising=False)
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", eval={"enabled": False})
    doc["training"].update(bf16=True, max_steps=1, save_strategy="no")
    doc["groups"] = {"skip_zero_advantage": False}  # the tiny model's groups may all score alike: keep their loss pass
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    seen = SeesAutocast(loss_pass)
    grpo_ext.train(path, callbacks=[seen])
    assert seen.seen, "no training forward was seen"
    assert all(on for on, _ in seen.seen)  # the loss pass runs under bf16 autocast
    assert {cached for _, cached in seen.seen} == {kept}


@pytest.mark.parametrize("once", [True, False])
def test_training_generates_from_bf16_copies_cast_once(digit_doc, tiny_model, tmp_path, monkeypatch, once):
    if once:
        monkeypatch.delenv(hardware.CAST_ONCE, raising=False)
    else:
        monkeypatch.setenv(hardware.CAST_ONCE, "0")
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", eval={"enabled": False})
    doc["training"].update(bf16=True, max_steps=1, save_strategy="no", beta=0.0)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    seen = SeesAutocast(generation)
    grpo_ext.train(path, callbacks=[seen])
    assert seen.seen, "no generation forward was seen"
    assert {on for on, _ in seen.seen} == {True}  # each decoding step, under bf16 autocast either way
    assert {cached for _, cached in seen.seen} == {once}  # TRL's path: accelerate's block, which casts at each token


def test_only_a_cpu_under_native_amp_casts_once():
    assert hardware.decodes_from_bf16_copies("cpu", True, {})
    assert not hardware.decodes_from_bf16_copies("cpu", True, {hardware.CAST_ONCE: "0"})
    assert not hardware.decodes_from_bf16_copies("cpu", False, {})  # float32 training: float32 generation
    assert not hardware.decodes_from_bf16_copies("cuda", True, {})  # TRL's own path on a GPU
