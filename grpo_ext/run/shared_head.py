"""Generation over rows that share a prefix, with the prefix's keys and values stored once for all of them.

``prefix_cache.generate`` encodes a batch's shared prefix once, but then copies its keys and values into every row's
cache: on the guessing game (``recipes/guess.yaml``), 626 of a conversation's 851 tokens, 64 times over in an eval
batch. Here the rows' cache holds only their own tokens, each layer keeps the prefix's keys and values once beside
them, and an attention function of grpo_ext's (``attend``, registered with transformers' ``AttentionInterface`` and
switched on for the length of the call) attends to both: PyTorch's CPU flash attention over the prefix, for every
row's queries in one call, and over each row's own keys, merged by the log-sum-exp each gives, as one softmax over
the whole row would weigh them. The result is the attention over the whole row (greedy decoding in float32 returns
the tokens the copied cache gives: ``tests/integration/test_prefix_cache.py``), and it reads the prefix's keys once
a step instead of once a row.

Where it holds: outside training steps (``supported``), on a CPU (the flash attention that returns its log-sum-exp
is PyTorch's CPU kernel), a transformers with per-layer static caches and the two interfaces (5.x), a model whose
every layer attends to the whole context (no sliding window, no soft-capped scores, no attention sinks), with the
``sdpa`` or ``eager`` implementation. Elsewhere, and with ``GRPO_EXT_PREFIX_ONCE=0``, ``prefix_cache`` copies the
prefix into each row.
"""

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

OFF = "GRPO_EXT_PREFIX_ONCE"  # "0": copy the prefix into every row, as before (to measure what holding it once saves)
NAME = "grpo_ext_shared_head"  # the attention implementation's name while a call runs with such a cache
HEAD = "_grpo_ext_head"  # the attribute on a layer's own keys that holds the prefix's (keys, values)
# config fields that change what attention computes beyond softmax(q k / sqrt(d)) v: such a model copies the prefix
_UNSUPPORTED = ("attn_logit_softcapping", "sliding_window", "use_sliding_window")


def supported(model) -> bool:
    """Whether ``model``'s generation can keep a shared prefix once (see the module's text). Not while the model
    trains (TRL's generation inside a training step): there the prefix is copied, as the recipes' published runs
    were trained. Under bf16 the two attentions round differently, so a step samples other tokens, and one run of
    ``recipes/arith-tools.yaml`` on seed 0 that held the prefix once in its steps learned to add whatever the question
    (0.43 of the held-out questions right after training, against 0.98 copied: docs/benchmarks/tool-generation.md).
    The evals, the pre-flight and ``grpo-ext eval`` sample with the model in eval mode, and hold it once."""
    if not enabled() or model.training or not _installed():
        return False
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if any(getattr(text, field, None) for field in _UNSUPPORTED) or set(getattr(text, "layer_types", None) or ()) - {
        "full_attention"
    }:
        return False
    if "sinks" in {name.rsplit(".", 1)[-1] for name, _ in model.named_parameters()}:
        return False
    # On a GPU a fused kernel (flash, sdpa's) over the copied prefix is what generation is measured with; this
    # function's matrix products are measured on a CPU only
    return model.device.type == "cpu" and getattr(config, "_attn_implementation", None) in ("sdpa", "eager")


def enabled() -> bool:
    """False where ``GRPO_EXT_PREFIX_ONCE=0`` asks for the prefix copied into every row."""
    return os.environ.get(OFF, "1").strip() != "0"


@functools.cache  # asked at every generate call; the answer is the installed libraries'
def _installed() -> bool:
    """Whether this transformers has per-layer static caches and the attention interfaces, and this PyTorch the CPU
    flash attention that returns its log-sum-exp (which ``attend`` merges by)."""
    try:
        import torch
        from transformers.cache_utils import StaticLayer
        from transformers.masking_utils import AttentionMaskInterface  # noqa: F401
        from transformers.modeling_utils import AttentionInterface  # noqa: F401
    except ImportError:
        return False
    if not hasattr(StaticLayer, "get_mask_sizes") or not hasattr(StaticLayer(max_cache_len=1), "cumulative_length"):
        return False
    return hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")


def static_cache(model, length: int, head_cache):
    """transformers' static cache of ``length`` tokens a row for ``model``, with a layer for each of ``head_cache``'s;
    None where this transformers builds it otherwise."""
    from transformers import StaticCache

    try:
        built = StaticCache(config=model.config, max_cache_len=length)
    except TypeError:  # an older signature
        return None
    if len(getattr(built, "layers", ())) != len(getattr(head_cache, "layers", ())) or not built.layers:
        return None
    return built


def cache(model, head_cache, length: int):
    """A static cache of ``length`` tokens a row whose layers hold the prefix (``head_cache``: a forward over it,
    one row) once and store only what comes after it; None where transformers' static cache is built otherwise. Under
    autocast the keys are kept in the values' precision, as ``prefix_cache._narrowed`` keeps them."""
    built = static_cache(model, length, head_cache)
    if built is None:
        return None
    cls = _head_layer(built.layers[0].__class__)
    built.layers = [cls(theirs.keys, theirs.values, length) for theirs in head_cache.layers]
    return built


