"""Loading models: the base a recipe names (with LoRA and 4-bit/8-bit settings), a run's trained model, and merging.

One loader serves training, ``grpo-ext eval``, ``grpo-ext merge`` and its check: a LoRA run's trained
model is always its base loaded as in training (quantized under QLoRA) with the adapter on top, unmerged,
so every verb scores the arithmetic the run trained. ``merge`` dequantizes a quantized base first, so the
merged weights are the weights the adapter was trained against.
"""

import dataclasses
import json
from pathlib import Path

import yaml

from grpo_ext.core import catalog, console
from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.core.files import exists, user_path
from grpo_ext.core.yaml_io import load_yaml
from grpo_ext.recipe import Model
from grpo_ext.run import hardware, heap, launch, model_cache
from grpo_ext.settings import adapters, compat, model_names


def lora_config(model: Model):
    """A peft LoraConfig for the recipe, or None without LoRA."""
    settings = adapters.lora_settings(model.lora)
    if settings is None:
        return None
    from peft import LoraConfig

    try:
        return LoraConfig(task_type="CAUSAL_LM", **settings)
    except (TypeError, ValueError) as exc:
        raise RecipeError(f"model.lora: peft refused it: {str(exc).splitlines()[0]}") from None


def quantization_config(quant: str | None):
    """A transformers BitsAndBytesConfig for ``model.quantization``, or None."""
    if quant is None:
        return None
    from transformers import BitsAndBytesConfig

    if quant == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=hardware.compute_dtype(),
    )


def ask_hub(model: Model, base_dir: Path, log=console.say) -> None:
    """A hub id that the Hub cannot serve and the local Hugging Face cache lacks stops a run here (HubUnreachable, one
    line), before torch loads and before output_dir is touched; ``load`` reads the answer rather than asking again.
    Nothing is asked for another kind of model name."""
    model_cache.ask_early(model_names.resolve(model.name, base_dir), model.revision, log)


def load(model: Model, base_dir: Path, log=console.say):
    """Load (model, tokenizer, description) for the recipe's ``model:`` section: the base training starts from.

    A cached conversion that cannot be read (hand-edited, half-copied) is converted again, announced in one line.
    """
    source = model_names.resolve(model.name, base_dir)
    where = model_cache.materialize(source, log)
    if source.kind in ("local", "hub"):
        log(f"model: {source.describe()}")
    # a hub id: one question to the Hub first, where huggingface_hub's retries would cost minutes without an answer
    cache_only = model_cache.hub_cache_only(source, model.revision, log)
    try:
        return _load(where, model, source, cache_only)
    except RunError as exc:
        if model_names.checkpoint_dir(source) is None:
            raise
        model_cache.discard(source, str(exc.__cause__ or exc).splitlines()[0][:200], log)  # hand-edited, half-copied
        return _load(model_cache.materialize(source, log), model, source)


def _load(where: str, section: Model, source: model_names.Source, cache_only: bool = False):
    """(model, tokenizer, description) from a folder or hub id that from_pretrained reads; ``cache_only``: a hub id
    from the local Hugging Face cache, asking the Hub nothing."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    heap.bound_kernel_caches()  # before the model's first product on a CPU
    opts: dict[str, object] = {"trust_remote_code": section.trust_remote_code}
    if section.revision:
        opts["revision"] = section.revision
    adapter: dict[str, object] = {}
    if cache_only:
        opts["local_files_only"] = True
        adapter = {"adapter_kwargs": {"local_files_only": True}}  # transformers 5.25 looks for one without it
    quantization = quantization_config(section.quantization)
    placement = {}
    if quantization:
        placement = {
            "quantization_config": quantization,
            "device_map": hardware.quantized_device_map(launch.state().local_process_index),
        }
    dtype = compat.dtype_kwargs(hardware.weights_dtype(section.dtype))
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, **opts)
        model = AutoModelForCausalLM.from_pretrained(where, **dtype, **opts, **adapter, **placement)
    except (OSError, ValueError, KeyError) as exc:  # missing files; a config or tokenizer this version cannot read
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"model.name {section.name!r}: could not load ({first})") from exc
    if quantization:
        keep_trainable_layout(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer, source.describe()


def keep_trainable_layout(model) -> None:
    """Keep bitsandbytes from repacking ``model``'s 4-bit layers for its CPU inference kernel.

    On a CPU with AVX512-BF16, bitsandbytes (0.50) repacks a 4-bit layer the first time it runs in eval mode without
    gradients (an eval, the pre-flight) and from then on computes it with a kernel that passes no gradient to the
    layer's input (torch says so once, in a warning that the quieted third-party output hides): every adapter below
    that layer then trains on a cut gradient, and QLoRA stops learning after the eval before training. One layout for
    every verb, so that ``grpo-ext eval`` and ``merge``'s check compute what the run trained with."""
    for module in model.modules():
        if getattr(module, "support_avx512bf16_for_cpu", False):
            module.support_avx512bf16_for_cpu = False


