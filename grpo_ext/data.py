"""Prompts → datasets. Plain prompts become chat messages when the tokenizer has a chat template."""

from pathlib import Path

from grpo_ext.errors import RecipeError


def use_chat(data_cfg: dict, tokenizer) -> bool:
    if data_cfg["chat"] == "auto":
        return bool(getattr(tokenizer, "chat_template", None))
    if data_cfg["chat"] and not getattr(tokenizer, "chat_template", None):
        raise RecipeError("data.chat: true, but the tokenizer has no chat template; set data.chat: false")
    return bool(data_cfg["chat"])


def format_prompt(text: str, system_prompt: str | None, chat: bool):
    """One prompt in the form TRL expects: a message list for chat, the text otherwise."""
    if not chat:
        return text if system_prompt is None else f"{system_prompt}\n\n{text}"
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": text}]


def _read_file(data_cfg: dict, base_dir: Path) -> list[dict]:
    from datasets import load_dataset

    path = Path(data_cfg["file"]).expanduser()
    path = path if path.is_absolute() else base_dir / path
    kind = {".jsonl": "json", ".json": "json", ".csv": "csv"}[path.suffix]
    rows = list(load_dataset(kind, data_files=str(path), split="train"))
    column = data_cfg["prompt_column"]
    if not rows or column not in rows[0]:
        found = ", ".join(rows[0]) if rows else "no rows"
        raise RecipeError(f"data.prompt_column: {path.name} has no column {column!r} (found: {found})")
    return [{**{k: v for k, v in r.items() if k != column}, "prompt": r[column]} for r in rows]


def rows(data_cfg: dict, base_dir: Path, key: str = "prompts") -> list[dict]:
    """Rows with a ``prompt`` text and any extra columns (passed to rewards as keyword arguments)."""
    if key == "prompts" and data_cfg.get("file"):
        return _read_file(data_cfg, base_dir)
    if key == "eval_prompts" and data_cfg.get("eval_prompts") is not None:
        return [{"prompt": p} for p in data_cfg["eval_prompts"]]
    if data_cfg.get("source"):
        from grpo_ext import sources

        return sources.generated(data_cfg)[0 if key == "prompts" else 1]
    if data_cfg.get("hub"):
        from grpo_ext import sources

        if key == "prompts":
            return sources.hub_rows(data_cfg, data_cfg["hub_split"], None)
        return sources.hub_rows(data_cfg, data_cfg["eval_split"], data_cfg["eval_size"]) if data_cfg.get("eval_split") else []
    return [{"prompt": p} for p in data_cfg.get(key) or []]


def dataset(data_cfg: dict, base_dir: Path, chat: bool, key: str = "prompts"):
    from datasets import Dataset

    records = rows(data_cfg, base_dir, key)
    for r in records:
        r["prompt"] = format_prompt(r["prompt"], data_cfg["system_prompt"], chat)
    return Dataset.from_list(records)
