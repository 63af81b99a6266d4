"""The ``plan`` verb: will this recipe fit, and what to change if not.

    grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB] [--gpus N --sharding zero3]

The estimate itself is the memory model's (``run/memory.py``); here it is set against the memory there is, with
what to change when it does not fit.
"""

from grpo_ext.core import catalog, console
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import suggest
from grpo_ext.recipe import Recipe, add_recipe_arguments, apply_overrides, load, locate, read_yaml, validate
from grpo_ext.run import gpu_share, memory
from grpo_ext.run.gpu_share import Launch
from grpo_ext.settings import adapters, advice, shapes, variants


def vllm_advice(
    recipe: Recipe, shape: memory.Shape, prompt_len: int, rows, launch: Launch
) -> tuple[float | None, str, bool] | None:
    """For colocated vLLM on a GPU of known size: (the utilization to use, or None when nothing fits; why;
    whether the recipe's utilization leaves vLLM less than it needs)."""
    if not launch.gpu_memory or not any(name == "vLLM (colocate)" for name, _, _ in rows):
        return None
    asleep = recipe.training.effective("vllm_enable_sleep_mode")
    # what the trainer holds while vLLM generates: everything, or with sleep mode all but the step's activations
    trainer = memory.total(r for r in rows if r[0] != "vLLM (colocate)" and not (asleep and r[0] == "activations"))
    need = memory.vllm_engine_need(recipe, shape, prompt_len)
    value, why = gpu_share.utilization_advice(launch.gpu_memory, trainer, need)
    util = recipe.training.effective("vllm_gpu_memory_utilization")
    return value, why, util * launch.gpu_memory < need


