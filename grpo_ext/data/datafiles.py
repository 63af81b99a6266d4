"""Data files a recipe names (``data.file``, ``data.eval_file``): the formats read, their columns read cheaply,
the rule that makes a row's prompt, and a full check that names the line or row of the first bad record.

Formats: ``.jsonl``, ``.json`` (JSON Lines or one array of objects), ``.csv``, ``.parquet``, and a folder
written by ``datasets``' ``save_to_disk`` (a Dataset, or a DatasetDict with splits). A prompt is text or a
list of chat messages (TRL's standard and conversational formats); it comes from ``data.prompt_column``,
from ``data.prompt_template`` filled with a row's columns, or, for a file of whole conversations, from
its ``messages`` column without the final assistant turn.

Plain Python: ``columns`` reads a header, a first line or a schema, never the whole file, so a recipe is
checked without torch or datasets; ``scan`` streams the file once, holding one row at a time. A path that is not a
regular file (a named pipe, a device, a socket) is refused before it is opened, and a file that cannot be read
(empty, cut short, damaged, not of its format) is one line naming it and what its reader said, never a traceback.
"""

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

from grpo_ext.core.errors import Loc, Problem, RecipeError
from grpo_ext.core.files import special
from grpo_ext.core.text import clip, first_line, listing
from grpo_ext.core.values import kind_of

SUFFIXES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}  # suffix → datasets' builder
SAVED = "saved"  # a folder written by Dataset.save_to_disk or DatasetDict.save_to_disk
FORMATS = ".jsonl, .json, .csv, .parquet, or a folder written by datasets' save_to_disk"
MESSAGES = "messages"  # the column of a file of whole conversations
ROLES = ("system", "user", "assistant", "tool")
# Characters of one prompt: about 250,000 tokens at ~4 characters a token, past the context of any model GRPO trains;
# the tokenizer aborts on a prompt of tens of megabytes.
MAX_PROMPT_CHARS = 1_000_000


def kind(path: Path) -> str | None:
    """The datasets builder that reads ``path`` (json, csv, parquet), ``saved`` for a save_to_disk folder, else None."""
    if path.is_dir():
        return SAVED if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file() else None
    return SUFFIXES.get(path.suffix.lower())


def check_path(path: Path, loc: Loc) -> Problem | None:
    """One problem with a data path (missing, not a regular file or a folder, or a format not read), else None."""
    if not path.exists():
        return Problem(loc, f"{str(path)!r} does not exist; paths are relative to the recipe's folder")
    what = special(path)
    if what not in (None, "a folder"):  # a named pipe waits for a writer, a device reads forever: never opened
        return Problem(loc, f"{str(path)!r} is {what}, not a file; give a regular file ({FORMATS})")
    if kind(path) is None:
        what = "a folder without dataset_info.json or dataset_dict.json" if path.is_dir() else path.suffix or "no extension"
        return Problem(loc, f"{what} is not supported; use {FORMATS}")
    return None


def holds_out(eval_fraction: float | None, eval_size: int | None, eval_file: str | None, eval_split: str | None) -> bool:
    """Whether a data: section's eval rows are held out of its training rows: ``eval_fraction``, or ``eval_size``
    without an ``eval_file`` or ``eval_split`` (whose first rows it would otherwise pick)."""
    return eval_fraction is not None or (eval_size is not None and not (eval_file or eval_split))


def splits(path: Path, loc: Loc = ("data", "file")) -> list[str] | None:
    """The splits of a saved DatasetDict, None for any other data path."""
    index = path / "dataset_dict.json"
    if not path.is_dir() or not index.is_file():
        return None
    names = _saved_json(index, loc, path).get("splits", [])
    return [str(name) for name in names] if isinstance(names, list) else []


def split_path(path: Path, split: str | None, loc: Loc) -> Path:
    """The folder of one split of a saved DatasetDict (``path`` itself for anything else)."""
    names = splits(path, loc)
    if names is None:
        return path
    if split is None:
        listed, example = ", ".join(names), f"{path.name}/{names[0]}"
        raise RecipeError(
            Problem(loc, f"{path.name} is a DatasetDict (splits: {listed}); give one split's folder, e.g. {example}")
        )
    if split not in names:
        raise RecipeError(Problem(loc, f"{path.name} is a DatasetDict with splits {', '.join(names)}; no split {split!r}"))
    return path / split


