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


def test_a_run_without_quantization_never_runs_bitsandbytes_import():
    """peft imports bitsandbytes at its own import, ~2 s of a run's start on a CPU; the run layer registers it to load
    on first use (core/deferred.py), so a process that imports the trainer, TRL and peft has not run it."""
    code = (
        "import sys; from grpo_ext.run import trainer; import trl, peft; from trl import GRPOTrainer; "
        "from peft import LoraConfig; import bitsandbytes; "
        "print(sorted(m for m in sys.modules if m.startswith('bitsandbytes')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "['bitsandbytes']", proc.stderr


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


def test_a_4bit_base_passes_gradients_after_an_eval(tiny64, digit_doc):
    """bitsandbytes repacks a 4-bit layer for its CPU inference kernel (on a CPU with AVX512-BF16) the first time it
    runs in eval mode without gradients, as the eval before training does; that kernel passes no gradient to the
    layer's input. The loader keeps the trainable layout: the adapters' gradients after an eval equal those before
    it. (Where bitsandbytes does not repack, both halves of the check agree with or without the loader's setting.)"""
    import torch
    from bitsandbytes.functional import has_avx512bf16
    from peft import get_peft_model

    lora = {"r": 8, "lora_alpha": 16, "target_modules": "all-linear"}
    section = models.Model(str(tiny64), "auto", False, None, lora, "4bit", None)
    base, tokenizer, _ = models.load(section, ROOT)
    model = get_peft_model(base, models.lora_config(section))
    ids = tokenizer(["Reply with one digit.", "Pick a digit."], return_tensors="pt", padding=True)

    def gradients() -> dict:
        model.train()
        model.zero_grad()
        model(**ids, labels=ids["input_ids"]).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    before = gradients()
    model.eval()
    with torch.no_grad():
        model(**ids)  # what an eval's generate() runs: eval mode, no gradients
    after = gradients()
    assert before.keys() == after.keys() and len(before) > 0
    lowest = min(n for n in before if ".layers.0." in n and "lora_B" in n)  # lora_A starts with no gradient (B is 0)
    assert before[lowest].abs().sum() > 0
    for name in before:
        assert torch.allclose(before[name], after[name], atol=1e-6), name
    if has_avx512bf16():  # the setting the loader changed is the one bitsandbytes reads
        quantized = [m for m in base.modules() if hasattr(m, "support_avx512bf16_for_cpu")]
        assert quantized and not any(m.support_avx512bf16_for_cpu for m in quantized)
