"""The memory model behind ``grpo-ext plan``: bytes per training process of a recipe on a device.

The model is built on PyTorch's meta device from its ``config.json`` (no weights are read), which gives
the exact parameter count and every linear layer LoRA would wrap; a hub model whose config is not cached
is built from the table of shapes in ``shapes.py``. The estimate adds up, per process:

- weights: parameters x dtype bytes; with ``quantization`` the decoder's linear layers take 0.52 byte
  (4-bit NF4 plus double-quantized scales) or 1 byte (8-bit) per parameter, the rest stays in dtype;
- trainable state: gradients and two AdamW moments for every trainable parameter (all of them, or only
  the adapters with LoRA; adapters are fp32, bf16 over a quantized base as TRL casts them);
- activations kept for the backward pass of ``per_device_train_batch_size`` sequences of prompt +
  completion tokens (``ACT_PER_TOKEN`` values per layer and token, one hidden vector per layer with
  gradient checkpointing), plus the logits over the vocabulary for the completion tokens, as the installed TRL
  computes them (all at once, one sequence at a time with Liger's loss, or in tiles: ``logits_bytes``);
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
from typing import NamedTuple

from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import suggest
from grpo_ext.data import examples
from grpo_ext.recipe import Model, Recipe, agents, quick
from grpo_ext.run import chat_tools, data, gpu_share, hardware, prefix_cache, shared_head
from grpo_ext.run.gpu_share import Launch
from grpo_ext.settings import adapters, batch_rules, compat, model_names, shapes

MIB = 1024**2
GIB = 1024**3
RUNTIME_CPU = 500 * MIB  # measured: import torch, transformers, trl, peft, datasets -> 497 MB peak RSS
CUDA_CONTEXT = 600 * MIB
# Values saved per token and layer for the backward pass: 12 x hidden + 4 x intermediate (measured on SmolLM2's
# forward: 13.0k values at hidden 576, intermediate 1536); a LoRA-wrapped layer also keeps its summed output.
ACT_PER_TOKEN = {"hidden": 12, "intermediate": 4}
ONE_GPU = Launch()
QUANT_BYTES = {"4bit": 0.5 + 1 / 64 + 4 / (64 * 256), "8bit": 1.0}
# TRL's chunked projection (trl/kernels/chunked_logprob.py, 1.15+): TOKEN_CHUNK_SIZE and the vocabulary chunk
TILE_TOKENS, TILE_VOCAB = 4096, 32768
CPU_TILE_COPIES = 3  # fp32 temporaries of a tile the torch fallback makes: the scaled logits, exp, exp x logits


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
    context: int | None = None  # the most tokens, prompt and completion together (max_position_embeddings)


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


def fmt_bytes(n: float) -> str:
    """Bytes in GiB (two decimals) or MiB."""
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def config_source(model: Model, base_dir: Path) -> Path | dict:
    """The folder holding the model's config.json, or the table's config fields (``shapes.py``) for a hub model
    or alias whose config is not on this machine; nothing is downloaded."""
    source = model_names.resolve(model.name, base_dir)
    if source.kind in ("alias", "gguf"):
        if model_names.is_cached(source):
            return model_names.checkpoint_dir(source)
        fields = shapes.config_fields(catalog.MODELS[source.ref]["hub"]) if source.kind == "alias" else None
        if fields:
            return fields
        raise RecipeError(f"model.name: {source.ref} is not converted yet; train once (the first run converts it) and plan again")
    if source.kind == "local":
        if not (Path(source.ref) / "config.json").is_file():
            raise RecipeError(f"model.name: {source.ref} has no config.json; give a model directory saved by save_pretrained")
        return Path(source.ref)
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(source.ref, "config.json", revision=model.revision)
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
        context=data.context_of(text),
    )


class Prompts(NamedTuple):
    """What the plan counts of a recipe's prompts."""

    longest: int  # tokens in the longest training or eval prompt as the model sees it, chat template applied
    shared: int  # tokens every training prompt begins with alike (run once a micro-batch under groups.share_prompt)
    held_out: int  # the recipe's eval rows, before eval.max_prompts


