"""The kinds of a recipe's values (bool, int, float, str, list, dict, null) and coercion between them."""

import math
from collections.abc import Sequence
from typing import Any

from grpo_ext.core.text import shown

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


def kind_of(value: object) -> str:
    """The YAML kind of a value: ``str``, ``int``, ``float``, ``bool``, ``list``, ``dict`` or ``null``."""
    return _KIND_OF.get(type(value), type(value).__name__)


def coerce(value: Any, kinds: Sequence[str]) -> tuple[Any, bool]:
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


def wrong_kind(kinds: Sequence[str], value: object) -> str:
    """What a key of the wrong kind reads: the kinds it takes and what it got; a key left empty says so.

    >>> wrong_kind(("list",), "calculator")
    "expected a list, got str 'calculator'"
    >>> wrong_kind(("list",), None)
    'expected a list, got no value (the key is there, empty: give it one, or remove the key)'
    """
    if value is None:
        return f"expected {describe_kinds(kinds)}, got no value (the key is there, empty: give it one, or remove the key)"
    return f"expected {describe_kinds(kinds)}, got {kind_of(value)} {shown(value)}"


def describe_kinds(kinds: Sequence[str]) -> str:
    """``('int', 'null')`` → ``an integer or null``."""
    return " or ".join(_KIND_NAMES.get(k, k) for k in kinds)