class BadData(RecipeError):
    """A data file that cannot be read, with the line or row and what is wrong."""

    def __init__(self, loc: Loc, path: Path, where: str, what: str):
        super().__init__(Problem(loc, f"{path.name}{', ' + where if where else ''}: {what}"))


def _regular(path: Path, loc: Loc, folder: Path | None = None) -> None:
    """BadData unless ``path`` is a regular file (``folder``: the saved dataset it belongs to), asked before it is
    opened: a named pipe would wait for a writer, a device read forever."""
    what = special(path)
    if what is None:
        return
    if folder is not None:
        raise BadData(loc, folder, "", f"its {path.name} is {what}, not a file; save the dataset again with save_to_disk")
    raise BadData(loc, path, "", f"{what}, not a file; give a regular file ({FORMATS})")


def _reader_said(exc: BaseException) -> str:
    """What a reader's error says, in a few words: its first sentence, cut short."""
    return clip(first_line(str(exc)).split(". ")[0].rstrip(".") or type(exc).__name__, 100)


def _saved_json(path: Path, loc: Loc, folder: Path) -> dict:
    """One JSON file of a saved dataset folder (dataset_info.json, state.json, dataset_dict.json) as a mapping;
    BadData when it is missing, not a file, or not a JSON object."""
    if not path.exists():
        raise BadData(loc, folder, "", f"no {path.name} in the folder; save the dataset again with save_to_disk")
    _regular(path, loc, folder)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise BadData(loc, folder, "", f"its {path.name} is not JSON ({_reader_said(exc)}); save the dataset again") from None
    if not isinstance(doc, dict):
        raise BadData(loc, folder, "", f"its {path.name} holds a JSON {kind_of(doc)}, not an object; save the dataset again")
    return doc


