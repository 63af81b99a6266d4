"""The JSON schema the model reads for a tool, from its signature, type hints and Google-style docstring, as
transformers writes it (``transformers.utils.get_json_schema``, which TRL's chat template calls), read with the
standard library alone.

Validation uses it to check a user's tool without importing transformers (whose import alone takes most of a
second, and with torch installed pulls torch in to map ``torch.Tensor`` hints). ``tests/unit/test_tool_schema.py``
holds it against transformers' own function on a table of tools: the same schema, or the same refusal.

    def weather(city: str, days: int = 1) -> str:
        '''Today's weather in a city.

        Args:
            city: the city's name, in English
            days: how many days ahead (choices: [1, 2, 3])
        '''

    tool_schema(weather)["function"]["parameters"]["properties"]["days"]
    -> {"type": "integer", "enum": [1, 2, 3], "description": "how many days ahead"}

The docstring is read as transformers reads it, its quirks included, since what the model sees is what it reads:

- the description is the text before the first ``Args:``, ``Returns:`` or ``Raises:``, wherever it stands;
- ``Args:`` and ``Returns:`` are headings only on a line of their own below the first, with nothing after the colon;
  the ``Args:`` block runs to the first ``Returns:`` or ``Raises:``, wherever it stands;
- in the block, an argument is a line ``name:`` or ``name (type):``; its description runs on over the lines below,
  joined with single spaces, until a line of that form that is not indented deeper. An argument whose own line has
  nothing after the colon takes the next line as its description's start, whatever that line holds;
- ``(choices: [...])`` at the end of a description is a JSON list of the values allowed (``enum``).
"""

import enum
import inspect
import json
import re
import sys
import types
import typing
from dataclasses import dataclass

# JSON schema's name for each Python type whose values JSON writes as they are (what a Literal or an Enum may hold)
_SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}
_CONTAINERS = {list: "array", tuple: "array", dict: "object"}
# transformers also maps these two when their package is installed; a hint naming one has imported it already
_IMPORTED = (("torch", "Tensor", "audio"), ("PIL.Image", "Image", "image"))
# an argument's line in the Args: block: its indentation, its name, an optional "(type)", the colon
_ARGUMENT = re.compile(r"([ \t]*)(\w+)(?:[ \t]*\([^()]*\))?:")
_CHOICES = re.compile(r"\(choices:", re.IGNORECASE)


class SchemaProblem(ValueError):
    """Why a function cannot be written as a tool's schema: ``part`` is ``"docstring"`` or ``"type hint"``, the two
    kinds transformers refuses (``DocstringParsingException``, ``TypeHintParsingException``), and ``argument`` the
    argument it is about (None when it is about the whole function or a hint on its own)."""

    def __init__(self, part: str, argument: str | None, message: str):
        super().__init__(message)
        self.part, self.argument = part, argument


@dataclass(frozen=True)
class Docstring:
    """A Google-style docstring's parts: the description, each argument's description, the ``Returns:`` text."""

    description: str
    args: dict[str, str]
    returns: str | None


def read_docstring(doc: str) -> Docstring:
    """The parts of a cleaned docstring (``inspect.getdoc``'s), read as transformers reads them.

    >>> text = read_docstring('''Add two numbers.
    ...
    ... Args:
    ...     a (int): the first,
    ...         which may be negative
    ...     b: the second
    ...
    ... Returns:
    ...     their sum''')
    >>> text.description, text.returns
    ('Add two numbers.', 'their sum')
    >>> text.args
    {'a': 'the first, which may be negative', 'b': 'the second'}
    """
    doc = doc.strip()
    description = doc[: _first(doc, 0, ("Args:", "Returns:", "Raises:"))].strip()
    args = {}
    start = _section(doc, "Args:")
    if start is not None:
        block = doc[start : _first(doc, start, ("Returns:", "Raises:"))]
        args = _arguments([line for line in block.split("\n") if line.strip()])
    start = _section(doc, "Returns:")
    returns = doc[start : _first(doc, start, ("Raises:",))].strip() if start is not None else None
    return Docstring(description, args, returns)