@functools.cache
def _head_layer(static: Any) -> Any:
    import torch

    class HeadLayer(static):
        """A static layer whose first ``prefix`` positions are the prefix's keys and values, held once."""

        def __init__(self, keys, values, max_cache_len: int):
            super().__init__(max_cache_len=max_cache_len)
            self.narrow = keys.dtype != values.dtype  # float32 keys out of the rotary embedding, bf16 values
            keys = keys.to(values.dtype)
            self.prefix = keys.shape[-2]
            self.head = (keys, values)
            self.cumulative_length = torch.tensor(self.prefix, dtype=torch.long, device=keys.device)

        def lazy_initialization(self, key_states, value_states) -> None:
            own = self.max_cache_len - self.prefix  # the rows: the batch generate() encodes after the prefix
            shape = (key_states.shape[0], key_states.shape[1], own)
            self.keys = torch.zeros((*shape, key_states.shape[-1]), dtype=key_states.dtype, device=key_states.device)
            self.values = torch.zeros((*shape, value_states.shape[-1]), dtype=value_states.dtype, device=key_states.device)
            setattr(self.keys, HEAD, self.head)  # read by ``attend``, which sees the keys this layer returns
            self.device, self.batch_size, self.num_heads = key_states.device, key_states.shape[0], key_states.shape[1]
            self.k_head_dim, self.v_head_dim = key_states.shape[-1], value_states.shape[-1]
            self.is_initialized = True

        def update(self, key_states, value_states, *args, **kwargs):
            if self.narrow:
                key_states = key_states.to(value_states.dtype)
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            at = torch.arange(key_states.shape[-2], device=self.device) + self.cumulative_length - self.prefix
            self.cumulative_length.add_(key_states.shape[-2])
            self.keys.index_copy_(2, at, key_states)
            self.values.index_copy_(2, at, value_states)
            return self.keys, self.values

        def get_seq_length(self):
            return self.cumulative_length  # the prefix counts from the start: generate() encodes what comes after it

    return HeadLayer


def attend(module, query, key, value, attention_mask, scaling=None, dropout: float = 0.0, **kwargs):
    """Attention over the prefix held on ``key`` (``HEAD``) and the row's own keys: PyTorch's CPU flash attention
    over each part, which gives each query's log-sum-exp beside its output, merged as one softmax over the two
    would weigh them. The prefix's part is one call over every row's queries; a key-value head's query heads go in
    as more queries of one head (no copy of a key a query head). A call whose keys hold no prefix runs
    transformers' ``sdpa`` attention as it is."""
    import torch

    head = getattr(key, HEAD, None)
    if head is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    if attention_mask is None:  # a static cache's tail is never written yet: its mask is always given
        raise RuntimeError("shared_head.attend: no attention mask for a cache that holds a prefix once")
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    head_keys, head_values = head
    rows, heads, q, dim = query.shape
    groups = key.shape[1]  # key-value heads: each serves heads // groups query heads
    per = heads // groups * q  # the queries a key-value head answers in a row
    prefix, scale = head_keys.shape[-2], dim**-0.5 if scaling is None else scaling
    # one precision, the cache's (sdpa under autocast reads all three in bf16 too)
    grouped = query.to(key.dtype).reshape(rows, groups, per, dim)
    across = grouped.transpose(0, 1).reshape(1, groups, rows * per, dim)  # every row's queries against the prefix
    on_head, lse_head = flash(across, head_keys, head_values, scale=scale)
    on_head = on_head.view(groups, rows, per, dim).transpose(0, 1)
    lse_head = lse_head.view(groups, rows, per).transpose(0, 1)
    own_mask = attention_mask[..., prefix:].unsqueeze(2).expand(rows, 1, heads // groups, q, -1).reshape(rows, 1, per, -1)
    own, lse_own = flash(grouped, key, value, attn_mask=own_mask.to(key.dtype), scale=scale)
    # a query that sees the prefix alone (a padding position's): in bf16 the kernel gives its row 0, not -inf
    alone = (own_mask <= torch.finfo(own_mask.dtype).min / 2).all(dim=-1)
    lse_own = lse_own.masked_fill(alone, float("-inf"))
    top = torch.maximum(lse_head, lse_own)
    w_head, w_own = (lse_head - top).exp().unsqueeze(-1), (lse_own - top).exp().nan_to_num().unsqueeze(-1)
    mixed = (on_head.float() * w_head + own.float().nan_to_num() * w_own) / (w_head + w_own)
    return mixed.to(value.dtype).reshape(rows, heads, q, dim).transpose(1, 2).contiguous(), None


@contextlib.contextmanager
def attending(model) -> Iterator[None]:
    """For the length of the block, ``model`` attends with ``attend`` (its masks as eager attention's, with the
    padding between the prefix and each row's own tokens masked)."""
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(NAME, attend)
    AttentionMaskInterface.register(NAME, eager_mask)
    configs = [c for c in {id(c): c for c in _configs(model)}.values()]
    before = [c._attn_implementation for c in configs]
    for c in configs:
        c._attn_implementation = NAME
    try:
        yield
    finally:
        for c, name in zip(configs, before, strict=True):
            c._attn_implementation = name


def _configs(model) -> Iterator[Any]:
    """The configs the model's modules read their attention implementation from."""
    yield model.config
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            yield config
