"""LoRA and quantization from the recipe: validation, LoRA settings, dry runs and refusals of `grpo-ext merge`
(training and merging a tiny model: tests/integration/test_adapters_training.py)."""

import json

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import adapters
from tests.helpers import mutate

BAD = [
    # (key path, new value, text the error must contain)
    ("model.lora", {"r": 8, "alpha": 16}, "model.lora.alpha: unknown LoraConfig key; did you mean 'lora_alpha'?"),  # peft's name
    ("model.lora", {"r": 0}, "model.lora.r: the adapter rank must be at least 1, got 0"),
    ("model.lora", {"r": "big"}, "model.lora.r: expected an integer, got str 'big'"),
    ("model.lora", {"lora_dropout": 1.5}, "model.lora.lora_dropout: a dropout probability is in [0, 1), got 1.5"),
    ("model.lora", {"task_type": "SEQ_CLS"}, "model.lora.task_type: set by grpo_ext; remove it"),  # grpo_ext trains causal LMs
    ("model.lora", "yes", "model.lora: expected a mapping or true or false or null, got str 'yes'"),
    ("model.quantization", "4bit", "model.quantization: 4bit weights cannot be trained directly; add model.lora"),  # no adapter
    ("model.quantization", "2bit", "model.quantization: '2bit' is not one of '4bit', '8bit', None"),
]


@pytest.mark.parametrize("path,value,expected", BAD, ids=[f"{b[0]}:{str(b[1])[:16]}" for b in BAD])
def test_bad_model_section_exits_2(path, value, expected, digit_doc, write_recipe, tmp_path, capsys):
    digit_doc["output_dir"] = str(tmp_path / "run")
    assert cli.main(["train", str(write_recipe(mutate(digit_doc, path, value)))]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


VLLM = [
    # (model.quantization, training.use_vllm, refused?)
    ("4bit", True, True),  # TRL merges the adapter into 4-bit weights at each sync: known to fail
    ("8bit", True, True),  # vLLM has no in-flight 8-bit loading
    (None, True, False),  # LoRA with vLLM: TRL merges into the bf16 weights, supported
    ("4bit", False, False),  # QLoRA with transformers generation
]


@pytest.mark.parametrize("quant,use_vllm,refused", VLLM)
def test_vllm_with_quantized_base_is_refused(quant, use_vllm, refused):
    problems = adapters.check({"lora": True, "quantization": quant}, {"use_vllm": use_vllm})
    assert any(p.startswith("training.use_vllm: vLLM generation with a") for p in problems) == refused


SETTINGS = [
    # (model.lora, LoRA settings used)
    (None, None),  # no adapter: full fine-tuning
    (False, None),
    (True, adapters.LORA_DEFAULTS),  # true: the defaults
    (
        {"r": 4, "target_modules": ["q_proj", "v_proj"]},
        {**adapters.LORA_DEFAULTS, "r": 4, "target_modules": ["q_proj", "v_proj"]},
    ),
]


@pytest.mark.parametrize("lora,expected", SETTINGS)
def test_lora_settings(lora, expected):
    assert adapters.lora_settings(lora) == expected


MERGE_BAD = [
    # (what the directory holds, text of the error)
    ("nothing", "no recipe.yaml here"),
    ("full", "holds a full model, already loadable with from_pretrained; merge needs a run trained with model.lora"),
]


@pytest.mark.parametrize("holds,expected", MERGE_BAD)
def test_merge_refuses_runs_without_adapter(holds, expected, tmp_path, digit_doc, capsys):
    if holds == "full":
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(digit_doc))
        (tmp_path / "final").mkdir()
        (tmp_path / "final" / "config.json").write_text(json.dumps({}))
    assert cli.main(["merge", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and err.count("\n") == 1


HUB_RECIPES = [
    # (shipped recipe, training line of the dry run)
    ("digit-zh", "training: full fine-tuning"),  # the tutorial's Chinese prompts
    ("gsm8k/qwen2.5-1.5b-qlora", "training: LoRA r=16 alpha=32 on all-linear over a 4bit base"),
]


@pytest.mark.parametrize("name,expected", HUB_RECIPES)
def test_hub_recipes_dry_run_offline(name, expected, no_hub, capsys):
    assert cli.main(["train", name, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert expected in out and "Hugging Face hub id 'Qwen/" in out


@pytest.mark.parametrize(
    "recipe_name,missing,expected",
    [
        # (shipped recipe, package this environment lacks, the one line that names the fix)
        ("digit-qlora", "bitsandbytes", "model.quantization: 4bit needs bitsandbytes; run: pip install 'grpo_ext[quant]'"),
        ("digit-lora", "peft", "model.lora: peft is not installed; run: pip install peft"),
    ],
)
def test_missing_package_is_noted_by_dry_run_and_refused_by_a_run(recipe_name, missing, expected, monkeypatch, tmp_path, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    assert cli.main(["train", recipe_name, "--dry-run"]) == 0
    assert f"note: {expected}" in capsys.readouterr().out
    assert cli.main(["train", recipe_name, f"output_dir={tmp_path / 'run'}"]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