def _first(doc: str, start: int, words: tuple[str, ...]) -> int:
    """Where the first of ``words`` stands in ``doc`` from ``start`` on, or the end."""
    found = [i for i in (doc.find(w, start) for w in words) if i >= 0]
    return min(found, default=len(doc))


def _section(doc: str, heading: str) -> int | None:
    """Where the section under ``heading`` starts: after the first line below the first that holds the heading alone
    (indentation aside, nothing after it) and is not the last line."""
    offset = 0
    lines = doc.split("\n")
    for i, line in enumerate(lines):
        if 0 < i < len(lines) - 1 and line.lstrip() == heading:
            return offset + len(line) + 1
        offset += len(line) + 1
    return None


def _arguments(lines: list[str]) -> dict[str, str]:
    """Each argument of an ``Args:`` block (its lines, blank ones left out) with its description on one line."""
    args: dict[str, str] = {}
    i = 0
    while i < len(lines):
        found = _ARGUMENT.match(lines[i])
        if not found:  # text before the first argument is no argument's
            i += 1
            continue
        indent, name = found.groups()
        pieces = [lines[i][found.end() :]]
        i += 1
        if not pieces[0].strip() and i < len(lines):  # "name:" alone: its description starts on the next line
            pieces.append(lines[i])
            i += 1
        while i < len(lines) and not _next_argument(lines[i], indent):
            pieces.append(lines[i])
            i += 1
        args[name] = " ".join(p.strip() for p in pieces if p.strip())
    return args


def _next_argument(line: str, indent: str) -> bool:
    """Whether ``line`` starts the next argument after one indented by ``indent``: an argument's line, not deeper."""
    deeper = line.startswith(indent) and line[len(indent) : len(indent) + 1] in (" ", "\t")
    return bool(_ARGUMENT.match(line)) and not deeper


def choices(description: str, argument: str) -> tuple[str, list | None]:
    """An argument's description without its ending ``(choices: [...])``, and the values it lists (None without one).

    >>> choices('a drink (choices: ["tea", "coffee"])', "drink")
    ('a drink', ['tea', 'coffee'])
    >>> choices("a drink (choices: tea, coffee)", "drink")[1]
    Traceback (most recent call last):
    ...
    grpo_ext.tools.schema.SchemaProblem: (choices: tea, coffee) is not a JSON list; write (choices: ["a", "b"])
    """
    found = _CHOICES.search(description)
    if not found or not description.endswith(")"):
        return description, None
    text = description[found.end() : -1].lstrip()
    try:
        values = [v.strip() if isinstance(v, str) else v for v in json.loads(text)]
    except (ValueError, TypeError):
        raise SchemaProblem("docstring", argument, f'(choices: {text}) is not a JSON list; write (choices: ["a", "b"])') from None
    return description[: found.start()].strip(), values


