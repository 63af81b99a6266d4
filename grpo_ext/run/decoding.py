"""Decoding from bfloat16 copies of float32 weights, each cast once a ``generate()`` call.

Under bf16 autocast a product casts its float32 weight to bfloat16, and autocast keeps the copy while its outermost
block lasts when its cache is on. accelerate wraps a prepared model's ``forward`` in an autocast block of its own,
with the trainer's cache setting (off on a CPU: ``heap.uncached_casts``), so that ``generate()``, which calls
``forward`` once a token, cast every weight again at every token: SmolLM2-135M drew 16 rows a token in 149-160 ms
so, 143-153 ms from the float32 weights, and 100-109 ms with each weight cast once for the whole call
(``docs/benchmarks/tool-generation.md``, "Decoding from bfloat16 copies"). ``bf16_decoding`` runs the block under
one cached autocast, with the model's own ``forward`` in place of accelerate's wrapper for its length.
"""

import contextlib
from collections.abc import Iterator

# accelerate (read on 1.4 to 1.16) keeps the forward it wrapped in the model's ``_original_forward``; it is the
# bound method, and ``forward``, the wrapper, is an attribute of the instance.
ORIGINAL = "_original_forward"


@contextlib.contextmanager
def bf16_decoding(model, device: str) -> Iterator[None]:
    """For the length of the block: bf16 autocast with its cache of the weights' copies, and ``model``'s forward
    without accelerate's autocast wrapper (whose uncached block would cast each weight again at each token). A model
    accelerate has not wrapped (a PEFT model's inner one, a model under DDP) is left as it is."""
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
