"""A batch whose prompts share their first tokens, with those tokens encoded once: in generation and in the loss pass.

A recipe with tools puts the same system prompt (the tool schema, the worked exchanges) at the head of every prompt,
hundreds of tokens, and ``generate()`` encodes it again for each row of the batch, and again after each tool result,
when TRL's tool loop generates from the whole conversation; the loss pass encodes it again for each row. Here the
longest prefix that every row of a batch shares is run through the model once; its keys and values are copied to
each row, and ``generate()`` (``sharing``), or the model's body in the loss pass (``sharing_prompt``), goes on from
them with only each row's own tokens left to encode.

A batch is left-padded, so the shared prefix would sit at a different position in each row. Here the padding goes
between the prefix and each row's own tokens instead: ``generate()`` numbers positions by the attention mask, so
each token keeps the position it has in the left-padded batch, and masked padding changes no output. Greedy decoding
returns the same tokens either way (``tests/integration/test_prefix_cache.py``).
"""

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from grpo_ext.run import shared_head

# Below this many shared tokens the saving is too small to be worth a second forward call: a chat template's own
# header and a short system prompt stay on generate()'s path.
MIN_SHARED = 64


def shared_length(rows: list[list[int]]) -> int:
    """How many leading tokens every row has in common, leaving each row at least one token of its own (the one
    ``generate()`` starts from)."""
    if len(rows) < 2:
        return 0
    first, limit = rows[0], min(len(r) for r in rows) - 1
    for i in range(limit):
        token = first[i]
        if any(r[i] != token for r in rows):
            return i
    return max(limit, 0)


def unpadded(input_ids, attention_mask) -> list[list[int]]:
    """Each row's tokens without its padding (those its attention mask leaves out)."""
    return [ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask, strict=True)]