def _text_line(raw: bytes, number: int, loc: Loc, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = raw[exc.start : exc.start + 1].hex()
        what = f"byte 0x{byte} at column {exc.start + 1} is not UTF-8; save the file as UTF-8"
        raise BadData(loc, path, f"line {number}", what) from None


def _json_line(text: str, number: int, loc: Loc, path: Path) -> dict:
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadData(loc, path, f"line {number}", f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise BadData(loc, path, f"line {number}", "JSON nested too deeply to read; a row is an object of columns") from None
    if not isinstance(row, dict):
        raise BadData(loc, path, f"line {number}", f"a row is a JSON object of columns, got {kind_of(row)}")
    return row


def _json_lines(path: Path, loc: Loc) -> Iterator[tuple[str, dict]]:
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            text = _text_line(raw, number, loc, path).strip()
            if text:
                yield f"line {number}", _json_line(text, number, loc, path)


def _json_array(path: Path, loc: Loc) -> Iterator[tuple[str, dict]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise BadData(loc, path, f"line {line}", "a byte is not UTF-8; save the file as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise BadData(loc, path, f"line {exc.lineno}", f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise BadData(loc, path, "", "JSON nested too deeply to read; a .json file is one array of row objects") from None
    if not isinstance(rows, list):
        raise BadData(loc, path, "", f"a .json file is JSON Lines or one array of row objects, not {kind_of(rows)}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BadData(loc, path, f"row {i + 1}", f"a row is a JSON object of columns, got {kind_of(row)}")
        yield f"row {i + 1}", row


def _is_array(path: Path) -> bool:
    """A .json file holding one array of rows (a .json file may also be JSON Lines; a .jsonl file always is)."""
    if path.suffix.lower() != ".json":
        return False
    with path.open("rb") as f:
        return f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[")


def _csv_rows(path: Path, loc: Loc) -> Iterator[tuple[str, dict]]:
    with path.open("rb") as f:  # every line is UTF-8, checked line by line so that the error names the line
        for number, raw in enumerate(f, 1):
            _text_line(raw, number, loc, path)
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if not header:
                return
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise BadData(loc, path, f"line {reader.line_num}", f"{len(row)} fields, the header has {len(header)}")
                yield f"line {reader.line_num}", dict(zip(header, row, strict=True))
        except csv.Error as exc:  # a field past csv's limit of 131,072 characters, a quote where none may be
            raise BadData(loc, path, f"line {reader.line_num}", f"not readable as CSV: {exc}") from None


def _unreadable(path: Path) -> str:
    """What to do with a parquet file or saved dataset that its reader refused."""
    if path.is_dir():
        return "not a readable dataset folder ({}); save it again with save_to_disk"
    return "not a readable Parquet file ({}); write it again, e.g. with pandas' to_parquet"


def _arrow_errors() -> tuple[type[BaseException], ...]:
    """What pyarrow raises on a file that is empty, cut short or not of its format (ArrowInvalid is a ValueError,
    a damaged footer an OSError)."""
    import pyarrow as pa

    return (pa.ArrowException, OSError, ValueError)


def _arrow_batches(path: Path, loc: Loc) -> Iterator:
    """Record batches of a parquet file or of a saved dataset's arrow files, read lazily."""
    if path.is_dir():
        import pyarrow as pa

        files = _saved_json(path / "state.json", loc, path).get("_data_files", [])
        listed = [entry.get("filename") if isinstance(entry, dict) else None for entry in files]
        names = [name for name in listed if isinstance(name, str)]
        if len(names) < len(listed):
            raise BadData(loc, path, "", "its state.json lists its data files without their names; save the dataset again")
        for name in names:
            if not (path / name).exists():
                raise BadData(loc, path, "", f"its {name} is missing; save the dataset again with save_to_disk")
            _regular(path / name, loc, path)
            with pa.memory_map(str(path / name)) as source:
                yield from pa.ipc.open_stream(source)
    else:
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(str(path)).iter_batches(batch_size=1024)


def _arrow_rows(path: Path, loc: Loc) -> Iterator[tuple[str, dict]]:
    n = 0
    try:
        for batch in _arrow_batches(path, loc):
            for row in batch.to_pylist():
                n += 1
                yield f"row {n}", row
    except _arrow_errors() as exc:
        raise BadData(loc, path, f"after row {n}" if n else "", _unreadable(path).format(_reader_said(exc))) from None


def rows(path: Path, loc: Loc) -> Iterator[tuple[str, dict]]:
    """(where, row) for each record of a data path (one split's folder for a DatasetDict), one at a time."""
    builder = kind(path)
    if builder != SAVED:
        _regular(path, loc)
    if builder == "csv":
        return _csv_rows(path, loc)
    if builder in ("parquet", SAVED):
        return _arrow_rows(path, loc)
    return _json_array(path, loc) if _is_array(path) else _json_lines(path, loc)


def columns(path: Path, loc: Loc) -> list[str]:
    """The column names of a data path, from its first row, header or schema (not the whole file)."""
    found = _columns(path, loc)
    if not found:
        raise BadData(loc, path, "", "the file has no rows" if path.is_file() else "the dataset has no columns")
    return found


def _columns(path: Path, loc: Loc) -> list[str]:
    builder = kind(path)
    if builder == SAVED:
        features = _saved_json(path / "dataset_info.json", loc, path).get("features") or {}
        return [str(name) for name in features] if isinstance(features, dict) else []
    _regular(path, loc)
    if builder == "parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(str(path)).names)
        except _arrow_errors() as exc:
            raise BadData(loc, path, "", _unreadable(path).format(_reader_said(exc))) from None
    if builder == "csv":
        with path.open("rb") as f:
            first = _text_line(f.readline(), 1, loc, path)
        try:
            return next(csv.reader(io.StringIO(first.lstrip("\ufeff"))), [])
        except csv.Error as exc:
            raise BadData(loc, path, "line 1", f"not readable as CSV: {exc}") from None
    if _is_array(path):
        return next((list(row) for _, row in _json_array(path, loc)), [])
    return next((list(row) for _, row in _json_lines(path, loc)), [])


def template_fields(template: str) -> list[str]:
    """The column names a prompt template uses (``{question}``); ValueError for a template str.format refuses."""
    names = []
    import string  # here, not at the top: only a recipe with a prompt template reads one

    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not name or name.isdigit() or any(c in name for c in ".[]"):
            raise ValueError(f"{{{name}}} is not a column name; write {{column}}, and {{{{ }}}} for a literal brace")
        if spec or conversion:
            raise ValueError(f"{{{name}}} has a format spec or conversion; write {{{name}}} alone")
        names.append(name)
    if not names:
        raise ValueError("names no column; write e.g. 'Question: {question}'")
    return names


def prompt_rule(cols: list[str], template: str | None, column: str, rows: str) -> tuple[str, object]:
    """How a row's prompt is made from these columns, by ``data.prompt_template`` or else ``data.prompt_column``:
    ("template", fields), ("column", name) or, for rows of whole conversations without a ``prompt`` column,
    ("messages", MESSAGES); RecipeError naming the ``rows`` and the columns present when none applies."""
    present = listing(cols)
    if template:
        missing = [f for f in template_fields(template) if f not in cols]
        if missing:
            raise RecipeError(Problem(("data", "prompt_template"), f"{rows} has no column {missing[0]!r} (columns: {present})"))
        return "template", template_fields(template)
    if column in cols:
        return "column", column
    if column == "prompt" and MESSAGES in cols:
        return "messages", MESSAGES
    hint = "; set data.prompt_column or data.prompt_template" if cols else ""
    raise RecipeError(Problem(("data", "prompt_column"), f"{rows} has no column {column!r} (columns: {present}){hint}"))


def is_messages(value: object) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)


def prompt_of(row: dict[str, Any], rule: tuple[str, Any], template: str | None) -> str | list[dict[str, Any]]:
    """The prompt of one row: text, or chat messages. ValueError says what is wrong with the row."""
    how, what = rule
    if how == "template":
        return (template or "").format_map({name: "" if row.get(name) is None else row[name] for name in what})
    value = row.get(what)
    if how == "messages":
        if not is_messages(value):
            raise ValueError(f"{MESSAGES!r} is not a list of chat messages ({{role, content}}), got {kind_of(value)}")
        turns = value[:-1] if value[-1]["role"] == "assistant" else value
        if not turns:
            raise ValueError(f"{MESSAGES!r} holds only an assistant turn; a prompt needs a user message")
        return turns
    if isinstance(value, str) and value.strip():
        return value
    if is_messages(value):
        return value
    got = "an empty string" if isinstance(value, str) else kind_of(value)  # its kind, never the file's contents
    raise ValueError(f"prompt column {what!r} holds {got}; a prompt is text or a list of chat messages ({{role, content}})")


def oversized(prompt) -> str | None:
    """What is wrong with a prompt (text or messages) longer than MAX_PROMPT_CHARS characters, else None.

    >>> oversized("x" * 2_000_000), oversized([{"role": "user", "content": "2+3?"}])
    ('the prompt is 2,000,000 characters; a prompt is at most 1,000,000: shorten it or leave the row out', None)
    """
    texts = [prompt] if isinstance(prompt, str) else [m.get("content") for m in prompt]
    size = sum(len(text) for text in texts if isinstance(text, str))
    if size <= MAX_PROMPT_CHARS:
        return None
    return f"the prompt is {size:,} characters; a prompt is at most {MAX_PROMPT_CHARS:,}: shorten it or leave the row out"


def scan(path: Path, loc: Loc, rule: tuple[str, object], template: str | None) -> tuple[int, list[str]]:
    """Read every row once and stop at the first bad one (BadData naming its line or row): a prompt that is not
    text or messages or is longer than MAX_PROMPT_CHARS, prompts of both forms, or a row whose columns differ
    from the first row's.
    Returns (rows, columns)."""
    first: dict | None = None
    form = None
    n = 0
    for where, row in rows(path, loc):
        n += 1
        if first is None:
            first = row
        elif row.keys() != first.keys():
            missing, extra = sorted(first.keys() - row.keys()), sorted(row.keys() - first.keys())
            parts = [f"no column {listing(list(map(repr, missing)))}"] if missing else []
            parts += [f"extra column {listing(list(map(repr, extra)))}"] if extra else []
            said = f"{'; '.join(parts)} (the first row has: {listing(list(first))})"
            raise BadData(loc, path, where, f"{said}; give every row the same columns")
        try:
            prompt = prompt_of(row, rule, template)
        except ValueError as exc:
            raise BadData(loc, path, where, str(exc)) from None
        too_long = oversized(prompt)
        if too_long:
            raise BadData(loc, path, where, too_long)
        this = "text" if isinstance(prompt, str) else "chat messages"
        if form is None:
            form = this
        elif this != form:
            raise BadData(loc, path, where, f"the prompt is {this}, the first row's is {form}; use one form for every row")
    if n == 0:
        raise BadData(loc, path, "", "the file has no rows")
    return n, list(first or {})
