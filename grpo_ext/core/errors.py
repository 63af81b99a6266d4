"""Errors a user can fix: each carries one line per problem, naming where it is and what to do.

A problem is found at a key path of the recipe (``Problem.loc``: ``("data", "mixture", 1, "file")``) and says what is
wrong there; ``str(problem)`` is its line, ``data.mixture[1].file: ...``, written here and nowhere else. A check that
looks at one part of a recipe (a mixture's source, checked as a data: section of its own) reports at that part's path,
and the caller moves the problems to where the part sits (``Problem.moved``).
"""

from collections.abc import Iterable
from dataclasses import dataclass

Loc = tuple[str | int, ...]


def where(loc: Loc) -> str:
    """A key path as a line shows it: keys joined by dots, list places in brackets.

    >>> where(("data", "mixture", 1, "file")), where(("rewards", 0)), where(())
    ('data.mixture[1].file', 'rewards[0]', '')
    """
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


@dataclass(frozen=True)
class Problem:
    """What is wrong at one key path. A problem that names no key (a whole-file problem, or a line that names its
    key in its own words) has the empty path, and its line is the message alone."""

    loc: Loc
    message: str

    def __str__(self) -> str:
        return f"{where(self.loc)}: {self.message}" if self.loc else self.message

    def moved(self, old: Loc, new: Loc) -> "Problem":
        """The problem with the head ``old`` of its path replaced by ``new``; one elsewhere is left as it is.

        >>> str(Problem(("data", "file"), "a.csv, line 3: 2 fields").moved(("data",), ("data", "mixture", 1)))
        'data.mixture[1].file: a.csv, line 3: 2 fields'
        """
        if self.loc[: len(old)] != old:
            return self
        return Problem((*new, *self.loc[len(old) :]), self.message)


def problem(item: "Problem | str") -> Problem:
    """A problem; a line given as text is a problem at no key path."""
    return item if isinstance(item, Problem) else Problem((), item)


class RecipeError(Exception):
    """Bad input (recipe, override or command line). The CLI prints each problem as one line and exits 2."""

    def __init__(self, problems: "Iterable[Problem | str] | Problem | str", source: str | None = None):
        items = [problems] if isinstance(problems, (str, Problem)) else list(problems)
        self.found: list[Problem] = [problem(p) for p in items]
        self.source = source
        super().__init__("\n".join(self.lines()))

    @property
    def problems(self) -> list[str]:
        """Each problem's line, without the recipe's path."""
        return [str(p) for p in self.found]

    def lines(self) -> list[str]:
        prefix = f"{self.source}: " if self.source else ""
        return [f"error: {prefix}{p}" for p in self.found]


class RunError(Exception):
    """A failure while running (model load, training, reward crash). The CLI prints one line and exits 1."""


class ElsewhereError(RunError):
    """A multi-process run stopped because another of its processes failed and printed its own ``error:`` line: the
    CLI says so in a plain line and exits 1, so that the user reads the error once."""