def _cache_name(model) -> str:
    """The keyword a model's forward takes its cache by: ``cache`` in newer transformers, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model passes it on
    params = inspect.signature(base.forward).parameters
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def generate(model, original, input_ids, attention_mask, **kwargs):
    """``original(input_ids=..., attention_mask=..., **kwargs)`` (a model's ``generate``) for a left-padded batch,
    with the rows' shared prefix encoded once; the prompt part of what it returns has the padding moved after the
    prefix, the part after it (what TRL keeps) is as ``original`` makes it. Calls ``original`` unchanged where it
    cannot share: a batch of one, a short prefix, a cache already given, or inputs other than tokens."""
    import torch

    rows = unpadded(input_ids, attention_mask)
    shared = shared_length(rows)
    given = {"cache", "past_key_values", "cache_implementation", "num_return_sequences", "inputs_embeds"} & set(kwargs)
    other_inputs = any(isinstance(v, torch.Tensor) for v in kwargs.values())  # images, token types: rows of their own
    if shared < MIN_SHARED or given or other_inputs:
        return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    config = kwargs.get("generation_config")
    if config is not None and getattr(config, "cache_implementation", None):  # a static or offloaded cache of its own
        return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    reshaped = _reshape(rows[0][:shared], (), {"input_ids": input_ids, "attention_mask": attention_mask})
    if reshaped is None:  # a batch not left-padded: its rows do not start where the padding ends
        return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    ids, mask, _ = reshaped
    with torch.no_grad():
        head = model(input_ids=ids[:1, :shared], use_cache=True)
    budget = _static_budget(model, config)
    if budget and shared_head.supported(model):
        held = shared_head.cache(model, _cache_of(head), ids.shape[1] + budget)
        if held is not None:
            with shared_head.attending(model):
                return original(input_ids=ids, attention_mask=mask, **{_cache_name(model): held}, **kwargs)
    cache = _preallocated(model, head, len(rows), ids.shape[1] + budget) if budget else None
    cache = _expanded_cache(head, len(rows)) if cache is None else cache
    return original(input_ids=ids, attention_mask=mask, **{_cache_name(model): cache}, **kwargs)


def _static_budget(model, config) -> int:
    """The most tokens ``config`` lets ``generate`` add, where the call can generate into a cache allocated once for
    it; 0 where it cannot: no token budget, a model whose layers attend through a sliding window, or a device where
    ``generate`` would compile the model for such a cache (unless the call turns that off, as TRL's does)."""
    new = getattr(config, "max_new_tokens", None)
    if not new or window_of(model):
        return 0
    return new if model.device.type == "cpu" or getattr(config, "disable_compile", False) else 0


def _preallocated(model, output, rows: int, length: int):
    """The prefix's keys and values (``output``'s cache, one row) in a cache allocated once for the whole call:
    ``rows`` rows of ``length`` tokens (the prompt's and the most ``generate`` may add). Each decoding step then writes
    its keys and values in place, where a growing cache copies all of them at every step, which on a tool recipe's
    conversations of some 550 tokens took over half of a step's time. None where transformers has no per-layer
    caches. Where the model allows, ``shared_head`` keeps the prefix once instead of a copy in each row."""
    head = _cache_of(output)
    cache = shared_head.static_cache(model, length, head)
    if cache is None:
        return None
    for mine, theirs in zip(cache.layers, head.layers, strict=True):
        keys = theirs.keys.to(theirs.values.dtype)
        mine.update(keys.expand(rows, -1, -1, -1), theirs.values.expand(rows, -1, -1, -1))
        if keys.dtype != theirs.keys.dtype:
            _narrowed(mine)
    return cache


def _narrowed(layer) -> None:
    """A layer of a cache whose keys are kept in the values' precision. Under autocast the keys leave the rotary
    embedding in float32 and the values leave their projection in bfloat16, and the attention (autocast's
    ``scaled_dot_product_attention``, or eager attention's matmuls) reads both in bfloat16: keys stored so are read
    the same, take half the memory, and are not cast again at every step. Each step's new keys are cast as they come
    in (a static layer copies them into place, and copies only between tensors of one type)."""
    layer.__class__ = _narrowing(layer.__class__)  # not a closure kept on the layer: a cycle would outlive the call


@functools.cache
def _narrowing(layer_class: Any) -> Any:
    class Narrowed(layer_class):
        def update(self, key_states, value_states, *args, **kwargs):
            return super().update(key_states.to(value_states.dtype), value_states, *args, **kwargs)

    return Narrowed


def _cache_of(output):
    """The cache a forward returned: ``cache`` in newer transformers, ``past_key_values`` before."""
    cache = getattr(output, "cache", None)
    return output.past_key_values if cache is None else cache


def _expanded_cache(output, rows: int):
    """The keys and values of a forward over the prefix alone (one row), repeated for ``rows`` rows."""
    cache = _cache_of(output)
    cache.batch_repeat_interleave(rows)
    return cache


@contextlib.contextmanager
def sharing(model) -> Iterator[None]:
    """For the length of the block, ``model.generate`` encodes a batch's shared prefix once (``generate``)."""
    original, own = model.generate, "generate" in vars(model)

    def shared_generate(*args, **kwargs):
        if args or "input_ids" not in kwargs or "attention_mask" not in kwargs:
            return original(*args, **kwargs)
        return generate(model, original, kwargs.pop("input_ids"), kwargs.pop("attention_mask"), **kwargs)

    model.generate = shared_generate
    try:
        yield
    finally:
        if own:
            model.generate = original
        else:
            del model.generate


def backbone_of(model):
    """The transformer body under a causal LM (PEFT's wrapper and the LM head taken off): what computes the hidden
    states the head scores, the one call the loss pass's sharing reshapes."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    body = getattr(inner, "base_model", None)
    return body if body is not None and body is not inner else None


class StepHeads:
    """The shared prompt prefixes of one optimizer step, each run through the model once for all the step's
    micro-batches (the weights change only at the step's end). A micro-batch reads the prefix's keys and values (and
    hidden states) as tensors of their own, so that its backward stops there and adds their gradient to what the
    step's earlier micro-batches added; ``flush``, once the step's last micro-batch has run its backward, runs the
    prefixes' backward once with those sums. The weights' gradients are the sum a backward of each micro-batch through
    its own prefix pass gives (linear in the prefix's gradient), for one prefix pass instead of one a micro-batch."""

    def __init__(self) -> None:
        self._heads: dict[tuple, tuple[Any, list[tuple[Any, Any]]]] = {}  # key -> (output, [(computed, read)])

    def head(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """The output of ``compute()`` (a forward over a prefix), computed at the first call with ``key`` since the
        last flush; its cache's keys and values and its hidden states are the tensors the step's passes read."""
        if key not in self._heads:
            output = compute()
            self._heads[key] = (output, _read_apart(output))
        return self._heads[key][0]

    def __len__(self) -> int:
        return len(self._heads)

    def clear(self) -> None:
        """Let the prefixes go without their backward (a step that failed)."""
        self._heads.clear()

    def flush(self) -> None:
        """Run the backward of each prefix held, with the gradient the step's micro-batches left on what they read,
        then let the prefixes go."""
        import torch

        pairs = [pair for _, held in self._heads.values() for pair in held]
        self._heads.clear()
        roots = [(computed, read.grad) for computed, read in pairs if read.grad is not None]
        if roots:
            torch.autograd.backward([r for r, _ in roots], [g for _, g in roots])


def _read_apart(output) -> list[tuple[Any, Any]]:
    """Replace the keys and values of ``output``'s cache and its hidden states by tensors of their own (detached,
    needing a gradient where the computed ones do): what each pass reads, as (computed, read) pairs."""
    pairs = []

    def apart(tensor):
        read = tensor.detach().requires_grad_(tensor.requires_grad)
        if tensor.requires_grad:
            pairs.append((tensor, read))
        return read

    for layer in _cache_of(output).layers:
        layer.keys, layer.values = apart(layer.keys), apart(layer.values)
    output.last_hidden_state = apart(output.last_hidden_state)
    return pairs


@contextlib.contextmanager
def sharing_prompt(backbone, prefix: list[int], heads: StepHeads | None = None) -> Iterator[None]:
    """For the length of the block, the backbone's forward over a batch of left-padded rows that each start with
    ``prefix`` (the loss pass's prompts and completions) runs the prefix once and the rest of each row from its keys
    and values. The hidden states it returns have every row's own tokens in the columns they had; the prefix's
    columns (prompt tokens, never scored) hold the prefix's states. The gradient through the prefix is the sum over
    the rows, as if each had computed it. A call it cannot reshape (another row, a cache, other inputs) runs as it is.
    Under gradient checkpointing (``checkpointed``) each layer keeps only its input and runs again in the backward.
    With ``heads`` (a training step's, on a transformers with a cache of layer objects), the prefix's pass is the
    step's, run at its first micro-batch and read by the others (``StepHeads``)."""
    original, own = backbone.forward, "forward" in vars(backbone)
    cache_name = _cache_name(backbone)  # read from the forward's own signature, before the swap below hides it

    def shared_forward(*args, **kwargs):
        reshaped = _reshape(prefix, args, kwargs)
        if reshaped is None:
            return original(*args, **kwargs)
        ids, mask, rest = reshaped
        if not _flagged(backbone):
            return _forward_shared(original, cache_name, len(prefix), ids, mask, rest, heads=heads)
        with checkpointed(backbone):
            return _forward_shared(original, cache_name, len(prefix), ids, mask, rest, frozen=True, heads=heads)

    backbone.forward = shared_forward
    try:
        yield
    finally:
        if own:
            backbone.forward = original
        else:
            del backbone.forward


def _flagged(backbone) -> list:
    """The modules of ``backbone`` (itself included) that transformers' gradient checkpointing is on for."""
    return [m for m in backbone.modules() if getattr(m, "gradient_checkpointing", False) is True]


@functools.cache  # asked at every loss pass; the answer is the installed transformers'
def checkpoints_with_a_cache() -> bool:
    """Whether this transformers keeps a cache's keys and values per layer object (``cache.layers``, 4.56 and
    later), which the checkpointed shared pass reads and fixes; before, gradient checkpointing shares nothing."""
    from transformers import DynamicCache

    return hasattr(DynamicCache(), "layers")


def window_of(backbone) -> bool:
    """Whether a layer of the model attends through a sliding window, whose cache the checkpointed shared pass
    (which puts the prefix's keys and values before each row's own, all of them) does not keep as the model would."""
    config = getattr(backbone, "config", None)
    kinds = set(getattr(config, "layer_types", None) or ())
    return getattr(config, "sliding_window", None) is not None or bool(kinds - {"full_attention"})


@contextlib.contextmanager
def checkpointed(backbone) -> Iterator[None]:
    """For the length of the block, each layer of ``backbone`` that transformers checkpoints keeps only its input for
    the backward and runs again there, with the cache it was given; transformers' own checkpointing, which drops any
    cache (``use_cache=False``), is off meanwhile. The recomputation reads the caches again, so the caches the
    shared pass gives the layers store nothing (``_frozen``)."""
    from torch.utils.checkpoint import checkpoint

    flagged = _flagged(backbone)
    # a layer with a forward of its own (accelerate's device hooks) runs it unchecked: still right, only kept whole
    layers = [m for m in flagged if m is not backbone and "forward" not in vars(m)]

    def wrapped(layer):
        raw = getattr(type(layer).forward, "__wrapped__", type(layer).forward)  # under transformers' own wrapper

        def forward(*args, **kwargs):
            return checkpoint(raw, layer, *args, use_reentrant=False, **kwargs)

        return forward

    for module in flagged:
        module.gradient_checkpointing = False
    for layer in layers:
        layer.forward = wrapped(layer)
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward
        for module in flagged:
            module.gradient_checkpointing = True


def _frozen(cache, rows: int | None):
    """``cache``, made to store nothing more: its ``update`` returns the new keys and values as they are (``rows``
    None: the cache of a forward that already ran, whose layers will run again in the backward), or after the
    cache's own, repeated for ``rows`` rows, in a copy (the cache a forward over each row's own tokens reads)."""
    import copy

    import torch

    if rows is None:
        cache.update = lambda keys, values, *args, **kwargs: (keys, values)
        return cache
    fixed = copy.copy(cache)
    fixed.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in fixed.layers:
        layer.keys, layer.values = layer.keys.repeat_interleave(rows, 0), layer.values.repeat_interleave(rows, 0)

    layers = fixed.layers  # not ``fixed``: a cache that reached itself through its update would outlive the step

    def update(keys, values, layer_idx, *args, **kwargs):
        layer = layers[layer_idx]
        return torch.cat([layer.keys, keys], dim=-2), torch.cat([layer.values, values], dim=-2)

    fixed.update = update
    return fixed


def _reshape(prefix: list[int], args: tuple, kwargs: dict):
    """(input_ids, attention_mask, other kwargs) with each row's left padding moved after ``prefix``, every other
    token in its column; None where the call is not a batch of left-padded rows that all start with it."""
    import torch

    ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
    others = {k: v for k, v in kwargs.items() if k not in ("input_ids", "attention_mask")}
    if args or ids is None or mask is None or ids.dim() != 2 or mask.shape != ids.shape:
        return None
    if {"cache", "past_key_values", "position_ids", "inputs_embeds"} & {k for k, v in others.items() if v is not None}:
        return None
    if any(isinstance(v, torch.Tensor) for v in others.values()) or others.get("output_router_logits"):
        return None  # images, token types; a MoE's router logits, which the states returned below do not carry
    k = len(prefix)
    lead = (mask.cumsum(-1) == 0).sum(-1)  # each row's left padding
    want = torch.tensor(prefix, device=ids.device)
    new_ids, new_mask = ids.clone(), mask.clone()
    for i, pad in enumerate(lead.tolist()):
        if pad + k >= ids.shape[1] or not torch.equal(ids[i, pad : pad + k], want):
            return None  # a row shorter than the prefix, or another prompt: not rows this block was opened for
        new_ids[i, :k], new_mask[i, :k] = want, 1
        new_ids[i, k : pad + k] = ids[i, :pad]
        new_mask[i, k : pad + k] = 0
    return new_ids, new_mask, others


def _forward_shared(
    original, cache_name: str, k: int, ids, mask, others: dict, frozen: bool = False, heads: StepHeads | None = None
):
    import torch

    others = {**others, "use_cache": True}

    def prefix_pass():
        head = original(input_ids=ids[:1, :k], attention_mask=mask[:1, :k], **others)
        if frozen:  # checkpointed layers run again in the backward: the prefix's cache may not grow when they do
            _frozen(_cache_of(head), None)
        return head

    if heads is not None:  # the step's prefix pass, read by each micro-batch in a cache of its own
        head = heads.head((tuple(ids[0, :k].tolist()), frozen, tuple(sorted(others))), prefix_pass)
        cache = _frozen(_cache_of(head), ids.shape[0])
    else:
        head = prefix_pass()
        cache = _frozen(_cache_of(head), ids.shape[0]) if frozen else _expanded_cache(head, ids.shape[0])
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)[:, k:]
    tail = original(input_ids=ids[:, k:], attention_mask=mask, position_ids=positions, **{cache_name: cache}, **others)
    states = torch.cat([head.last_hidden_state.expand(ids.shape[0], -1, -1), tail.last_hidden_state], dim=1)
    return type(tail)(last_hidden_state=states)