def hint_schema(hint: object) -> dict:
    """The JSON schema of one type hint, as transformers writes it.

    >>> hint_schema(list[int] | None)
    {'type': 'array', 'items': {'type': 'integer'}, 'nullable': True}
    >>> hint_schema(typing.Literal["fast", 2])
    {'type': ['string', 'integer'], 'enum': ['fast', 2]}
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None:
        return _plain(hint)
    if origin in (typing.Union, types.UnionType):
        return _union(args)
    if origin is typing.Literal:
        return _enum(list(args), "typing.Literal")
    if origin is list:
        return {"type": "array", **({"items": hint_schema(args[0])} if args else {})}
    if origin is tuple:
        if args and (len(args) == 1 or ... in args):
            raise SchemaProblem("type hint", None, f"{_text(hint)} is not one JSON schema states; use list[...]")
        return {"type": "array", **({"prefixItems": [hint_schema(a) for a in args]} if args else {})}
    if origin is dict:  # JSON keys are strings: only the values' type is stated
        return {"type": "object", **({"additionalProperties": hint_schema(args[1])} if len(args) == 2 else {})}
    raise SchemaProblem("type hint", None, f"{_text(hint)} is not a type JSON schema can state")


def _plain(hint: object) -> dict:
    """The schema of a hint without parameters: a basic type, ``Any``, an Enum class."""
    if hint is typing.Any:
        return {}
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return _enum([member.value for member in hint], f"the Enum {hint.__name__}")
        if hint in _SCALARS or hint in _CONTAINERS:
            return {"type": _SCALARS.get(hint) or _CONTAINERS[hint]}
        for module, name, kind in _IMPORTED:
            if module in sys.modules and getattr(sys.modules[module], name, None) is hint:
                return {"type": kind}
    raise SchemaProblem("type hint", None, f"{_text(hint)} is not a type JSON schema can state")


def _union(args: tuple) -> dict:
    """A union's schema: one type, a list of basic types, or anyOf; ``nullable`` when None is one of them."""
    kinds = [hint_schema(a) for a in args if a is not type(None)]
    if len(kinds) == 1:
        out = kinds[0]
    elif all(set(k) == {"type"} and isinstance(k["type"], str) for k in kinds):
        names = sorted({k["type"] for k in kinds})  # list | tuple is one "array"
        out = {"type": names[0] if len(names) == 1 else names}
    else:
        out = {"anyOf": kinds}
    if type(None) in args:
        out["nullable"] = True
    return out


def _enum(values: list, what: str) -> dict:
    """A JSON ``enum`` of ``values``, typed with each JSON type among them once, in order."""
    if not values:
        raise SchemaProblem("type hint", None, f"{what} has no members, so no value matches it")
    if any(type(v) not in _SCALARS for v in values):
        raise SchemaProblem("type hint", None, f"{what} holds values JSON cannot write as they are: {values}")
    kinds = list(dict.fromkeys(_SCALARS[type(v)] for v in values))
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def _text(hint: object) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def tool_schema(fn) -> dict:
    """``{"type": "function", "function": {name, description, parameters[, return]}}`` for ``fn``, as
    ``transformers.utils.get_json_schema`` writes it, or its first problem as a ``SchemaProblem`` (an unresolved
    hint raises what ``typing.get_type_hints`` raises). A method's ``self`` or ``cls`` without a hint is left out."""
    name = getattr(fn, "__name__", "operation")
    doc = inspect.getdoc(fn)
    if not doc:
        raise SchemaProblem("docstring", None, f"{name} has no docstring")
    text = read_docstring(doc)
    hints = typing.get_type_hints(fn)
    params = inspect.signature(fn).parameters
    first = next(iter(params.values()), None)
    receiver = first.name if first and first.name in ("self", "cls") and first.annotation is first.empty else None
    required = []
    for p in params.values():
        if p.name == receiver:
            continue
        if p.annotation is p.empty:
            raise SchemaProblem("type hint", p.name, f"argument {p.name!r} of {name} has no type hint")
        if p.default is p.empty:
            required.append(p.name)
    properties, returned = {}, None
    for arg, hint in hints.items():
        if arg == "return":  # the model never writes the result: a hint JSON cannot state is left out, not refused
            try:
                returned = hint_schema(hint)
            except SchemaProblem:
                pass
        elif arg in params and arg != receiver:
            try:
                properties[arg] = hint_schema(hint)
            except SchemaProblem as exc:
                raise SchemaProblem("type hint", arg, f"argument {arg!r} of {name}: {exc}") from None
    for arg, schema in properties.items():
        if arg not in text.args:
            raise SchemaProblem("docstring", arg, f"argument {arg!r} of {name} has no line in its docstring's Args:")
        try:
            description, values = choices(text.args[arg], arg)
        except SchemaProblem as exc:
            raise SchemaProblem("docstring", arg, f"argument {arg!r} of {name}: {exc}") from None
        if values is not None:
            schema["enum"] = values
        schema["description"] = description
    parameters = {"type": "object", "properties": properties, **({"required": required} if required else {})}
    function = {"name": name, "description": text.description, "parameters": parameters}
    if returned is not None:
        if text.returns is not None:
            returned["description"] = text.returns
        function["return"] = returned
    return {"type": "function", "function": function}
