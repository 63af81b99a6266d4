"""Plain helpers every layer shares: value kinds and coercion, "did you mean" hints, paths relative to a recipe,
YAML read within bounds (depth, aliases, integer size) that refuses a key given twice, values shown in a message
through one bounded preview, and files written whole or not at all.

Standard library and PyYAML only; nothing else from the package is imported here.
"""

import builtins
import difflib
import itertools
import math
import os
import reprlib
import secrets
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
    r"""Text cut to ``limit`` characters for an error line, a character that does not print (a control or a
    zero-width character) written as its escape, so that the line shows what the text holds.

    >>> clip("x" * 100, 10), clip("lear\u200bning\trate")
    ('xxxxxxxxx…', 'lear\\u200bning\\trate')
    """
    # escaping only lengthens, so the characters past ``limit`` are never shown and never escaped
    escaped = "".join(c if c.isprintable() else builtins.repr(c)[1:-1] for c in text[:limit])
    return escaped if len(text) <= limit and len(escaped) <= limit else escaped[: limit - 1] + "…"


class _Preview(reprlib.Repr):
    """reprlib's repr, which stops at a depth and a number of items, so that a huge or self-containing value
    costs only what is shown; strings and integers cut at the front (``clip`` marks the cut), mappings in
    their own order (reprlib sorts the whole mapping first)."""

    def repr_str(self, x, level):
        return builtins.repr(x[: self.maxstring])

    def repr_int(self, x, level):
        if x.bit_length() > 4 * self.maxlong:  # more digits than are shown; str() refuses past 4300 digits anyway
            return f"<an integer of about {math.floor(x.bit_length() * math.log10(2)) + 1} digits>"
        return builtins.repr(x)

    def repr_dict(self, x, level):
        if x and level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items + ["..."] * (len(x) > self.maxdict)) + "}"


def shown(value, limit: int = 60) -> str:
    """A value as an error line shows it: its repr, cut to ``limit`` characters; only what is shown is built.

    >>> shown("x" * 100, 10), shown(10**5000), shown({"a": [[[[1]]]], "b": 2})
    ("'xxxxxxxx…", '<an integer of about 5001 digits>', "{'a': [[[...]]], 'b': 2}")
    """
    preview = _Preview()
    preview.maxlevel = 3
    preview.maxstring = preview.maxlong = preview.maxother = limit
    return clip(preview.repr(value), limit)


def listing(names: list, most: int = 10, width: int = 30) -> str:
    """Names (a file's columns) as a message lists them: the first ``most``, each cut to ``width`` by ``clip``.

    >>> listing(["prompt", "answer"]), listing([]), listing([f"c{i}" for i in range(12)], most=3)
    ('prompt, answer', 'none', 'c0, c1, c2 and 9 more')
    """
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return (", ".join(clip(str(name), width) for name in names[:most]) or "none") + more


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


# Bounds on YAML a user gives (a recipe, an override), checked while it is read so that nothing past them is built.
# A recipe is a few levels deep; the composer recurses about three frames a level, so 100 stays far inside
# Python's recursion limit of 1000 wherever it is called from.
MAX_YAML_DEPTH = 100
# Values a document stands for with every alias written out: a 1 MB recipe without aliases holds at most 500,000
# (`[1,1,...]`), while a 2 KB "billion laughs" of nine aliases a level stands for 9**10.
MAX_YAML_VALUES = 1_000_000
# Digits of an integer: past 308 no float holds it, and Python's int() refuses past 4300.
MAX_INT_DIGITS = 308


class YAMLRefused(yaml.MarkedYAMLError):
    """Well-formed YAML beyond a bound of ``load_yaml``; ``problem`` says which, ``problem_mark`` where."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts, while it composes, how deep each node is and how many values it stands
    for with its aliases written out, and refuses an alias used inside the node it names."""

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0
        self.values: dict[int, int] = {}  # id(node) -> values it stands for, set once the node is complete

    def compose_node(self, parent, index):
        event = self.peek_event()
        if self.depth >= MAX_YAML_DEPTH:
            problem = f"nested more than {MAX_YAML_DEPTH} levels deep; a recipe needs a few"
            raise YAMLRefused(None, None, problem, event.start_mark)
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if isinstance(event, yaml.AliasEvent):
            if id(node) not in self.values:
                problem = f"alias *{event.anchor} is used inside the node it names; an alias repeats a node given before it"
                raise YAMLRefused(None, None, problem, event.start_mark)
            return node
        children = node.value if isinstance(node, yaml.SequenceNode) else []
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        count = 1 + sum(self.values[id(child)] for child in children)
        if count > MAX_YAML_VALUES:
            problem = f"its aliases expand to more than {MAX_YAML_VALUES:,} values; a recipe holds far fewer: use fewer aliases"
            raise YAMLRefused(None, None, problem, event.start_mark)
        self.values[id(node)] = count
        return node

    def construct_yaml_int(self, node):
        body = node.value.replace("_", "").lstrip("+-")
        digits = len(body[2:] if body[:2] in ("0x", "0b") else body)
        if digits > MAX_INT_DIGITS:
            problem = f"an integer of {digits} digits; a recipe's numbers have at most {MAX_INT_DIGITS}"
            raise YAMLRefused(None, None, problem, node.start_mark)
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def load_yaml(text: str):
    """``yaml.safe_load`` within the bounds above: ``YAMLRefused`` past one, ``yaml.YAMLError`` for bad syntax.

    >>> load_yaml("seed: 7"), load_yaml("a: &x [1, 2]\\nb: *x")
    ({'seed': 7}, {'a': [1, 2], 'b': [1, 2]})
    >>> for text in ("[" * 101 + "]" * 101, "a: &a [*a]", "seed: " + "9" * 400):
    ...     try:
    ...         load_yaml(text)
    ...     except YAMLRefused as exc:
    ...         print(f"column {exc.problem_mark.column + 1}: {exc.problem}")
    column 101: nested more than 100 levels deep; a recipe needs a few
    column 8: alias *a is used inside the node it names; an alias repeats a node given before it
    column 7: an integer of 400 digits; a recipe's numbers have at most 308
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


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
                where = f"{path}.{clip(name)}" if path else clip(name)
                if name in seen:
                    first = seen[name]
                    problems.append(f"{where}: given twice (lines {first} and {key.start_mark.line + 1}); keep one")
                else:
                    seen[name] = key.start_mark.line + 1
                walk(value, where)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, f"{path}[{i}]")

    walk(yaml.compose(text, Loader=_BoundedLoader), "")
    return problems


def exists(path: Path, kind: str = "any") -> bool:
    """Whether ``path`` is there (``kind``: any, file or dir); a name no file system takes (too long) is not."""
    try:
        return {"any": path.exists, "file": path.is_file, "dir": path.is_dir}[kind]()
    except OSError:
        return False


def temporary_beside(path: Path) -> Path:
    """A fresh name for a temporary file beside ``path``: ``.NAME.PID.HEX`` (hidden, and named after its file, so
    that a leftover from a kill is known for what it is)."""
    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a kill leaves the old file or the new one.
    The file's mode is what ``open`` gives a new file (0644 under umask 022), not mkstemp's private 0600."""
    tmp = temporary_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies; O_EXCL: never another's file
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
