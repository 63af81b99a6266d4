"""Words for messages: one bounded preview of a value, "did you mean" hints, plurals, numbers and lists."""

import builtins
import difflib
import itertools
import math
import re
import reprlib
from collections.abc import Collection, Sequence


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

    def repr_str(self, x: str, level: int) -> str:
        return builtins.repr(x[: self.maxstring])

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 4 * self.maxlong:  # more digits than are shown; str() refuses past 4300 digits anyway
            return f"<an integer of about {math.floor(x.bit_length() * math.log10(2)) + 1} digits>"
        return builtins.repr(x)

    def repr_dict(self, x: dict[object, object], level: int) -> str:
        if x and level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items + ["..."] * (len(x) > self.maxdict)) + "}"


def shown(value: object, limit: int = 60) -> str:
    """A value as an error line shows it: its repr, cut to ``limit`` characters; only what is shown is built.

    >>> shown("x" * 100, 10), shown(10**5000), shown({"a": [[[[1]]]], "b": 2})
    ("'xxxxxxxx…", '<an integer of about 5001 digits>', "{'a': [[[...]]], 'b': 2}")
    """
    preview = _Preview()
    preview.maxlevel = 3
    preview.maxstring = preview.maxlong = preview.maxother = limit
    return clip(preview.repr(value), limit)


def listing(names: Sequence[object], most: int = 10, width: int = 30) -> str:
    """Names (a file's columns) as a message lists them: the first ``most``, each cut to ``width`` by ``clip``.

    >>> listing(["prompt", "answer"]), listing([]), listing([f"c{i}" for i in range(12)], most=3)
    ('prompt, answer', 'none', 'c0, c1, c2 and 9 more')
    """
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return (", ".join(clip(str(name), width) for name in names[:most]) or "none") + more


def closest(name: str, options: Collection[object]) -> str | None:
    """The option that ``name`` most likely misspells, or None."""
    hint = difflib.get_close_matches(str(name), [str(o) for o in options], n=1, cutoff=0.6)
    return hint[0] if hint else None


def suggest(name: str, options: Collection[object], otherwise: str | None = None) -> str:
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


def fmt(value: float | None, digits: int = 3) -> str:
    """A score for a table or a progress line: ``0.125``, or ``-`` when there is none (nothing was judged)."""
    return "-" if value is None else f"{value:.{digits}f}"


def plural(n: int, word: str) -> str:
    """``1 prompt``, ``2 prompts``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def first_line(doc: str | None) -> str:
    """The first non-empty line of a docstring or message, stripped."""
    lines = (doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""


def connection_cause(exc: Exception, timed_out: str = "no answer: timed out") -> str:
    """The part of a connection error a person reads: ``[Errno 111] Connection refused``, else ``timed_out`` for a
    request that got no answer (httpx says "timed out"; requests names the pool, the URL and the request id), else
    the error's first line."""
    text = str(exc)
    errno = re.search(r"\[Errno -?\d+\] [^'\")\]]+", text)
    if errno:
        return errno.group(0).strip()
    if "timed out" in text.lower() or "timeout" in type(exc).__name__.lower():
        return timed_out
    return first_line(text)[:160] or type(exc).__name__
