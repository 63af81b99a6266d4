"""The ``plan`` verb: will this recipe fit, and what to change if not.

    grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB]

The model is built on PyTorch's meta device from its ``config.json`` (no weights are read), which gives
the exact parameter count and every linear layer LoRA would wrap. The estimate adds up, per process:

- weights: parameters x dtype bytes; with ``quantization`` the decoder's linear layers take 0.52 byte
  (4-bit NF4 plus double-quantized scales) or 1 byte (8-bit) per parameter, the rest stays in dtype;
- trainable state: gradients and two AdamW moments for every trainable parameter (all of them, or only
  the adapters with LoRA; adapters are fp32, bf16 over a quantized base as TRL casts them);
- activations kept for the backward pass of ``per_device_train_batch_size`` sequences of prompt +
  completion tokens (``ACT_PER_TOKEN`` values per layer and token, one hidden vector per layer with
  gradient checkpointing), plus the logits over the vocabulary for the completion tokens;
- generation: the key/value cache of the generation batch (or the eval batch, whichever is larger);
- the reference model's weights when ``beta > 0`` without LoRA (with LoRA TRL disables the adapter);
- on the CPU, a copy of the saved weights while a checkpoint is serialized, and the runtime itself
  (Python, torch, transformers, TRL: about 500 MiB resident before any model loads);
  on a GPU, the CUDA context.

It assumes a fused attention kernel (no prompt-length-squared score matrices), as PyTorch's
scaled-dot-product attention provides on current CPUs and GPUs.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from grpo_ext import adapters, advice, algorithms, compat, console, data, hardware, model_source
from grpo_ext.errors import RecipeError
from grpo_ext.recipe import apply_overrides, load, locate, read_yaml, validate

MIB = 1024**2
GIB = 1024**3
RUNTIME_CPU = 500 * MIB  # measured: import torch, transformers, trl, peft, datasets -> 497 MB peak RSS
CUDA_CONTEXT = 600 * MIB
# Values saved per token and layer for the backward pass: 12 x hidden + 4 x intermediate (measured on SmolLM2's
# forward: 13.0k values at hidden 576, intermediate 1536); a LoRA-wrapped layer also keeps its summed output.
ACT_PER_TOKEN = {"hidden": 12, "intermediate": 4}
QUANT_BYTES = {"4bit": 0.5 + 1 / 64 + 4 / (64 * 256), "8bit": 1.0}


@dataclass(frozen=True)
class Shape:
    """What the estimate needs to know about a model, read from its meta-device instance."""

    params: int
    linear_params: int  # in the linear layers bitsandbytes quantizes (all but the output head)
    linear_names: tuple[tuple[str, int, int], ...]  # (module name, in, out features) of every linear but the head
    layers: int
    hidden: int
    intermediate: int
    kv_dim: int
    vocab: int


def parse_size(text: str) -> int:
    """'8GiB', '8 GB', '500MiB', '12g' → bytes (GB and GiB both mean 1024**3 here, as GPUs are sold)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)i?b?\s*", text.lower())
    if not match:
        raise RecipeError(f"--gpu-memory: {text!r} is not a size; write it like 8GiB, 24GB or 512MiB")
    scale = {"": 1, "k": 1024, "m": MIB, "g": GIB, "t": 1024 * GIB}[match.group(2)]
    return int(float(match.group(1)) * scale)


