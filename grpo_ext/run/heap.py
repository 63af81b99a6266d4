"""Handing freed memory back to the system during a run on a CPU.

glibc's allocator keeps what a process frees for its next allocations, and it hands back only the free memory at the
top of its heap. A training step on a CPU frees gigabytes at a time (a micro-batch's activations after its backward,
the cache of a generation), in blocks from a few hundred kilobytes to tens of megabytes, between blocks that live on
(the optimizer's moments, the gradients): the freed memory stays in the process, counted in its resident size, and
the next allocations rarely fill it exactly. On the tool recipe (``recipes/arith-tools.yaml``, checkpointing on),
the resident size at a step's end fell from 3.4 to 2.2 GiB when that memory was handed back, and the peak of 3 steps
with both evals from 4.9 to 4.1 GiB (``docs/benchmarks/tool-generation.md``, "Memory the process kept").

``release`` hands it back (``malloc_trim``, which also returns the free pages inside the heap); ``ReleaseFreed`` does
so, on a CPU, before each micro-batch's loss pass and after each generation batch (training's and the eval's), in a
run with a tool loop only. What is handed back costs its pages again when the next pass takes them: a run whose loss
pass is the same size every step (``recipes/arith.yaml``: 16 rows, no checkpointing) reuses what it kept, so there
the hand-back made each step 6-19 % slower and its peak no lower (4.91-4.93 GiB against 4.87-5.02); a tool loop's
caches of every size leave holes the loss pass does not fill.
``GRPO_EXT_TRIM_HEAP=0`` turns it off (to measure its cost); another C library than glibc has no such call, and
nothing is done there.

What no hand-back frees is what the CPU's kernel libraries keep: ``bound_kernel_caches`` caps it before a model loads.
What the hand-back cannot undo is a heap already cut into holes when the eval after samples: ``large_blocks_mapped``
has glibc map each large block on its own there, and unmap it when it is freed.
"""

import contextlib
import ctypes
import functools
import gc
import os
from collections.abc import Callable, Iterator
from typing import Any

from grpo_ext.run.trl_internals import Behaviour, Step

OFF = "GRPO_EXT_TRIM_HEAP"  # "0": keep freed memory in the process, as the C library does by default

# What oneDNN (ONEDNN_PRIMITIVE_CACHE_CAPACITY) and ideep, PyTorch's layer over it (LRU_CACHE_CAPACITY), keep of the
# kernels a CPU's bfloat16 matrix products build: one entry a shape, 1024 each by default, and a tool run's shapes
# change with every conversation's length. SmolLM2's forward and backward under bf16 autocast over rows of 24
# lengths kept 15-19 MiB more with each new length (1.34 GiB after 48); with 64 entries each the resident size stayed
# within 13 MiB over 30 lengths, at the same speed (shapes repeated, as in decoding, hit either way). float32 builds
# no such kernels, and a GPU uses neither library.
KERNEL_CACHES = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64", "LRU_CACHE_CAPACITY": "64"}


# mallopt's parameter for the size from which glibc maps a block on its own (malloc.h), and the most glibc raises it
# to by itself (DEFAULT_MMAP_THRESHOLD_MAX: 32 MiB on a 64-bit machine), which a training process has reached.
M_MMAP_THRESHOLD = -3
DYNAMIC_CEILING = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
MAPPED_FROM = 1 << 20  # the eval after's blocks of a mebibyte and more: a layer's activations, a cache's keys


