"""Prompts → datasets: the rows a recipe's ``data:`` section names, formatted as TRL expects them.

Rows come from inline prompts, a file, a built-in generator or a hub dataset; each has a ``prompt`` and
any other columns, which reach the rewards as keyword arguments. Plain prompts become chat messages when
the tokenizer has a chat template.
"""

from pathlib import Path

from grpo_ext import generators
from grpo_ext.base import first_line, resolve_path
from grpo_ext.errors import RecipeError, RunError

FILE_KINDS = {".jsonl": "json", ".json": "json", ".csv": "csv"}  # suffix → datasets' loader


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


def _renamed(rows, column: str) -> list[dict]:
    """Rows with ``column`` renamed to ``prompt``."""
    return [{**{k: v for k, v in r.items() if k != column}, "prompt": r[column]} for r in rows]


def _read_file(data_cfg: dict, base_dir: Path) -> list[dict]:
    from datasets import load_dataset

    path = resolve_path(data_cfg["file"], base_dir)
    try:
        rows = list(load_dataset(FILE_KINDS[path.suffix], data_files=str(path), split="train"))
    except Exception as exc:  # an empty file, a broken line: datasets wraps the parser's own error
        cause = exc.__cause__ or exc
        raise RecipeError(f"data.file: cannot read {path.name}: {type(cause).__name__}: {first_line(str(cause))}") from None
    column = data_cfg["prompt_column"]
    if not rows or column not in rows[0]:
        found = ", ".join(rows[0]) if rows else "no rows"
        raise RecipeError(f"data.prompt_column: {path.name} has no column {column!r} (found: {found})")
    return _renamed(rows, column)


def hub_rows(data_cfg: dict, split: str, limit: int | None) -> list[dict]:
    """Rows of a hub dataset split, with ``prompt_column`` renamed to ``prompt``."""
    from datasets import load_dataset

    try:
        ds = load_dataset(data_cfg["hub"], data_cfg["hub_config"], split=split)
    except Exception as exc:
        raise RunError(
            f"data.hub: loading {data_cfg['hub']!r} split {split!r} failed: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    column = data_cfg["prompt_column"]
    if column not in ds.column_names:
        raise RecipeError(f"data.prompt_column: {data_cfg['hub']} has no column {column!r} (found: {', '.join(ds.column_names)})")
    if limit is not None:
        ds = ds.select(range(min(limit, len(ds))))
    return _renamed(ds, column)


def train_rows(data_cfg: dict, base_dir: Path) -> list[dict]:
    """The training rows: a ``prompt`` text and any extra columns (passed to rewards as keyword arguments)."""
    if data_cfg.get("file"):
        return _read_file(data_cfg, base_dir)
    if data_cfg.get("source"):
        return generators.generated(data_cfg)[0]
    if data_cfg.get("hub"):
        return hub_rows(data_cfg, data_cfg["hub_split"], None)
    return [{"prompt": p} for p in data_cfg.get("prompts") or []]


def eval_rows(data_cfg: dict) -> list[dict]:
    """The held-out rows scored before and after training (none when the recipe has none)."""
    if data_cfg.get("eval_prompts") is not None:
        return [{"prompt": p} for p in data_cfg["eval_prompts"]]
    if data_cfg.get("source"):
        return generators.generated(data_cfg)[1]
    if data_cfg.get("hub") and data_cfg.get("eval_split"):
        return hub_rows(data_cfg, data_cfg["eval_split"], data_cfg["eval_size"])
    return []


def formatted(rows: list[dict], data_cfg: dict, chat: bool) -> list[dict]:
    """Rows with each prompt put in the form TRL expects (system prompt and chat messages applied)."""
    return [{**r, "prompt": format_prompt(r["prompt"], data_cfg["system_prompt"], chat)} for r in rows]


def dataset(rows: list[dict], data_cfg: dict, chat: bool):
    """A datasets.Dataset of the formatted rows, as GRPOTrainer takes it."""
    from datasets import Dataset

    return Dataset.from_list(formatted(rows, data_cfg, chat))