def fmt(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def config_dir(model_cfg: dict, base_dir: Path) -> Path:
    """The folder holding the model's config.json, without downloading anything."""
    source = model_source.resolve(model_cfg["name"], base_dir)
    if source.kind in ("alias", "gguf"):
        ckpt = model_source.checkpoint_dir(source)
        if not model_source.is_cached(source):
            raise RecipeError(
                f"model.name: {source.ref} is not converted yet; train once (the first run converts it) and plan again"
            )
        return ckpt
    if source.kind == "local":
        if not (Path(source.ref) / "config.json").is_file():
            raise RecipeError(f"model.name: {source.ref} has no config.json; give a model directory saved by save_pretrained")
        return Path(source.ref)
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(source.ref, "config.json", revision=model_cfg.get("revision"))
    if not isinstance(found, str):
        raise RecipeError(
            f"model.name: config.json of {source.ref!r} is not in the local hub cache; run "
            f"`hf download {source.ref} config.json` where the hub is reachable, or plan with model.name=LOCAL_DIR"
        )
    return Path(found).parent


def model_shape(folder: Path, trust_remote_code: bool = False) -> Shape:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    head = model.get_output_embeddings()
    linears = tuple(
        (name, m.in_features, m.out_features)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and m is not head
    )
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return Shape(
        params=sum(p.numel() for p in model.parameters()),
        linear_params=sum(m.weight.numel() for _, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m is not head),
        linear_names=linears,
        layers=text.num_hidden_layers,
        hidden=text.hidden_size,
        intermediate=getattr(text, "intermediate_size", 4 * text.hidden_size),
        kv_dim=(getattr(text, "num_key_value_heads", None) or heads) * head_dim,
        vocab=text.vocab_size,
    )


def prompt_tokens(recipe, folder: Path) -> int:
    """Tokens in the longest training or eval prompt as the model sees it (chat template applied)."""
    texts = [r["prompt"] for r in data.train_rows(recipe["data"], recipe.base_dir)[:2000]]
    texts += [r["prompt"] for r in data.eval_rows(recipe["data"])]
    system = recipe["data"]["system_prompt"]
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return (max(len(t) for t in texts) + len(system or "")) // 3 + 32  # about 3 characters a token, plus a template
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    chat = data.use_chat(recipe["data"], tokenizer)
    longest = 0
    for text in texts:
        prompt = data.format_prompt(text, system, chat)
        ids = (
            tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
            if chat
            else tokenizer(prompt)["input_ids"]
        )
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        longest = max(longest, len(ids))
    return longest


def lora_targets(shape: Shape, settings: dict) -> list[tuple[str, int, int]]:
    """The linear layers LoRA wraps, matched as peft matches ``target_modules``."""
    targets = settings["target_modules"]
    if isinstance(targets, str) and targets.lower() == "all-linear":
        return list(shape.linear_names)
    if isinstance(targets, str):
        return [t for t in shape.linear_names if re.fullmatch(targets, t[0])]
    return [t for t in shape.linear_names if t[0].rsplit(".", 1)[-1] in targets]


def lora_params(shape: Shape, settings: dict) -> int:
    """Adapter parameters: rank x (in + out) for each targeted linear layer."""
    return settings["r"] * sum(i + o for _, i, o in lora_targets(shape, settings))


def setting(recipe, key: str, device: str, params: int):
    """A training value as a run on ``device`` would have it: the recipe's, else grpo_ext's choice, else TRL's."""
    if key == "gradient_checkpointing" and key not in recipe["training"]:
        return hardware.checkpointing_choice(device == "cuda", params)[0]
    return compat.effective(recipe["training"], key)


def estimate(recipe, shape: Shape, prompt_len: int, device: str) -> list[tuple[str, int, str]]:
    """(component, bytes, how) for one training process of ``recipe`` on ``device`` ('cpu' or 'cuda')."""
    model_cfg = recipe["model"]
    dtype = model_cfg["dtype"]
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    b = 4 if dtype == "float32" else 2
    quant = model_cfg["quantization"]
    lora = adapters.lora_settings(model_cfg)

    def get(key):
        return setting(recipe, key, device, shape.params)

    rows = []
    if quant:
        rest = shape.params - shape.linear_params
        weights = int(shape.linear_params * QUANT_BYTES[quant] + rest * b)
        rows.append(
            ("weights", weights, f"{shape.linear_params / 1e6:.0f}M linear params in {quant}, {rest / 1e6:.0f}M in {dtype}")
        )
    else:
        rows.append(("weights", shape.params * b, f"{shape.params / 1e6:.0f}M params in {dtype}"))
    trainable = lora_params(shape, lora) if lora else shape.params
    tb = b  # bytes per trainable value: the weights' dtype; LoRA adapters are fp32, bf16 over a quantized base
    if lora:
        tb = 2 if quant else 4
    state = 1 if "8bit" in str(get("optim") or "") else tb
    rows.append(
        (
            "gradients + AdamW",
            trainable * (tb + 2 * state),
            f"{trainable / 1e6:.1f}M trainable ({'LoRA r=' + str(lora['r']) if lora else 'all'}), grads + 2 moments",
        )
    )

    completion = get("max_completion_length")
    seq = prompt_len + completion
    batch = get("per_device_train_batch_size")
    ab = 4 if quant and device == "cpu" else b
    per_token = ACT_PER_TOKEN["hidden"] * shape.hidden + ACT_PER_TOKEN["intermediate"] * shape.intermediate
    if lora:
        per_token += sum(o for _, _, o in lora_targets(shape, lora)) // shape.layers
    if get("gradient_checkpointing"):
        acts = batch * seq * ab * (shape.layers * shape.hidden + per_token)
        how = f"{batch} seqs x {seq} tokens, checkpointed (one hidden vector per layer)"
    else:
        acts = batch * seq * ab * shape.layers * per_token
        how = f"{batch} seqs x {seq} tokens ({prompt_len} prompt + {completion} completion) x {shape.layers} layers"
    logits = batch * (completion + 1) * shape.vocab * (2 * b + 4)
    rows.append(("activations", acts + logits, f"{how}; logits {fmt(logits)}"))

    spg = get("steps_per_generation") or get("gradient_accumulation_steps")
    gen_batch = get("generation_batch_size") or batch * spg
    eval_cfg = recipe["eval"]
    eval_batch = eval_cfg["batch_size"] // eval_cfg["samples"] * eval_cfg["samples"] if eval_cfg["enabled"] else 0
    seqs = max(gen_batch, eval_batch)
    kv = seqs * seq * shape.layers * 2 * shape.kv_dim * b + seqs * shape.vocab * 4 * 2
    rows.append(("generation cache", kv, f"{seqs} sequences x {seq} tokens (keys, values) + sampling logits"))

    if get("beta") and not lora:
        rows.append(("reference model", shape.params * b, f"beta={get('beta')} keeps a frozen copy"))
    if device == "cpu":
        saved = trainable * tb if lora else shape.params * b
        rows.append(("checkpoint save", saved, "safetensors serializes the saved weights in memory"))
        rows.append(("runtime", RUNTIME_CPU, "Python, torch, transformers, TRL"))
    else:
        rows.append(("CUDA context", CUDA_CONTEXT, "kernels and allocator bookkeeping"))
    return rows


def total(rows) -> int:
    return sum(n for _, n, _ in rows)


def alternatives(recipe, device: str, params: int) -> list[list[str]]:
    """Override sets that lower memory, in the order worth trying."""
    model = recipe["model"]

    def get(key):
        return setting(recipe, key, device, params)

    options = []
    if model["lora"] in (None, False):
        options.append(["model.lora=true"])
    if not model["quantization"]:
        options.append(["model.lora=true" if model["lora"] in (None, False) else None, "model.quantization=4bit"])
    if not get("gradient_checkpointing"):
        options.append(["training.gradient_checkpointing=true"])
    g, batch, accum = get("num_generations"), get("per_device_train_batch_size"), get("gradient_accumulation_steps")
    if batch >= 2:
        options.append(
            [f"training.per_device_train_batch_size={batch // 2}", f"training.gradient_accumulation_steps={accum * 2}"]
        )
    if g >= 4:
        options.append([f"training.num_generations={g // 2}", f"training.per_device_train_batch_size={max(1, batch // 2)}"])
    c = get("max_completion_length")
    if c >= 64:
        options.append([f"training.max_completion_length={c // 2}"])
    return [[o for o in opt if o] for opt in options]


def plan(ref: str, overrides: list[str] | tuple = (), gpu_memory: str | None = None, device: str | None = None) -> bool | None:
    """Print the memory estimate of a recipe per process; with ``gpu_memory``, whether it fits there (and what
    would make it fit). Returns True or False for a budget, None without one."""
    console.quiet_third_parties(verbose=False)
    budget = parse_size(gpu_memory) if gpu_memory else None
    device = device or ("cuda" if budget else "cpu")
    recipe = load(ref, list(overrides))
    folder = config_dir(recipe["model"], recipe.base_dir)
    shape = model_shape(folder, recipe["model"]["trust_remote_code"])
    prompt_len = prompt_tokens(recipe, folder)
    rows = estimate(recipe, shape, prompt_len, device)
    where = "on the CPU (peak resident memory)" if device == "cpu" else "on one GPU (peak device memory)"
    print(f"plan: {recipe.path} {where}, per process")
    for name, n, how in rows:
        print(f"  {name:<20} {fmt(n):>10}   {how}")
    peak = total(rows)
    print(f"  {'total':<20} {fmt(peak):>10}")
    preset = algorithms.preset_keys(recipe.origins)
    for line in advice.check(lambda key: compat.effective(recipe["training"], key), shape.params, preset):
        print(f"advice: {line}")
    if budget is None:
        return None
    if peak <= budget:
        print(f"fits in {fmt(budget)} ({fmt(budget - peak)} to spare)")
        return True
    print(f"does not fit in {fmt(budget)} (over by {fmt(peak - budget)}); each change below, alone, would give:")
    doc = apply_overrides(read_yaml(locate(ref)), overrides)
    tried = []
    for extra in alternatives(recipe, device, shape.params):
        try:
            other = validate(apply_overrides(doc, extra), recipe.path)
        except RecipeError:
            continue
        tried.append(extra)
        n = total(estimate(other, shape, prompt_len, device))
        print(f"  {' '.join(extra):<78} {fmt(n):>10}  {'fits' if n <= budget else 'still over'}")
    combined = list(dict.fromkeys(o for extra in tried for o in extra if "per_device" not in o and "accumulation" not in o))
    if len(combined) > 1:
        try:
            n = total(estimate(validate(apply_overrides(doc, combined), recipe.path), shape, prompt_len, device))
            print(f"  {' '.join(combined):<78} {fmt(n):>10}  {'fits' if n <= budget else 'still over'}")
        except RecipeError:
            pass
    return False
