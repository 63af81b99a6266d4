"""The rows of a GRPO batch as TRL's loss reads them (prompt and completion tensors, advantages, per-token
log-probabilities), taken, joined and gathered across processes: what dynamic sampling and row skipping move.

Prompts are left-padded and every other token-aligned tensor right-padded, as TRL lays them out, so joining rows of
different widths pads each to the widest. A row moved to a wider batch gets more left padding: the model's
positions then start further on (TRL's loss pass gives none of its own), which changes nothing for a model whose
attention sees relative positions only (rotary embeddings: Llama, Qwen, Mistral, Gemma, SmolLM2) but rounding.
"""

PROMPT_SIDE = ("prompt_ids", "prompt_mask")  # left-padded; every other token-aligned tensor is right-padded


def pad_id(trainer) -> int:
    """The trainer's padding token: what rows joined to a wider batch are padded with."""
    tokenizer = trainer.processing_class if hasattr(trainer, "processing_class") else trainer.tokenizer
    return tokenizer.pad_token_id


def rows_of(batch: dict) -> int:
    """How many rows (completions) the batch holds."""
    return batch["completion_ids"].size(0)


def take(batch: dict, rows) -> dict:
    """The batch restricted to ``rows`` (indices): every tensor or list with one entry per row is indexed."""
    import torch

    n = rows_of(batch)
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.size(0) == n:
            out[key] = value[rows.to(value.device)]
        elif isinstance(value, list) and len(value) == n:
            out[key] = [value[i] for i in rows.tolist()]
        else:
            out[key] = value
    return out


def _pad(t, width: int, left: bool, value):
    import torch  # torch at call time: this module is imported before a run loads it

    extra = width - t.size(1)
    if extra == 0:
        return t
    pad = torch.full((t.size(0), extra, *t.shape[2:]), value, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


def join(parts: list[dict], pad_id: int) -> dict:
    """One batch of the parts' rows in order: per-row tensors padded to the widest part (prompts on the left,
    completions on the right) and joined; ``num_items_in_batch`` counted again."""
    import torch

    out, n = {}, rows_of(parts[0])
    for key, value in parts[0].items():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.size(0) == n:
            tensors = [p[key] for p in parts]
            if value.dim() > 1:
                width = max(t.size(1) for t in tensors)
                fill = pad_id if key.endswith("_ids") else 0
                tensors = [_pad(t, width, key in PROMPT_SIDE, fill) for t in tensors]
            out[key] = torch.cat(tensors, dim=0)
        elif isinstance(value, list) and len(value) == n:
            out[key] = [x for p in parts for x in p[key]]
        else:
            out[key] = value
    if "num_items_in_batch" in out:
        mask = out["completion_mask"] if out.get("tool_mask") is None else out["completion_mask"] * out["tool_mask"]
        old = out["num_items_in_batch"]
        out["num_items_in_batch"] = mask.sum().to(old.dtype) if isinstance(old, torch.Tensor) else int(mask.sum())
    return out


def gathered(trainer, batch: dict, pad_id: int) -> dict:
    """Every process's rows of a generation batch, joined in process order (the order of TRL's scores), on this
    process's device; one gather (through the CPU, so that no process unpickles another's device)."""
    import torch
    from accelerate.utils import gather_object

    device = batch["completion_ids"].device
    mine = {key: value.cpu() if isinstance(value, torch.Tensor) else value for key, value in batch.items()}
    parts = gather_object([mine])
    return join([{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in p.items()} for p in parts], pad_id)