def prompt_tokens(recipe: Recipe, folder: Path | dict) -> Prompts:
    """The recipe's ``Prompts``, from one tokenization. Without a tokenizer on this machine: about 3 characters a
    token, and nothing shared."""
    train = [r["prompt"] for r in data.train_rows(recipe.data, recipe.base_dir, 2000)]
    held_out = [r["prompt"] for r in data.eval_rows(recipe.data, recipe.base_dir, recipe.seed)]
    texts = train + held_out
    found = _prompt_ids(recipe, folder, texts)
    if found is None:
        system, turns = recipe.data.system_prompt, examples.messages(recipe.data.examples)
        head = len(system or "") + len(str(turns)) * bool(turns)
        return Prompts((max(len(str(t)) for t in texts) + head) // 3 + 32, 0, len(held_out))  # plus a template
    longest = max(map(len, found), default=0)
    limit = recipe.training.settings.get("max_prompt_length")  # longer prompts are dropped before training
    shared = prefix_cache.shared_length(found[: len(train)])
    return Prompts(longest if limit is None else min(longest, limit), shared, len(held_out))


def _prompt_ids(recipe: Recipe, folder: Path | dict, texts: list) -> list[list[int]] | None:
    """The token ids of ``texts`` as training renders them (system prompt, worked examples, the tools' schemas in
    the chat template); None when no tokenizer is on this machine."""
    if isinstance(folder, dict) or not any((folder / n).is_file() for n in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    chat_tools.apply(tokenizer, recipe, lambda _: None)  # the template training renders with, tools shown
    chat = data.use_chat(recipe.data, tokenizer)
    tools = agents.functions_shown(recipe.tool_functions, recipe.environment_types) or None  # their schemas are in every prompt
    system, turns = recipe.data.system_prompt, examples.messages(recipe.data.examples)
    return data.prompt_ids([data.format_prompt(t, system, chat, turns) for t in texts], tokenizer, tools)


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


def setting(recipe: Recipe, key: str, device: str, params: int):
    """A training value as a run on ``device`` would have it: the recipe's, else grpo_ext's choice, else TRL's."""
    if key == "gradient_checkpointing" and not recipe.training.sets(key):
        return hardware.checkpointing_choice(device == "cuda", params)[0]
    return recipe.training.effective(key)


def path_of(recipe: Recipe) -> str:
    """The installed TRL's way to the completions' log-probabilities for this recipe (``compat.logprob_path``)."""
    return compat.logprob_path(compat.uses_liger(recipe.training.settings))


def logits_bytes(
    shape: Shape, batch: int, seq: int, completion: int, b: int, device: str, path: str, head_grad: bool, scored_only=False
):
    """(bytes, how) the logits take at the loss's peak, by the way TRL computes the log-probabilities.

    - 'full': the completion tokens' logits in the weights' dtype, their fp32 log-softmax and its gradient;
    - 'liger': the same for one sequence at a time;
    - 'tiles': one tile of ``TILE_TOKENS`` x ``TILE_VOCAB`` logits in the weights' dtype. On a GPU a Triton kernel
      works in the tile; elsewhere torch ops make ``CPU_TILE_COPIES`` fp32 temporaries of it, and every position
      of the sequence is scored (on a GPU, and with ``scored_only``, only the completion's: grpo_ext's loss pass
      under ``groups.share_prompt``). The backward adds an fp32 gradient of the output head when it is trained (not
      with LoRA).
    """
    if path == "tiles":
        tokens = batch * completion if device == "cuda" or scored_only else batch * (seq - 1)
        tile = min(tokens, TILE_TOKENS) * min(shape.vocab, TILE_VOCAB)
        n = tile * b + (0 if device == "cuda" else CPU_TILE_COPIES * 4 * tile)
        head = shape.vocab * shape.hidden * 4 if head_grad else 0
        return n + head, f"TRL's chunked projection, tiles of {min(tokens, TILE_TOKENS)} x {min(shape.vocab, TILE_VOCAB)}"
    rows = 1 if path == "liger" else batch
    n = rows * (completion + 1) * shape.vocab * (2 * b + 4)
    return n, "Liger's fused loss, one sequence at a time" if path == "liger" else f"{batch} x {completion + 1} x {shape.vocab}"


def kv_cache_bytes(shape: Shape, seqs: int, seq: int, b: int, key_b: int | None = None) -> int:
    """The key/value cache of ``seqs`` sequences of ``seq`` tokens, ``b`` bytes a value (``key_b`` a key, else ``b``)."""
    return seqs * seq * shape.layers * shape.kv_dim * (b + (b if key_b is None else key_b))


def vllm_engine_need(recipe: Recipe, shape: Shape, prompt_len: int) -> int:
    """The least memory a colocated vLLM engine needs for this recipe's generation batch (``gpu_share.vllm_need``)."""

    def get(key):
        return setting(recipe, key, "cuda", shape.params)

    seq = prompt_len + get("max_completion_length")
    cache = kv_cache_bytes(shape, batch_rules.generation_batch(get) or 0, seq, 2)  # vLLM's cache is bf16
    return gpu_share.vllm_need(shape.params, cache, get("vllm_tensor_parallel_size") or 1)


def estimate(
    recipe: Recipe,
    shape: Shape,
    prompt_len: int,
    device: str,
    launch: Launch = ONE_GPU,
    logprobs: str | None = None,
    shared: int = 0,
    held_out: int | None = None,
) -> list[tuple[str, int, str]]:
    """(component, bytes, how) for one training process of ``recipe`` on ``device`` ('cpu' or 'cuda'); the logits
    as ``logprobs`` says ('full', 'liger', 'tiles'), else as the installed TRL computes them; ``shared``: the tokens
    every training prompt begins with, run once a micro-batch in the loss pass where ``groups.share_prompt`` holds;
    ``held_out``: the recipe's eval rows (unknown: a whole ``eval.batch_size``), of which the eval plays its
    ``eval.max_prompts``."""
    dtype: str = recipe.model.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" else "float32"
    b = 4 if dtype == "float32" else 2
    quant = recipe.model.quantization
    lora = adapters.lora_settings(recipe.model.lora)
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
    sharing = recipe.groups.share_prompt and shared >= prefix_cache.MIN_SHARED  # grpo_ext encodes the prompt once
    # the loss pass runs the prompts' shared head once a micro-batch (not under DeepSpeed or FSDP: run/trl_internals)
    once = sharing and batch > 1 and launch.sharding == "ddp"
    tokens = shared + batch * (seq - shared) if once else batch * seq
    head = f", the {shared} shared prompt tokens once" if once else ""
    if get("gradient_checkpointing"):
        acts = tokens * ab * (shape.layers * shape.hidden + per_token)
        how = f"{batch} seqs x {seq} tokens{head}, checkpointed (one hidden vector per layer)"
    else:
        acts = tokens * ab * shape.layers * per_token
        how = f"{batch} seqs x {seq} tokens ({prompt_len} prompt + {completion} completion){head} x {shape.layers} layers"
    path = logprobs or path_of(recipe)
    logits, logits_how = logits_bytes(shape, batch, seq, completion, b, device, path, not lora, recipe.groups.share_prompt)
    rows.append(("activations", acts + logits, f"{how}; logits {fmt_bytes(logits)} ({logits_how})"))

    # Under bf16 autocast over float32 weights (a CPU with bf16) the values leave their projection in bf16, and the
    # keys, float32 out of the rotary embedding, are stored in bf16 too where grpo_ext's shared-prompt cache holds them
    kb = vb = b
    if device == "cpu" and b == 4 and hardware.uses_bf16(recipe):
        vb = 2
        kb = 2 if sharing else 4
    stored = "keys, values" if kb == vb == b else "keys and values in bf16" if kb == 2 else "float32 keys, bf16 values"

    # on a CPU an eval's batch holds the shared prompt's keys and values once for every row (run/shared_head.py);
    # a training step's copies them into each
    held = device == "cpu" and sharing and shared_head.enabled()

    def cache(seqs: int, once: bool) -> int:
        if once:
            return kv_cache_bytes(shape, 1, shared, vb, kb) + kv_cache_bytes(shape, seqs, seq - shared, vb, kb)
        return kv_cache_bytes(shape, seqs, seq, vb, kb)

    gen_batch = batch_rules.generation_batch(get) or 0
    ev = recipe.eval
    eval_batch = ev.batch_size // ev.samples * ev.samples if ev.enabled else 0
    if held_out is not None:  # a small eval samples all its conversations in one batch smaller than batch_size
        cap = quick.eval_prompts(recipe)
        eval_batch = min(eval_batch, (held_out if cap is None else min(held_out, cap)) * ev.samples)
    vllm = get("use_vllm") and device == "cuda"
    # the larger of a training step's batch and the eval's, as each holds its cache
    counted = [(eval_batch, held and not vllm)] + ([] if vllm else [(gen_batch, False)])
    seqs, once = max(((n, o) for n, o in counted if n), key=lambda c: cache(*c), default=(0, False))
    if seqs:
        kv = cache(seqs, once) + seqs * shape.vocab * 4 * 2
        what = "eval batch, generated by the model itself" if vllm else stored
        tokens = f"{seq - shared} tokens after the {shared} shared, held once" if once else f"{seq} tokens"
        how = f"{seqs} sequences x {tokens} ({what}) + sampling logits"
        if device == "cuda":  # freed before the training step, whose activations reuse its blocks
            kv, how = max(0, kv - acts - logits), f"{how}: {fmt_bytes(kv)}, counted beyond the activations only"
        rows.append(("generation cache", kv, how))
    if vllm and get("vllm_mode") == "colocate":
        need = vllm_engine_need(recipe, shape, prompt_len)
        util = get("vllm_gpu_memory_utilization")
        if launch.gpu_memory:
            share, how = int(util * launch.gpu_memory), f"vllm_gpu_memory_utilization={util} of the GPU"
        else:
            share, how = need, f"at least: bf16 weights + cache of {gen_batch} seqs x {seq} tokens (it takes {util} of the GPU)"
        if get("vllm_enable_sleep_mode"):
            share, how = gpu_share.asleep(share, acts + logits), f"{how}: {fmt_bytes(share)}; {gpu_share.ASLEEP}"
        rows.append(("vLLM (colocate)", share, how))

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
        if get("save_strategy") != "no":  # the final save comes after the optimizer's state is let go of
            saved = trainable * tb if lora else shape.params * b
            rows.append(("checkpoint save", saved, "safetensors serializes a checkpoint's weights in memory"))
        rows.append(("runtime", RUNTIME_CPU, "Python, torch, transformers, TRL"))
    else:
        rows.append(("CUDA context", CUDA_CONTEXT, "kernels and allocator bookkeeping"))
    return rows


def total(rows) -> int:
    return sum(n for _, n, _ in rows)
