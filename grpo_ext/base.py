"""Plain helpers every layer shares: value kinds and coercion, "did you mean" hints, paths relative to a recipe.

Standard library only; nothing else from the package is imported here.
"""

import difflib
from pathlib import Path

_KIND_OF = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict", type(None): "null"}
_KIND_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
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
    string is converted where a float is expected.

    >>> coerce("1e-5", ("float",)), coerce(3, ("float",)), coerce("x", ("int",))
    ((1e-05, True), (3, True), ('x', False))
    """
    kind = kind_of(value)
    if "any" in kinds or kind in kinds:
        return value, True
    if "float" in kinds and kind == "int":
        return value, True
    if "float" in kinds and kind == "str":
        try:
            return float(value), True
        except ValueError:
            return value, False
    return value, False


def describe_kinds(kinds) -> str:
    """``('int', 'null')`` → ``an integer or null``."""
    return " or ".join(_KIND_NAMES.get(k, k) for k in kinds)


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


def first_line(doc: str | None) -> str:
    """The first non-empty line of a docstring or message, stripped."""
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""