@functools.cache
def _libc(name: str, *argtypes: Any) -> Callable[..., int] | None:
    """A function of glibc's allocator, or None: another C library, or turned off by ``GRPO_EXT_TRIM_HEAP=0``."""
    if os.environ.get(OFF, "1").strip() == "0":
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library the interpreter runs on
    except OSError:
        return None
    fn = getattr(libc, name, None)
    if fn is not None:
        fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
    return fn


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None."""
    return _libc("malloc_trim", ctypes.c_size_t)


def bound_kernel_caches() -> None:
    """Cap the CPU kernel caches (``KERNEL_CACHES``) where the environment does not set them: before the process's
    first bfloat16 product, when both libraries read their capacity once."""
    for name, entries in KERNEL_CACHES.items():
        os.environ.setdefault(name, entries)


def release(collect: bool = True) -> bool:
    """Hand the memory the process has freed back to the system; with ``collect``, collect unreachable Python objects
    first (a phase's end: the eval before, training). Returns whether the C library could."""
    if collect:
        gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@contextlib.contextmanager
def objects_frozen() -> Iterator[None]:
    """Keep what lives when a run starts (the libraries' modules, classes and functions: some 430,000 objects with
    torch, transformers and TRL) out of the collector's scans for the run. Each full collection (``release``'s, and
    accelerate's when the trainer frees its state) then scans what the run made: it took 0.28 s, three of them 0.83 s
    of a 2.7 s run on the tiny model, each scanning the libraries again. What was garbage at the start is collected
    first, so nothing is kept that would have been freed. A process that froze objects itself (``gc.freeze``) keeps
    its own choice: the run freezes nothing more and thaws nothing."""
    if gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def large_blocks_mapped(on: bool = True) -> Iterator[None]:
    """Within, glibc maps each block of ``MAPPED_FROM`` bytes or more that no free hole of its heap holds on its
    own, and unmaps it when it is freed, instead of growing the heap for it. After a tool run's steps the heap is cut
    into holes between blocks that live on, and the eval after's blocks did not fit them: on
    ``recipes/arith-tools.yaml`` it peaked at 3.77 GiB, against 3.10 with its blocks mapped, for the same samples and
    time (``docs/benchmarks/tool-generation.md``, "The eval after's heap"). Not for the steps: mapping every large
    block there made a step 22 % slower. Afterwards glibc keeps large blocks from its ceiling (``DYNAMIC_CEILING``)
    up, as a process that has freed large blocks does, but no longer raises the size itself (mallopt turns that
    off). A no-op with ``on`` false (an accelerator), under another C library, or with ``GRPO_EXT_TRIM_HEAP=0``."""
    mallopt = _libc("mallopt", ctypes.c_int, ctypes.c_int) if on else None
    if mallopt is None:
        yield
        return
    mallopt(M_MMAP_THRESHOLD, MAPPED_FROM)
    try:
        yield
    finally:
        mallopt(M_MMAP_THRESHOLD, DYNAMIC_CEILING)


class ReleaseFreed(Behaviour):
    """On a CPU, the memory a generation batch or a micro-batch's backward freed is handed back before the next
    micro-batch's loss pass (``release``): the process's peak is then what a micro-batch holds, not that plus what
    the ones before it left behind. A no-op on an accelerator, whose memory has an allocator of its own."""

    optional = True  # it changes no result: a TRL without the hooks trains without it

    def on_batch(self, step: Step, batch: dict) -> dict:
        if on_cpu(step.trainer):
            release(collect=False)
        return batch

    def on_loss(self, step: Step, model, inputs: dict, loss: Callable[[dict], Any]):
        if on_cpu(step.trainer):
            release(collect=False)
        return loss(inputs)


CAST_CACHE = "GRPO_EXT_CAST_CACHE"  # "1": keep autocast's cache of the weights' bfloat16 copies in training


def uncached_casts(trainer) -> bool:
    """On a CPU under bf16 autocast, turn off autocast's cache of the weights' bfloat16 copies for the trainer's
    passes; returns whether it did. Autocast casts each float32 weight for its product and keeps the copy until the
    outermost autocast block ends, so that a weight used twice in it is cast once: a loss pass, whose layers each
    use their weights once, held a bfloat16 copy of every weight (0.25 GiB for SmolLM2-135M) beside its
    activations, and left the heap that much larger for its backward. Without it each copy is freed after its
    product; the values, and so the results, are the same. On ``recipes/guess.yaml`` (2 games a micro-batch) a
    step's peak fell from 3.70-3.76 GiB to 3.44-3.48 at the same step time; on ``recipes/arith-tools.yaml`` from
    3.50 to 3.32 GiB, its step 0.95 times as long (``docs/benchmarks/tool-generation.md``,
    "Autocast's copies of the weights"). Only on a CPU, where it was measured (on a GPU ``model.dtype: auto`` loads
    the weights in bfloat16 and nothing is cast), and not with ``GRPO_EXT_CAST_CACHE=1``. Call it before training
    starts: accelerate reads the setting when it wraps the model."""
    accelerator = trainer.accelerator
    if not on_cpu(trainer) or not accelerator.native_amp or os.environ.get(CAST_CACHE, "0").strip() == "1":
        return False
    from accelerate.utils import AutocastKwargs

    accelerator.autocast_handler = AutocastKwargs(cache_enabled=False)
    return True


def on_cpu(trainer) -> bool:
    """Whether ``trainer`` runs on a CPU, where the process's heap holds its tensors."""
    return trainer.accelerator.device.type == "cpu"
