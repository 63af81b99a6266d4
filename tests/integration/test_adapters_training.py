"""LoRA and QLoRA on a tiny model: a LoRA recipe validates without heavy imports (a subprocess), the LoRA keys read
without peft are peft's LoraConfig fields, training, and `grpo-ext merge` of the trained adapter."""

import dataclasses
import subprocess
import sys

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import models
from grpo_ext.settings import adapters
from grpo_ext.verbs import merge
from tests.helpers import ROOT, mutate


def test_lora_recipe_validates_without_torch(digit_doc, write_recipe):
    file = write_recipe(mutate(mutate(digit_doc, "model.lora", {"r": 8, "lora_alpha": 16}), "model.quantization", "4bit"))
    code = (
        "import sys; from grpo_ext import recipe; r = recipe.load(sys.argv[1]); "
        "assert not {'torch', 'peft', 'bitsandbytes'} & set(sys.modules), 'heavy import'; print(r.model.lora['r'])"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(file)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "8", proc.stderr


def test_lora_keys_read_without_import_match_peft():
    from peft import LoraConfig, PeftConfig

    inherited = {f.name for f in dataclasses.fields(PeftConfig)}
    assert adapters.lora_keys() == {f.name for f in dataclasses.fields(LoraConfig)} - inherited


@pytest.fixture(scope="module")
def tiny64(tmp_path_factory):
    """A tiny model wide enough for bitsandbytes' 64-value 4-bit blocks."""
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny64") / "model", hidden=64)


def train_tiny(tiny64, digit_doc, tmp_path, quantization):
    doc = mutate(mutate(digit_doc, "model.lora", {"r": 8, "lora_alpha": 16}), "model.quantization", quantization)
    doc["model"]["name"] = str(tiny64)
    doc["training"].update(
        max_steps=3,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        learning_rate=0.05,
        save_strategy="no",
    )
    doc["eval"]["enabled"] = False
    doc["output_dir"] = str(tmp_path / "run")
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    return tmp_path / "run"


QUANT = [
    # model.quantization of the run
    None,  # LoRA over a float32 base
    "4bit",  # QLoRA: NF4 base, merged into its dequantized weights
]


@pytest.mark.parametrize("quantization", QUANT)
def test_merge_reproduces_trained_answers(quantization, tiny64, digit_doc, tmp_path, no_hub, capsys):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = train_tiny(tiny64, digit_doc, tmp_path, quantization)
    final = run / "final"
    assert (final / "adapter_config.json").is_file() and not (final / "model.safetensors").exists()
    adapter = load_file(final / "adapter_model.safetensors")
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in adapter.items())  # the adapter learned something

    assert cli.main(["merge", str(run), "--out", str(tmp_path / "merged")]) == 0
    assert "8 identical to the trained model's" in capsys.readouterr().err

    # Independently: the trained model (base + adapter) and the merged checkpoint answer alike.
    recipe = merge.read_run(run)
    trained, tokenizer, _ = models.load_adapter(run / "final", recipe.model, log=lambda _m: None)
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert not hasattr(merged.config, "quantization_config")
    tok = AutoTokenizer.from_pretrained(tmp_path / "merged")
    tok.padding_side = "left"
    assert merge.greedy_answers(merged, tok, recipe) == merge.greedy_answers(trained, tokenizer, recipe)
    base = AutoModelForCausalLM.from_pretrained(tiny64)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(base.state_dict()[name], merged.state_dict()[name])  # the adapter is folded in