def alternatives(recipe: Recipe, device: str, params: int) -> list[list[str]]:
    """Override sets that lower memory, in the order worth trying."""
    model = recipe.model

    def get(key):
        return memory.setting(recipe, key, device, params)

    options = []
    full = model.lora in (None, False)
    # adapters take about 10x full fine-tuning's learning rate (advice.LORA_SOURCE)
    lr = get("learning_rate")
    lora = ["model.lora=true", f"training.learning_rate={lr * advice.LORA_LR_FACTOR:g}"] if full else []
    if full:
        options.append(lora)
    if not model.quantization:
        options.append([*lora, "model.quantization=4bit"])
    if device == "cuda" and memory.path_of(recipe) == "full":
        options.append(["training.use_liger_loss=true"])
    if get("use_vllm") and get("vllm_mode") == "colocate" and not get("vllm_enable_sleep_mode"):
        options.append(["training.vllm_enable_sleep_mode=true"])
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
    budget, read_as = memory.read_size(gpu_memory) if gpu_memory else (None, "")
    if gpus < 1:
        raise RecipeError(f"--gpus: {gpus} is not a number of GPUs; give 1 or more")
    if sharding not in gpu_share.SHARDINGS:
        raise RecipeError(f"--sharding: unknown {sharding!r}{suggest(sharding, gpu_share.SHARDINGS)}")
    recipe = load(ref, list(overrides))
    uses_vllm = bool(recipe.training.effective("use_vllm"))
    if device == "cpu" and (uses_vllm or sharding != "ddp"):
        what = "training.use_vllm" if uses_vllm else f"--sharding {sharding}"
        raise RecipeError(f"{what}: needs CUDA GPUs; plan it with --device cuda (and --gpu-memory SIZE)")
    device = device or ("cuda" if budget or uses_vllm or sharding != "ddp" else "cpu")
    launch = Launch(gpus, sharding, budget)
    where_cfg = memory.config_source(recipe.model, recipe.base_dir)
    shape = memory.model_shape(where_cfg, recipe.model.trust_remote_code)
    prompt_len, shared, held_out = memory.prompt_tokens(recipe, where_cfg)
    rows = memory.estimate(recipe, shape, prompt_len, device, launch, shared=shared, held_out=held_out)
    where = "on the CPU (peak resident memory)" if device == "cpu" else "on one GPU (peak device memory)"
    share = f", {gpus} processes ({launch.label()})" if gpus > 1 or sharding != "ddp" else ""
    print(f"plan: {recipe.path} {where}, per process{share}")
    if budget is not None:
        print(f"  --gpu-memory {(gpu_memory or '').strip()}: {read_as} = {memory.fmt_bytes(budget)}")
    if isinstance(where_cfg, dict):
        name = recipe.model.name
        hub_id = shapes.find(name) or shapes.find(catalog.MODELS[name]["hub"])
        print(f"  shape of {hub_id} from grpo_ext's table (no config.json here); prompts at about 3 characters a token")
    for name, n, how in rows:
        print(f"  {name:<20} {memory.fmt_bytes(n):>10}   {how}")
    peak = memory.total(rows)
    print(f"  {'total':<20} {memory.fmt_bytes(peak):>10}")
    completion = recipe.training.effective("max_completion_length")
    if shape.context and prompt_len + completion > shape.context:
        room = shape.context - completion
        fix = f"set training.max_prompt_length: {room} to drop the longer prompts, or " if room > 0 else ""
        print(
            f"warning: the longest prompt ({prompt_len} tokens) and max_completion_length {completion} exceed the model's "
            f"context of {shape.context} tokens, which training refuses; {fix}lower training.max_completion_length"
        )
    if uses_vllm and recipe.training.effective("vllm_mode") == "server":
        print("vLLM server mode: generation runs on the server's GPUs (trl vllm-serve); nothing counted here")
    vllm = vllm_advice(recipe, shape, prompt_len, rows, launch)
    if vllm:
        print(f"vllm_gpu_memory_utilization: {vllm[1]}")
        if vllm[2]:
            print("vllm_gpu_memory_utilization: the recipe's value leaves vLLM less than it needs for one step's generations")
    preset = variants.preset_keys(recipe.origins)
    lora = adapters.lora_settings(recipe.model.lora)
    lines = advice.check(recipe.training.effective, shape.params, preset, lora=bool(lora))
    if lora:
        lines += advice.lora(lora["r"], len(memory.lora_targets(shape, lora)), len(shape.linear_names))
    for line in lines:
        print(f"advice: {line}")
    if budget is None:
        return None
    if peak <= budget and not (vllm and vllm[2]):
        print(f"fits in {memory.fmt_bytes(budget)} ({memory.fmt_bytes(budget - peak)} to spare)")
        return True
    if peak <= budget:
        print(
            f"does not fit: the total fits in {memory.fmt_bytes(budget)}, but vLLM's share is too small for one "
            "step's generations; each change below, alone, would give:"
        )
    else:
        print(
            f"does not fit in {memory.fmt_bytes(budget)} (over by {memory.fmt_bytes(peak - budget)}); "
            "each change below, alone, would give:"
        )
    doc = apply_overrides(read_yaml(locate(ref)), list(overrides))
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
        n = memory.total(memory.estimate(other, shape, prompt_len, device, launch, shared=shared, held_out=held_out))
        print(f"  {' '.join(extra):<78} {memory.fmt_bytes(n):>10}  {'fits' if n <= budget else 'still over'}")
    combined = list(
        dict.fromkeys(
            o for extra in tried for o in extra if "per_device" not in o and "accumulation" not in o and "vllm_gpu" not in o
        )
    )
    if len(combined) > 1:
        try:
            n = memory.total(
                memory.estimate(
                    validate(apply_overrides(doc, combined), recipe.path),
                    shape,
                    prompt_len,
                    device,
                    launch,
                    shared=shared,
                    held_out=held_out,
                )
            )
            print(f"  {' '.join(combined):<78} {memory.fmt_bytes(n):>10}  {'fits' if n <= budget else 'still over'}")
        except RecipeError:
            pass
    return False


def cmd_plan(args) -> int:
    fits = plan(args.recipe, args.overrides, args.gpu_memory, args.device, args.gpus, args.sharding)
    return 1 if fits is False else 0


def add_parser(subparsers) -> None:
    """``grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB] [--device cpu|cuda] [--gpus N --sharding zero3]``."""
    p = subparsers.add_parser("plan", help="estimate peak memory of a recipe; say what to change when it will not fit")
    add_recipe_arguments(p, "section.key=value overrides, e.g. model.quantization=4bit")
    p.add_argument("--gpu-memory", help="memory of one GPU, e.g. 8GiB; plans for that GPU (exit 1 when it will not fit)")
    p.add_argument("--device", choices=["cpu", "cuda"], help="plan for this device (default: cuda with --gpu-memory, else cpu)")
    p.add_argument("--gpus", type=int, default=1, help="processes (one per GPU) sharing the run (default 1)")
    p.add_argument("--sharding", default="ddp", help="ddp (default), zero2, zero3 (DeepSpeed) or fsdp: what the processes split")
    p.set_defaults(fn=cmd_plan)
