"""The ``plan`` verb: will this recipe fit, and what to change if not.

    grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB] [--gpus N --sharding zero3]

The model is built on PyTorch's meta device from its ``config.json`` (no weights are read), which gives
the exact parameter count and every linear layer LoRA would wrap; a hub model whose config is not cached
is built from the table of shapes in ``shapes.py``. The estimate adds up, per process:

- weights: parameters x dtype bytes; with ``quantization`` the decoder's linear layers take 0.52 byte
  (4-bit NF4 plus double-quantized scales) or 1 byte (8-bit) per parameter, the rest stays in dtype;
- trainable state: gradients and two AdamW moments for every trainable parameter (all of them, or only
  the adapters with LoRA; adapters are fp32, bf16 over a quantized base as TRL casts them);
- activations kept for the backward pass of ``per_device_train_batch_size`` sequences of prompt +
  completion tokens (``ACT_PER_TOKEN`` values per layer and token, one hidden vector per layer with
  gradient checkpointing), plus the logits over the vocabulary for the completion tokens;
- generation: the key/value cache of the generation batch (or the eval batch, whichever is larger); on a GPU
  only what exceeds the activations, as the caching allocator hands the cache's freed blocks to the training
  step, while on the CPU freed memory mostly stays with the process (peak RSS), so there both count;
- the reference model's weights when ``beta > 0`` without LoRA (with LoRA TRL disables the adapter);
- with ``use_vllm``, vLLM's share of the GPU instead of the generation cache, and with ``--gpus`` and
  ``--sharding``, each process's share of sharded state (both in ``gpu_share.py``);
- on the CPU, a copy of the saved weights while a checkpoint is serialized, and the runtime itself
  (Python, torch, transformers, TRL: about 500 MiB resident before any model loads);
  on a GPU, the CUDA context.

It assumes a fused attention kernel (no prompt-length-squared score matrices), as PyTorch's
scaled-dot-product attention provides on current CPUs and GPUs.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from grpo_ext import adapters, advice, algorithms, batch_rules, catalog, compat, console, data, hardware, model_source, shapes
from grpo_ext.base import suggest
from grpo_ext.errors import RecipeError
from grpo_ext.recipe import apply_overrides, load, locate, read_yaml, validate
from grpo_ext.verbs import gpu_share
from grpo_ext.verbs.gpu_share import Launch

MIB = 1024**2
GIB = 1024**3
RUNTIME_CPU = 500 * MIB  # measured: import torch, transformers, trl, peft, datasets -> 497 MB peak RSS
CUDA_CONTEXT = 600 * MIB
# Values saved per token and layer for the backward pass: 12 x hidden + 4 x intermediate (measured on SmolLM2's
# forward: 13.0k values at hidden 576, intermediate 1536); a LoRA-wrapped layer also keeps its summed output.
ACT_PER_TOKEN = {"hidden": 12, "intermediate": 4}
ONE_GPU = Launch()
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


def read_size(text: str) -> tuple[int, str]:
    """(bytes, how they were read): GiB, MiB, ... are powers of 2 (2^30 bytes), GB, MB, ... powers of 10 (10^9),
    as the units mean; a bare letter ('12g') is read as binary, as docker and nvidia-smi read it; no unit: bytes.

    >>> read_size("12GB")
    (12000000000, '12 x 10^9 bytes (GB)')
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?:([kmgt])(ib|b)?|b)?\s*", text.lower())
    if not match:
        raise RecipeError(f"--gpu-memory: {text!r} is not a size; write it like 8GiB (2^30 bytes), 24GB (10^9) or 512MiB")
    number, prefix, unit = match.groups()
    if prefix is None:
        return int(float(number)), f"{number} bytes"
    power = "kmgt".index(prefix) + 1
    if unit == "b":
        return int(float(number) * 1000**power), f"{number} x 10^{3 * power} bytes ({prefix.upper()}B)"
    return int(float(number) * 1024**power), f"{number} x 2^{10 * power} bytes ({prefix.upper()}iB)"


def parse_size(text: str) -> int:
    """'8GiB', '8 GB', '500MiB', '12g' → bytes (see read_size)."""
    return read_size(text)[0]


