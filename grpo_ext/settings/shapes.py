"""Architecture facts of the models people train with GRPO, so that ``grpo-ext plan`` works with no hub access.

Each entry is what the model's ``config.json`` says about its size (public facts, no weights): the
transformers ``model_type``, decoder layers, hidden size, attention heads, key/value heads, head size where it
is not hidden / heads, MLP size, vocabulary, and whether the output head shares the input embedding. The plan
builds the model from these on PyTorch's meta device, as it would from the downloaded ``config.json``.

An instruct, chat or base variant of a listed model has the same shape, so ``Qwen/Qwen2.5-1.5B-Instruct`` and
``Qwen/Qwen2.5-1.5B`` both find ``Qwen/Qwen2.5-1.5B``.

>>> config_fields("qwen/qwen2.5-1.5b-instruct")["num_hidden_layers"]
28
>>> config_fields("nobody/model") is None
True
"""

# hub id (base model): (model_type, layers, hidden, heads, kv heads, head size or None, intermediate, vocab, tied)
MODELS: dict[str, tuple[str, int, int, int, int, int | None, int, int, bool]] = {
    "Qwen/Qwen2.5-0.5B": ("qwen2", 24, 896, 14, 2, None, 4864, 151936, True),
    "Qwen/Qwen2.5-1.5B": ("qwen2", 28, 1536, 12, 2, None, 8960, 151936, True),
    "Qwen/Qwen2.5-3B": ("qwen2", 36, 2048, 16, 2, None, 11008, 151936, True),
    "Qwen/Qwen2.5-7B": ("qwen2", 28, 3584, 28, 4, None, 18944, 152064, False),
    "Qwen/Qwen2.5-Math-1.5B": ("qwen2", 28, 1536, 12, 2, None, 8960, 151936, True),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": ("qwen2", 28, 1536, 12, 2, None, 8960, 151936, False),
    "Qwen/Qwen3-0.6B": ("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, True),
    "Qwen/Qwen3-1.7B": ("qwen3", 28, 2048, 16, 8, 128, 6144, 151936, True),
    "Qwen/Qwen3-4B": ("qwen3", 36, 2560, 32, 8, 128, 9728, 151936, True),
    "Qwen/Qwen3-8B": ("qwen3", 36, 4096, 32, 8, 128, 12288, 151936, False),
    "meta-llama/Llama-3.2-1B": ("llama", 16, 2048, 32, 8, 64, 8192, 128256, True),
    "meta-llama/Llama-3.2-3B": ("llama", 28, 3072, 24, 8, 128, 8192, 128256, True),
    "meta-llama/Llama-3.1-8B": ("llama", 32, 4096, 32, 8, 128, 14336, 128256, False),
    "meta-llama/Llama-2-70b-hf": ("llama", 80, 8192, 64, 8, 128, 28672, 32000, False),  # docs/benchmarks/plan-check.md
    "HuggingFaceTB/SmolLM2-135M": ("llama", 30, 576, 9, 3, 64, 1536, 49152, True),
    "HuggingFaceTB/SmolLM2-360M": ("llama", 32, 960, 15, 5, 64, 2560, 49152, True),
    "HuggingFaceTB/SmolLM2-1.7B": ("llama", 24, 2048, 32, 32, 64, 8192, 49152, True),
    "google/gemma-2-2b": ("gemma2", 26, 2304, 8, 4, 256, 9216, 256000, True),
    "google/gemma-2-9b": ("gemma2", 42, 3584, 16, 8, 256, 14336, 256000, True),
    "google/gemma-3-1b-pt": ("gemma3_text", 26, 1152, 4, 1, 256, 6912, 262144, True),
    "microsoft/Phi-3-mini-4k-instruct": ("phi3", 32, 3072, 32, 32, None, 8192, 32064, False),
    "microsoft/Phi-3.5-mini-instruct": ("phi3", 32, 3072, 32, 32, None, 8192, 32064, False),
    "microsoft/Phi-4-mini-instruct": ("phi3", 32, 3072, 24, 8, None, 8192, 200064, True),
}
VARIANTS = ("-instruct", "-it", "-base", "-chat-hf", "-chat", "-pt", "-hf")  # suffixes that name the same shape


def _key(name: str) -> str:
    name = name.lower()
    for suffix in VARIANTS:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


_BY_KEY = {_key(hub_id): hub_id for hub_id in MODELS}


def find(name: str) -> str | None:
    """The table's hub id for ``name`` (any case, any listed variant suffix), or None."""
    return _BY_KEY.get(_key(name))


def config_fields(name: str) -> dict | None:
    """``config.json`` keys for ``name`` (``model_type`` plus size fields), or None when it is not in the table."""
    hub_id = find(name)
    if hub_id is None:
        return None
    model_type, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, tied = MODELS[hub_id]
    fields = {
        "model_type": model_type,
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    }
    if head_dim is not None:
        fields["head_dim"] = head_dim
    return fields


def listing() -> list[str]:
    """One line per table entry (hub id, layers x hidden, vocabulary), for ``grpo-ext ls``."""
    return [f"{hub_id:<44} {m[0]}, {m[1]} layers x {m[2]}, vocab {m[7]}" for hub_id, m in MODELS.items()]
