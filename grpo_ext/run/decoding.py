"""Decoding from bfloat16 copies of float32 weights, each cast once a ``generate()`` call.

Under bf16 autocast a product casts its float32 weight to bfloat16, and autocast keeps the copy while its outermost
block lasts when its cache is on. accelerate wraps a prepared model's ``forward`` in an autocast block of its own,
with the trainer's cache setting (off on a CPU: ``heap.uncached_casts``), so that ``generate()``, which calls
``forward`` once a token, cast every weight again at every token: SmolLM2-135M decoded 16 rows in 152 ms a token
so, 145 ms from the float32 weights, and 99 ms with each weight cast once for the whole call
(``benchmarks/decoding.py``; ``docs/benchmarks/tool-generation.md``, "Decoding from bfloat16 copies").
``bf16_decoding`` runs the block under one cached autocast, with the model's own ``forward`` in place of
accelerate's wrapper for its length. Autocast caches only the copies of weights that train: a LoRA model's frozen
base is cast at each token still, as before, but now in the arithmetic its loss pass computes.
"""

import contextlib
from collections.abc import Iterator

# accelerate (read on 1.4 to 1.16) keeps the forward it wrapped in the model's ``_original_forward``; it is the
# bound method, and ``forward``, the wrapper, is an attribute of the instance.
ORIGINAL = "_original_forward"


@contextlib.contextmanager
def bf16_decoding(model, device: str) -> Iterator[None]:
    """For the length of the block: bf16 autocast with its cache of the weights' copies, and ``model``'s forward
    without accelerate's autocast wrapper (whose uncached block would cast each weight again at each token). The
    forward of a model accelerate has not wrapped (not yet prepared, or under DDP, whose wrapper accelerate wrapped)
    is left as it is; the block's autocast covers it all the same."""
    import torch

    own = vars(model)
    wrapper, original = own.get("forward"), own.get(ORIGINAL)
    swapped = wrapper is not None and original is not None
    if swapped:
        model.forward = original
    try:
        with torch.autocast(device, dtype=torch.bfloat16, cache_enabled=True):
            yield
    finally:
        if swapped:
            model.forward = wrapper
