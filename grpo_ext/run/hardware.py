"""The machine a run lands on: CUDA or CPU, bf16 or float32, where weights go, and what is installed.

Every choice grpo_ext makes from the hardware lives here, so a run, ``grpo-ext eval`` and ``grpo-ext plan``
decide alike. torch is imported only inside the functions that ask the device.
"""

import os
from collections.abc import Mapping
from pathlib import Path

from grpo_ext.recipe import Recipe

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 flags (/proc/cpuinfo) of CPUs with native bf16 arithmetic


def cpu_bf16(cpuinfo: str | None = None) -> str | None:
    """The flag that shows this CPU does bf16 arithmetic natively, or None (unknown counts as no)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return next((f for f in CPU_BF16_FLAGS if f in flags), None)
    return None


def _bf16_choice(has_cuda: bool, bf16_ok: bool, cpu_flag: str | None, quantized: bool) -> tuple[bool, str]:
    """(bf16 on or off, why) for a recipe that leaves both bf16 and fp16 open."""
    if has_cuda:
        return (True, "the GPU supports bf16") if bf16_ok else (False, "this GPU has no bf16: float32 math")
    if not cpu_flag:
        return False, "this CPU has no native bf16: float32 math"
    if quantized:
        return False, "a quantized model on the CPU computes in float32"
    return True, f"this CPU has native bf16 ({cpu_flag}): bf16 autocast over float32 weights"


def hardware_defaults(
    kwargs: dict, has_cuda: bool, bf16_ok: bool, cpu_flag: str | None = None, quantized: bool = False
) -> list[str]:
    """Fill device-dependent keys the recipe left open (in place); return the announcements.

    bf16 (mixed precision: float32 weights, bf16 matrix products under autocast) is chosen on a GPU
    that supports it, and on a CPU with native bf16 (``cpu_flag``, from :func:`cpu_bf16`), where it
    makes a digit.yaml step about 1.7x faster (docs/benchmarks/recipe-settings.md). A quantized model on the
    CPU keeps float32: bitsandbytes computes there in float32.
    """
    notes = []
    if not has_cuda and not kwargs.get("use_cpu"):
        kwargs["use_cpu"] = True
        notes.append("no CUDA device found: training on the CPU (use_cpu=True)")
    if "bf16" not in kwargs and "fp16" not in kwargs:
        kwargs["bf16"], why = _bf16_choice(has_cuda, bf16_ok, cpu_flag, quantized)
        notes.append(f"bf16={kwargs['bf16']} ({why}; set training.bf16 in the recipe to choose)")
    return notes


CHECKPOINTING_FROM = 1_000_000_000  # parameters: on a GPU, models this large recompute activations by default


def checkpointing_choice(has_cuda: bool, params: int | None) -> tuple[bool, str]:
    """(gradient_checkpointing on or off, why) for a recipe that leaves it open.

    Recomputing activations in the backward pass saves memory and costs time: the shipped small-model recipes
    measured it slower on a CPU, where memory is rarely the limit; on a GPU it pays off for large models.
    """
    if not has_cuda:
        return False, "on a CPU, recomputing activations costs more time than the memory it saves"
    if params is not None and params < CHECKPOINTING_FROM:
        return False, f"the activations of a {params / 1e6:.0f}M-parameter model fit; recomputing them would cost time"
    return True, "saves activation memory on a large model"


def checkpointing_default(kwargs: dict, count_params) -> list[str]:
    """Set gradient_checkpointing where the recipe leaves it open (in place); the announcement.

    ``count_params()`` gives the model's size; it is called only on a GPU, where the choice depends on it.
    """
    if "gradient_checkpointing" in kwargs:
        return []
    import torch

    has_cuda = torch.cuda.is_available()
    kwargs["gradient_checkpointing"], why = checkpointing_choice(has_cuda, count_params() if has_cuda else None)
    return [f"gradient_checkpointing={kwargs['gradient_checkpointing']} ({why}; set training.gradient_checkpointing to choose)"]


def device_defaults(kwargs: dict, quantized: bool) -> list[str]:
    """use_cpu and bf16 for this machine where the recipe leaves them open (in place), for a ``quantized`` base or
    not; the announcements, with what a sharded launch becomes here."""
    import torch

    has_cuda = torch.cuda.is_available()
    notes = hardware_defaults(kwargs, has_cuda, has_cuda and torch.cuda.is_bf16_supported(), cpu_bf16(), quantized)
    return notes + sharding_notes(os.environ, has_cuda)


def sharding_notes(environ: Mapping[str, str], has_cuda: bool) -> list[str]:
    """What an FSDP launch (``accelerate launch`` sets ACCELERATE_USE_FSDP for configs/fsdp.yaml) becomes without a
    CUDA device: accelerate makes a run FSDP only on its GPU-like device types, and on the CPU its processes run DDP
    over gloo, without a word of its own. DeepSpeed ZeRO runs on the CPU (tests/integration/test_sharding_cpu.py)."""
    if has_cuda or environ.get("ACCELERATE_USE_FSDP", "false").lower() != "true":
        return []
    processes = environ.get("WORLD_SIZE", "1")
    return [
        f"FSDP: accelerate shards only on GPUs: without a CUDA device these {processes} processes run DDP over gloo, "
        "each holding the whole model and its optimizer state (as with configs/cpu-ddp.yaml)"
    ]


CAST_ONCE = "GRPO_EXT_CAST_ONCE"  # "0": training's generate() casts as TRL's does, each weight at every token


def decodes_from_bf16_copies(device: str, native_amp: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether training's ``generate()`` runs under one cached bf16 autocast (``decoding.bf16_decoding``): on a CPU
    where the loss pass computes under bf16 autocast (``native_amp``), unless ``GRPO_EXT_CAST_ONCE=0``. Through
    TRL, each token's forward runs in accelerate's autocast block, which casts every float32 weight again (its cache
    is off on a CPU, ``heap.uncached_casts``): a decoding step of a small model is bound by that. On a GPU TRL's own
    path is kept: there ``model.dtype: auto`` loads bfloat16 weights and nothing is cast."""
    return device == "cpu" and native_amp and environ.get(CAST_ONCE, "1").strip() != "0"


def uses_bf16(recipe: Recipe) -> bool:
    """Whether a run of this recipe on this machine computes under bf16 autocast (the recipe's choice, else ours)."""
    precision = {key: value for key, value in recipe.training.settings.items() if key in ("bf16", "fp16")}
    device_defaults(precision, recipe.model.quantization is not None)
    return bool(precision.get("bf16"))


def weights_dtype(name: str):
    """The torch dtype of ``model.dtype``; ``auto`` is bf16 on a GPU that has it, else float32."""
    import torch

    if name != "auto":
        return getattr(torch, name)
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def compute_dtype():
    """The dtype 4-bit layers compute in: bf16 on a GPU that has it, fp16 on older GPUs, fp32 on the CPU."""
    import torch

    if torch.cuda.is_available():
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def quantized_device_map(local_process_index: int) -> dict:
    """Where a quantized model goes: bitsandbytes quantizes on the device, one whole copy per process."""
    import torch

    return {"": local_process_index if torch.cuda.is_available() else "cpu"}


def versions() -> dict[str, str]:
    """The versions a run records in summary.json."""
    import importlib.metadata  # with email, socket and zipfile: a tenth of a refused `train` when imported at the top
    import platform

    names = ("trl", "transformers", "torch", "accelerate", "datasets")
    return {name: importlib.metadata.version(name) for name in names} | {"python": platform.python_version()}
