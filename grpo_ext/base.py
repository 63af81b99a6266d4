"""Plain helpers every layer shares: value kinds and coercion, "did you mean" hints, paths relative to a recipe,
YAML that refuses a key given twice, and files written whole or not at all.

Standard library and PyYAML only; nothing else from the package is imported here.
"""

import difflib
import math
import os
import tempfile
from pathlib import Path

import yaml

_KIND_OF = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict", type(None): "null"}
_KIND_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a finite number",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
    "null": "null",
}


def kind_of(value) -> str:
    """The YAML kind of a value: ``str``, ``int``, ``float``, ``bool``, ``list``, ``dict`` or ``null``."""
    return _KIND_OF.get(type(value), type(value).__name__)


def coerce(value, kinds: tuple[str, ...] | list[str]):
    """Return (value, ok). An int is a valid float; YAML reads ``1e-5`` as a string, so a numeric
    string is converted where a float is expected. A number is finite: ``.inf`` and ``.nan`` are refused.

    >>> coerce("1e-5", ("float",)), coerce(3, ("float",)), coerce("x", ("int",)), coerce(float("inf"), ("float",))
    ((1e-05, True), (3, True), ('x', False), (inf, False))
    """
    kind = kind_of(value)
    if kind == "float" and not math.isfinite(value):
        return value, "any" in kinds
    if "any" in kinds or kind in kinds:
        return value, True
    if "float" in kinds and kind == "int":
        return value, True
    if "float" in kinds and kind == "str":
        try:
            number = float(value)
        except ValueError:
            return value, False
        return (number, True) if math.isfinite(number) else (value, False)
    return value, False


def describe_kinds(kinds) -> str:
    """``('int', 'null')`` → ``an integer or null``."""
    return " or ".join(_KIND_NAMES.get(k, k) for k in kinds)


def clip(text: str, limit: int = 60) -> str:
    """Text cut to ``limit`` characters for an error line.

    >>> clip("x" * 100, 10)
    'xxxxxxxxx…'
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown(value, limit: int = 60) -> str:
    """A value as an error line shows it: its repr, cut to ``limit`` characters."""
    return clip(repr(value), limit)


def closest(name: str, options) -> str | None:
    """The option that ``name`` most likely misspells, or None."""
    hint = difflib.get_close_matches(str(name), [str(o) for o in options], n=1, cutoff=0.6)
    return hint[0] if hint else None


def suggest(name: str, options, otherwise: str | None = None) -> str:
    """``; did you mean 'x'?`` for a likely misspelling, else ``otherwise`` (default: the valid keys).

    >>> suggest("lerning_rate", ["learning_rate", "beta"])
    "; did you mean 'learning_rate'?"
    >>> suggest("zzz", ["a", "b"])
    '; valid keys: a, b'
    """
    hint = closest(name, options)
    if hint:
        return f"; did you mean {hint!r}?"
    return otherwise if otherwise is not None else f"; valid keys: {', '.join(sorted(map(str, options)))}"


def resolve_path(text: str, base_dir: Path) -> Path:
    """A path as a recipe means it: ``~`` expanded, a relative path taken from the recipe's folder."""
    path = Path(text).expanduser()
    return path if path.is_absolute() else base_dir / path


def fmt(value, digits: int = 3) -> str:
    """A score for a table or a progress line: ``0.125``, or ``-`` when there is none (nothing was judged)."""
    return "-" if value is None else f"{value:.{digits}f}"


def plural(n: int, word: str) -> str:
    """``1 prompt``, ``2 prompts``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def duplicate_keys(text: str) -> list[str]:
    r"""One line per key that a mapping of this YAML text gives twice (YAML itself keeps the last silently).

    >>> duplicate_keys("training:\n  learning_rate: 1.0e-5\n  beta: 0.0\n  learning_rate: 3.0e-5\n")
    ['training.learning_rate: given twice (lines 2 and 4); keep one']
    """
    problems: list[str] = []
    walked: set[int] = set()  # an alias repeats a node: walk it once, however often it is named

    def walk(node, path: str) -> None:
        if id(node) in walked:
            return
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may be overridden on purpose
                    continue
                name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark.line + 1)
                where = f"{path}.{name}" if path else name
                if name in seen:
                    first = seen[name]
                    problems.append(f"{where}: given twice (lines {first} and {key.start_mark.line + 1}); keep one")
                else:
                    seen[name] = key.start_mark.line + 1
                walk(value, where)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, f"{path}[{i}]")

    walk(yaml.compose(text, Loader=yaml.SafeLoader), "")
    return problems


def exists(path: Path, kind: str = "any") -> bool:
    """Whether ``path`` is there (``kind``: any, file or dir); a name no file system takes (too long) is not."""
    try:
        return {"any": path.exists, "file": path.is_file, "dir": path.is_dir}[kind]()
    except OSError:
        return False


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a kill leaves the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def first_line(doc: str | None) -> str:
    """The first non-empty line of a docstring or message, stripped."""
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""
