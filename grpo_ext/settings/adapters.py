"""LoRA and bitsandbytes quantization settings of the recipe's ``model:`` section, checked without peft or torch.

``model.lora`` holds peft ``LoraConfig`` keys (``r``, ``lora_alpha``, ``target_modules``, ...); the
names are read from peft's source with ``ast`` so that a recipe is checked without importing peft or
torch. ``model.quantization: 4bit`` loads the base model in NF4 with double quantization (QLoRA),
``8bit`` in LLM.int8(); both need LoRA, since quantized weights cannot be trained directly.

Loading (peft's LoraConfig, transformers' BitsAndBytesConfig, the trained adapter, merging) is in ``models``.
"""

import ast
import importlib.util
from functools import cache
from pathlib import Path

from grpo_ext.core.text import suggest
from grpo_ext.core.values import coerce, wrong_kind

LORA_DEFAULTS: dict[str, object] = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}

# LoraConfig keys that grpo_ext sets itself.
LORA_RESERVED = {
    "task_type",
    "peft_type",
    "base_model_name_or_path",
    "revision",
    "inference_mode",
    "auto_mapping",
    "peft_version",
    "runtime_config",
}

# Kinds checked before anything loads; other LoraConfig keys are checked by peft when the run starts.
LORA_KINDS: dict[str, tuple[str, ...]] = {
    "r": ("int",),
    "lora_alpha": ("float",),
    "lora_dropout": ("float",),
    "target_modules": ("str", "list"),
    "exclude_modules": ("str", "list", "null"),
    "bias": ("str",),
    "use_rslora": ("bool",),
    "use_dora": ("bool",),
    "modules_to_save": ("list", "null"),
    "init_lora_weights": ("bool", "str"),
    "rank_pattern": ("dict",),
    "alpha_pattern": ("dict",),
    "layers_to_transform": ("int", "list", "null"),
}


@cache
def lora_keys() -> frozenset[str]:
    """Field names of the installed peft's LoraConfig, read from its source (peft is not imported)."""
    spec = importlib.util.find_spec("peft")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    source = Path(next(iter(spec.submodule_search_locations))) / "tuners" / "lora" / "config.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "LoraConfig":
            return frozenset(s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    return frozenset()


def lora_settings(lora: dict | bool | None) -> dict | None:
    """The LoRA keys a run uses for ``model.lora`` (defaults filled in), or None without LoRA. ``lora: true`` means
    the defaults."""
    if lora is None or lora is False:
        return None
    return {**LORA_DEFAULTS, **(lora if isinstance(lora, dict) else {})}


def missing_packages(lora: dict | bool | None, quant: str | None) -> list[str]:
    """Packages the recipe's ``model.lora`` and ``model.quantization`` need that this environment lacks, one line
    each with the fix.

    Kept apart from ``check``: the recipe itself is fine, so a dry run notes these and a real run refuses them.
    """
    missing = []
    if lora not in (None, False) and importlib.util.find_spec("peft") is None:
        missing.append("model.lora: peft is not installed; run: pip install peft")
    if quant is not None and importlib.util.find_spec("bitsandbytes") is None:
        missing.append(f"model.quantization: {quant} needs bitsandbytes; run: pip install 'grpo_ext[quant]'")
    return missing


def check(model_cfg: dict, training: dict) -> list[str]:
    """Problems with model.lora / model.quantization and their combination with vLLM generation."""
    problems = []
    lora = model_cfg.get("lora")
    if isinstance(lora, dict):
        valid = lora_keys() - LORA_RESERVED  # empty without peft: missing_packages() says so
        for key, value in lora.items() if valid else ():
            where = f"model.lora.{key}"
            if key in LORA_RESERVED:
                problems.append(f"{where}: set by grpo_ext; remove it")
            elif key not in valid:
                problems.append(f"{where}: unknown LoraConfig key{suggest(str(key), valid)}")
            elif key in LORA_KINDS:
                value, ok = coerce(value, LORA_KINDS[key])
                if not ok:
                    problems.append(f"{where}: {wrong_kind(LORA_KINDS[key], value)}")
                elif key == "r" and value < 1:
                    problems.append(f"{where}: the adapter rank must be at least 1, got {value}")
                elif key == "lora_dropout" and not 0 <= value < 1:
                    problems.append(f"{where}: a dropout probability is in [0, 1), got {value}")
                else:
                    lora[key] = value
    quant = model_cfg.get("quantization")
    if quant is not None and lora_settings(lora) is None:
        problems.append(
            f"model.quantization: {quant} weights cannot be trained directly; add model.lora (e.g. lora: true) "
            "or set quantization: null"
        )
    if quant is not None and training.get("use_vllm"):
        problems.append(
            f"training.use_vllm: vLLM generation with a {quant} base is not supported by TRL (it merges the "
            "adapter into the quantized weights each sync); set model.quantization: null or use_vllm: false"
        )
    return problems


def describe(lora: dict | bool | None, quant: str | None) -> str:
    """One line: how the model is trained (full, LoRA, QLoRA), by ``model.lora`` and ``model.quantization``."""
    settings = lora_settings(lora)
    if settings is None:
        return "full fine-tuning (every weight trains)"
    adapter = f"LoRA r={settings['r']} alpha={settings['lora_alpha']} on {settings['target_modules']}"
    return f"{adapter} over a {quant} base (bitsandbytes)" if quant else adapter