def parameter_count(section: Model, base_dir: Path) -> int:
    """The model's parameters, counted on PyTorch's meta device from its config (no weights are read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    where = model_cache.materialize(model_names.resolve(section.name, base_dir), log=lambda _m: None)
    remote = section.trust_remote_code
    config = AutoConfig.from_pretrained(where, trust_remote_code=remote, revision=section.revision)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=remote)
    return sum(p.numel() for p in model.parameters())


def run_model_section(run_dir: Path) -> dict:
    """The ``model:`` section a run was trained with (its recipe.yaml), or {}; RecipeError if the file is damaged."""
    recipe_file = run_dir / "recipe.yaml"
    if not recipe_file.is_file():
        return {}
    try:
        recorded = load_yaml(recipe_file.read_text(encoding="utf-8")) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise RecipeError(f"{recipe_file}: damaged ({problem}); restore it, or pass the run's final/ directory") from None
    section = recorded.get("model") if isinstance(recorded, dict) else None
    return section if isinstance(section, dict) else {}


def run_settings(model: Model, run_dir: Path) -> Model:
    """The caller's ``model:`` settings under the run's own (its base, dtype, quantization), except that the run's
    recipe never turns ``trust_remote_code`` on: a run directory can come from anyone, so running the model's own
    code stays the caller's decision (their recipe or a ``model.trust_remote_code=true`` override)."""
    recorded = run_model_section(run_dir)
    trusted = model.trust_remote_code is True and recorded.get("trust_remote_code", True) is True
    known = {f.name for f in dataclasses.fields(Model)} - {"trust_remote_code"}
    return dataclasses.replace(model, **{k: v for k, v in recorded.items() if k in known}, trust_remote_code=trusted)


def adapter_base(adapter_dir: Path, recorded: str | None = None) -> str:
    """The base model a LoRA adapter was trained on: the path its config records, else the run's ``model.name``;
    the first of them that can be loaded here (a catalog alias or an existing path)."""
    config = adapter_dir / "adapter_config.json"
    candidates = [n for n in (json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path"), recorded) if n]
    if not candidates:
        raise RunError(f"{config} names no base model; set base_model_name_or_path in it")
    usable = [n for n in candidates if n in catalog.MODELS or exists(user_path(n))]
    return (usable or candidates)[0]


def has_adapter(weights: Path) -> bool:
    """Whether ``weights`` holds a LoRA adapter (peft's adapter_config.json) rather than a full model."""
    return (weights / "adapter_config.json").is_file()


def load_adapter(weights: Path, model: Model, log=console.say):
    """(model, tokenizer, description) of a trained LoRA adapter on its base, unmerged, as during training.

    ``weights`` is a run's ``final/``; ``model`` is the run's ``model:`` section, whose dtype and
    quantization the base is loaded with.
    """
    from peft import PeftModel

    base, tokenizer, described = _load_base(weights, model, log)
    return PeftModel.from_pretrained(base, str(weights)), tokenizer, f"LoRA adapter {weights} on {described}"


def _load_base(weights: Path, model: Model, log):
    """The base an adapter was trained on, loaded with the run's ``model:`` settings (dtype, quantization)."""
    return load(dataclasses.replace(model, name=adapter_base(weights, model.name)), Path.cwd(), log)


def merge(weights: Path, model: Model, out: Path, log=console.say):
    """Fold the LoRA adapter in ``weights`` into its base and save a plain checkpoint at ``out``.

    A quantized base is loaded as in training and dequantized, so the merge adds the adapter to the exact
    weights it was trained with. Returns (merged model, tokenizer).
    """
    from peft import PeftModel

    base, tokenizer, _ = _load_base(weights, model, log)
    if model.quantization:
        log(f"merge: dequantizing the {model.quantization} base")
        base = base.dequantize()
    merged = PeftModel.from_pretrained(base, str(weights)).merge_and_unload()
    if hasattr(merged.config, "quantization_config"):
        del merged.config.quantization_config
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return merged, tokenizer
