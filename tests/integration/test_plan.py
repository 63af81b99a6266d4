"""`grpo-ext plan`: model shape from a meta-device model, the memory estimate, and the CLI's advice."""

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.recipe import validate
from grpo_ext.run import memory


def test_shape_matches_the_loaded_model(tiny_model):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    shape = memory.model_shape(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert shape.params == model.num_parameters()  # tied embeddings counted once
    for targets in ("all-linear", ["q_proj", "v_proj"]):
        settings = {"r": 4, "lora_alpha": 8, "target_modules": targets}
        peft_model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(tiny_model), LoraConfig(task_type="CAUSAL_LM", **settings)
        )
        assert memory.lora_params(shape, settings) == sum(p.numel() for p in peft_model.parameters() if p.requires_grad)


@pytest.fixture
def tiny_doc(digit_doc, tiny_model, tmp_path):
    digit_doc["model"]["name"] = str(tiny_model)
    digit_doc["output_dir"] = str(tmp_path / "run")
    return digit_doc


def components(doc: dict, device: str = "cpu") -> dict[str, int]:
    recipe = validate(doc)
    shape = memory.model_shape(memory.config_source(recipe.model, recipe.base_dir))
    return dict((name, n) for name, n, _ in memory.estimate(recipe, shape, 40, device))


CHANGES = [
    # (override applied to the tiny digit recipe, component, expected direction against the plain recipe)
    ({"model": {"lora": True}}, "gradients + AdamW", "lower"),  # only adapters train
    ({"model": {"lora": True, "quantization": "4bit"}}, "weights", "lower"),  # 4-bit linear layers
    ({"training": {"gradient_checkpointing": True}}, "activations", "lower"),
    ({"training": {"max_completion_length": 64}}, "activations", "higher"),
    ({"training": {"per_device_train_batch_size": 32}}, "activations", "higher"),
]


@pytest.mark.parametrize("change,component,direction", CHANGES, ids=[f"{c[1]}-{c[2]}-{i}" for i, c in enumerate(CHANGES)])
def test_estimate_moves_the_right_way(change, component, direction, tiny_doc):
    before = components(tiny_doc)[component]
    doc = yaml.safe_load(yaml.safe_dump(tiny_doc))
    for section, values in change.items():
        doc[section].update(values)
    after = components(doc)[component]
    assert (after < before) if direction == "lower" else (after > before)


REFERENCE = [
    # (beta, model.lora, holds a reference model?)
    (0.0, None, False),  # beta 0: TRL loads no reference
    (0.04, None, True),  # full fine-tuning with a KL term keeps a frozen copy
    (0.04, True, False),  # with LoRA, TRL disables the adapter instead
]


@pytest.mark.parametrize("beta,lora,has_ref", REFERENCE)
def test_reference_model_counted_when_loaded(beta, lora, has_ref, tiny_doc):
    tiny_doc["training"]["beta"] = beta
    tiny_doc["model"]["lora"] = lora
    assert ("reference model" in components(tiny_doc)) == has_ref


def test_gpu_plan_has_cuda_context_and_no_runtime(tiny_doc):
    parts = components(tiny_doc, "cuda")
    assert "CUDA context" in parts and "runtime" not in parts and "checkpoint save" not in parts


def test_cli_advises_when_it_does_not_fit(tiny_doc, write_recipe, capsys):
    path = write_recipe(tiny_doc)
    assert cli.main(["plan", str(path), "--gpu-memory", "1MiB"]) == 1
    out = capsys.readouterr().out
    assert "does not fit in 1 MiB" in out and "model.lora=true" in out and "training.gradient_checkpointing=true" in out
    assert cli.main(["plan", str(path), "--gpu-memory", "100GiB"]) == 0
    assert "fits in 100.00 GiB" in capsys.readouterr().out


def test_cli_bad_size_exits_2(tiny_doc, write_recipe, capsys):
    assert cli.main(["plan", str(write_recipe(tiny_doc)), "--gpu-memory", "lots"]) == 2
    assert capsys.readouterr().err.startswith("error: --gpu-memory: 'lots' is not a size")