def fmt(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def config_source(model_cfg: dict, base_dir: Path) -> Path | dict:
    """The folder holding the model's config.json, or the table's config fields (``shapes.py``) for a hub model
    or alias whose config is not on this machine; nothing is downloaded."""
    source = model_source.resolve(model_cfg["name"], base_dir)
    if source.kind in ("alias", "gguf"):
        if model_source.is_cached(source):
            return model_source.checkpoint_dir(source)
        fields = shapes.config_fields(catalog.MODELS[source.ref]["hub"]) if source.kind == "alias" else None
        if fields:
            return fields
        raise RecipeError(f"model.name: {source.ref} is not converted yet; train once (the first run converts it) and plan again")
    if source.kind == "local":
        if not (Path(source.ref) / "config.json").is_file():
            raise RecipeError(f"model.name: {source.ref} has no config.json; give a model directory saved by save_pretrained")
        return Path(source.ref)
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(source.ref, "config.json", revision=model_cfg.get("revision"))
    if isinstance(found, str):
        return Path(found).parent
    fields = shapes.config_fields(source.ref)
    if fields:
        return fields
    raise RecipeError(
        f"model.name: config.json of {source.ref!r} is not in the local hub cache, nor is the model in grpo_ext's "
        f"table of shapes (grpo-ext ls lists its {len(shapes.MODELS)} models){suggest(source.ref, shapes.MODELS, '')}; "
        f"plan a model from the table, run `hf download {source.ref} config.json` where the hub is reachable, "
        f"or plan with model.name=LOCAL_DIR"
    )


def model_shape(where: Path | dict, trust_remote_code: bool = False) -> Shape:
    """The shape of the model whose config is in folder ``where``, or given as config fields."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if isinstance(where, dict):
        config = AutoConfig.for_model(**where)
    else:
        config = AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
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


def prompt_tokens(recipe, folder: Path | dict) -> int:
    """Tokens in the longest training or eval prompt as the model sees it (chat template applied); about 3
    characters a token when no tokenizer is on this machine."""
    texts = [r["prompt"] for r in data.train_rows(recipe["data"], recipe.base_dir, 2000)]
    texts += [r["prompt"] for r in data.eval_rows(recipe["data"], recipe.base_dir, recipe["seed"])]
    system = recipe["data"]["system_prompt"]
    if isinstance(folder, dict) or not any((folder / n).is_file() for n in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return (max(len(str(t)) for t in texts) + len(system or "")) // 3 + 32  # about 3 characters a token, plus a template
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    chat = data.use_chat(recipe["data"], tokenizer)
    longest = max(data.prompt_tokens([data.format_prompt(t, system, chat) for t in texts], tokenizer), default=0)
    limit = recipe["training"].get("max_prompt_length")  # longer prompts are dropped before training
    return longest if limit is None else min(longest, limit)


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


def estimate(recipe, shape: Shape, prompt_len: int, device: str, launch: Launch = ONE_GPU) -> list[tuple[str, int, str]]:
    """(component, bytes, how) for one training process of ``recipe`` on ``device`` ('cpu' or 'cuda')."""
    model_cfg = recipe["model"]
    dtype = model_cfg["dtype"]
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    b = 4 if dtype == "float32" else 2
    quant = model_cfg["quantization"]
    lora = adapters.lora_settings(model_cfg)
    n = launch.gpus

    def get(key):
        return setting(recipe, key, device, shape.params)

    split = f", split over {n} ({launch.label()})" if launch.splits_weights() else ""
    rows = []
    if quant:
        rest = shape.params - shape.linear_params
        weights = int(shape.linear_params * QUANT_BYTES[quant] + rest * b)
        how = f"{shape.linear_params / 1e6:.0f}M linear params in {quant}, {rest / 1e6:.0f}M in {dtype}"
    else:
        weights, how = shape.params * b, f"{shape.params / 1e6:.0f}M params in {dtype}"
    rows.append(("weights", weights // n if split else weights, how + split))
    trainable = lora_params(shape, lora) if lora else shape.params
    tb = b  # bytes per trainable value: the weights' dtype; LoRA adapters are fp32, bf16 over a quantized base
    if lora:
        tb = 2 if quant else 4
    state = 1 if "8bit" in str(get("optim") or "") else tb
    opt, how = gpu_share.optimizer_bytes(trainable, tb, state, launch)
    rows.append(
        ("gradients + AdamW", opt, f"{trainable / 1e6:.1f}M trainable ({'LoRA r=' + str(lora['r']) if lora else 'all'}), {how}")
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

    def cache(seqs: int) -> int:
        return seqs * seq * shape.layers * 2 * shape.kv_dim * b

    gen_batch = batch_rules.generation_batch(get) or 0
    eval_cfg = recipe["eval"]
    eval_batch = eval_cfg["batch_size"] // eval_cfg["samples"] * eval_cfg["samples"] if eval_cfg["enabled"] else 0
    vllm = get("use_vllm") and device == "cuda"
    seqs = eval_batch if vllm else max(gen_batch, eval_batch)
    if seqs:
        kv = cache(seqs) + seqs * shape.vocab * 4 * 2
        what = "eval batch, generated by the model itself" if vllm else "keys, values"
        how = f"{seqs} sequences x {seq} tokens ({what}) + sampling logits"
        if device == "cuda":  # freed before the training step, whose activations reuse its blocks
            kv, how = max(0, kv - acts - logits), f"{how}: {fmt(kv)}, counted beyond the activations only"
        rows.append(("generation cache", kv, how))
    if vllm and get("vllm_mode") == "colocate":
        tp = get("vllm_tensor_parallel_size") or 1
        need = gpu_share.vllm_need(shape.params, cache(gen_batch) * 2 // b, tp)
        util = get("vllm_gpu_memory_utilization")
        if launch.gpu_memory:
            rows.append(("vLLM (colocate)", int(util * launch.gpu_memory), f"vllm_gpu_memory_utilization={util} of the GPU"))
        else:
            rows.append(
                (
                    "vLLM (colocate)",
                    need,
                    f"at least: bf16 weights + cache of {gen_batch} seqs x {seq} tokens (it takes {util} of the GPU)",
                )
            )

    if get("beta") and not lora:
        rows.append(
            (
                "reference model",
                shape.params * b // n if split else shape.params * b,
                f"beta={get('beta')} keeps a frozen copy{split}",
            )
        )
    if split:
        gathered = gpu_share.gathered_bytes(shape.params, shape.linear_params, shape.layers, shape.hidden, shape.vocab, b)
        rows.append(("gathered weights", gathered, "two decoder layers and the embedding, whole while they compute"))
    if device == "cpu":
        saved = trainable * tb if lora else shape.params * b
        rows.append(("checkpoint save", saved, "safetensors serializes the saved weights in memory"))
        rows.append(("runtime", RUNTIME_CPU, "Python, torch, transformers, TRL"))
    else:
        rows.append(("CUDA context", CUDA_CONTEXT, "kernels and allocator bookkeeping"))
    return rows


def total(rows) -> int:
    return sum(n for _, n, _ in rows)


def vllm_advice(recipe, shape: Shape, prompt_len: int, rows, launch: Launch) -> tuple[float | None, str, bool] | None:
    """For colocated vLLM on a GPU of known size: (the utilization to use, or None when nothing fits; why;
    whether the recipe's utilization leaves vLLM less than it needs)."""
    given = [n for name, n, _ in rows if name == "vLLM (colocate)"]
    if not launch.gpu_memory or not given:
        return None
    trainer = total(r for r in rows if r[0] != "vLLM (colocate)")
    need = total(estimate(recipe, shape, prompt_len, "cuda", Launch(launch.gpus, launch.sharding))) - trainer
    value, why = gpu_share.utilization_advice(launch.gpu_memory, trainer, need)
    return value, why, given[0] < need


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


def plan(
    ref: str,
    overrides: list[str] | tuple = (),
    gpu_memory: str | None = None,
    device: str | None = None,
    gpus: int = 1,
    sharding: str = "ddp",
) -> bool | None:
    """Print the memory estimate of a recipe per process; with ``gpu_memory``, whether it fits there (and what
    would make it fit). ``gpus`` processes share the run, with state split as ``sharding`` says (ddp, zero2,
    zero3, fsdp). Returns True or False for a budget, None without one."""
    console.quiet_third_parties(verbose=False)
    budget, read_as = read_size(gpu_memory) if gpu_memory else (None, "")
    if gpus < 1:
        raise RecipeError(f"--gpus: {gpus} is not a number of GPUs; give 1 or more")
    if sharding not in gpu_share.SHARDINGS:
        raise RecipeError(f"--sharding: unknown {sharding!r}{suggest(sharding, gpu_share.SHARDINGS)}")
    recipe = load(ref, list(overrides))
    uses_vllm = bool(compat.effective(recipe["training"], "use_vllm"))
    if device == "cpu" and (uses_vllm or sharding != "ddp"):
        what = "training.use_vllm" if uses_vllm else f"--sharding {sharding}"
        raise RecipeError(f"{what}: needs CUDA GPUs; plan it with --device cuda (and --gpu-memory SIZE)")
    device = device or ("cuda" if budget or uses_vllm or sharding != "ddp" else "cpu")
    launch = Launch(gpus, sharding, budget)
    where_cfg = config_source(recipe["model"], recipe.base_dir)
    shape = model_shape(where_cfg, recipe["model"]["trust_remote_code"])
    prompt_len = prompt_tokens(recipe, where_cfg)
    rows = estimate(recipe, shape, prompt_len, device, launch)
    where = "on the CPU (peak resident memory)" if device == "cpu" else "on one GPU (peak device memory)"
    share = f", {gpus} processes ({launch.label()})" if gpus > 1 or sharding != "ddp" else ""
    print(f"plan: {recipe.path} {where}, per process{share}")
    if budget is not None:
        print(f"  --gpu-memory {gpu_memory.strip()}: {read_as} = {fmt(budget)}")
    if isinstance(where_cfg, dict):
        hub_id = shapes.find(recipe["model"]["name"]) or shapes.find(catalog.MODELS[recipe["model"]["name"]]["hub"])
        print(f"  shape of {hub_id} from grpo_ext's table (no config.json here); prompts at about 3 characters a token")
    for name, n, how in rows:
        print(f"  {name:<20} {fmt(n):>10}   {how}")
    peak = total(rows)
    print(f"  {'total':<20} {fmt(peak):>10}")
    if uses_vllm and compat.effective(recipe["training"], "vllm_mode") == "server":
        print("vLLM server mode: generation runs on the server's GPUs (trl vllm-serve); nothing counted here")
    vllm = vllm_advice(recipe, shape, prompt_len, rows, launch)
    if vllm:
        print(f"vllm_gpu_memory_utilization: {vllm[1]}")
        if vllm[2]:
            print("vllm_gpu_memory_utilization: the recipe's value leaves vLLM less than it needs for one step's generations")
    preset = algorithms.preset_keys(recipe.origins)
    for line in advice.check(lambda key: compat.effective(recipe["training"], key), shape.params, preset):
        print(f"advice: {line}")
    if budget is None:
        return None
    if peak <= budget and not (vllm and vllm[2]):
        print(f"fits in {fmt(budget)} ({fmt(budget - peak)} to spare)")
        return True
    print(f"does not fit in {fmt(budget)} (over by {fmt(peak - budget)}); each change below, alone, would give:")
    doc = apply_overrides(read_yaml(locate(ref)), overrides)
    options = alternatives(recipe, device, shape.params)
    if vllm and vllm[0] is not None:
        options.insert(0, [f"training.vllm_gpu_memory_utilization={vllm[0]}"])
    tried = []
    for extra in options:
        try:
            other = validate(apply_overrides(doc, extra), recipe.path)
        except RecipeError:
            continue
        tried.append(extra)
        n = total(estimate(other, shape, prompt_len, device, launch))
        print(f"  {' '.join(extra):<78} {fmt(n):>10}  {'fits' if n <= budget else 'still over'}")
    combined = list(
        dict.fromkeys(
            o for extra in tried for o in extra if "per_device" not in o and "accumulation" not in o and "vllm_gpu" not in o
        )
    )
    if len(combined) > 1:
        try:
            n = total(estimate(validate(apply_overrides(doc, combined), recipe.path), shape, prompt_len, device, launch))
            print(f"  {' '.join(combined):<78} {fmt(n):>10}  {'fits' if n <= budget else 'still over'}")
        except RecipeError:
            pass
    return False
