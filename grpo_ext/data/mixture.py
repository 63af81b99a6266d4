"""A mixture of training sources (``data.mixture``): what each source is called, how many training rows each gives,
which rows those are, and the line that says so. Plain Python; ``run.data`` loads the rows.

Each source is a ``data:`` section of its own (a file, a generator, a hub dataset or inline prompts, with its
columns, template, system prompt and eval rows) plus ``weight`` or ``rows``:

- ``rows: N`` takes N training rows of that source;
- ``weight: w`` shares the rest in proportion to the weights: ``data.size`` rows in all when it is given, else
  the largest mixture in those proportions that repeats no row (the source that runs out first decides).

A source's rows are drawn by the recipe's seed and the source's name, without replacement while it has rows
enough; past its size every row is taken and the rest drawn again, and a note says so. The drawn rows of all
sources are then shuffled together by the seed. Every row carries a ``source`` column naming its source.

Eval rows are each source's own (a source may have none) and, with ``eval_prompts`` or ``eval_file`` beside the
mixture, one held-out set for the whole mixture, scored with them; its rows name their set in the ``source``
column (``eval_prompts``, or the eval file's name).
"""

import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_ext.core.errors import Loc, Problem, RecipeError
from grpo_ext.core.text import plural, shown

COLUMN = "source"  # the column naming each row's source, in training and in the eval
# what a mixture's source has beside the keys of a data: section (environment: the column naming each row's
# environment, with several environments)
OWN_KEYS = ("weight", "rows", "name", "environment")
WHOLE = ("mixture", "size", "chat")  # keys of the whole mixture, never of one source
SHARED_KEYS = (*WHOLE, "system_prompt", "examples")  # what a data: section keeps beside its mixture (a source may have its own)
HELD_KEYS = ("eval_prompts", "eval_file", "eval_size")  # beside a mixture: a held-out set for the whole mixture


def label(name: str | None, file: str | None, source: str | None, hub: str | None) -> str:
    """A source's name: its ``name``, else its file's name, its generator, its hub id, or ``prompts``.

    >>> label(None, "sets/a.jsonl", None, None), label(None, None, None, "org/ds"), label(None, None, None, None)
    ('a.jsonl', 'org/ds', 'prompts')
    """
    if name:
        return name
    if file:
        return Path(file).name
    return source or hub or "prompts"


def held(eval_prompts: list | None, eval_file: str | None) -> tuple[str, str] | None:
    """The held-out set of the whole mixture, given by the data: section's ``eval_prompts`` or ``eval_file``, as (the
    ``source`` its rows carry, the key that names it); None without.

    >>> held(["2+2?"], None), held(None, "sets/held.jsonl"), held(None, None)
    (('eval_prompts', 'data.eval_prompts'), ('held.jsonl', 'data.eval_file held.jsonl'), None)
    """
    if eval_prompts is not None:
        return "eval_prompts", "data.eval_prompts"
    if eval_file:
        name = Path(eval_file).name
        return name, f"data.eval_file {name}"
    return None


def has_own_eval(entry: dict) -> bool:
    """Whether a source names eval rows of its own: ``eval_prompts``, ``eval_file``, ``eval_split``, rows held out of
    its training rows (``eval_fraction``, ``eval_size``), or a generator's held-out problems (``source``)."""
    own = ("eval_prompts", "eval_file", "eval_split", "eval_fraction", "eval_size", "source")
    return any(entry.get(key) is not None for key in own)


def config(data_cfg: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    """The data: section of one source (``entry``, a mapping of its keys), as a recipe of that source alone would have
    it: the mixture's ``chat``, and its ``system_prompt`` and ``examples`` unless the source has its own."""
    own = {key: value for key, value in entry.items() if key not in OWN_KEYS}
    shared = {"chat": data_cfg.get("chat", "auto"), "mixture": None, "size": None}
    heads = {key: entry.get(key) or data_cfg.get(key) for key in ("system_prompt", "examples")}
    return {**own, **shared, **heads}


def within(problem: Problem, i: int) -> Problem:
    """A problem found in one source, checked as a data: section of its own, moved to the source's key path.

    >>> str(within(Problem(("data", "file"), "a.csv, line 3: 2 fields"), 1))
    'data.mixture[1].file: a.csv, line 3: 2 fields'
    """
    return problem.moved(("data",), ("data", "mixture", i))


def check(entries: list[dict], size: int | None) -> list[Problem]:
    """Problems with the mixture's own keys: weight or rows on each source, positive weights, distinct names, and
    a ``size`` that leaves rows for the weighted sources. A key that failed its own check is absent and skipped."""
    problems = []
    names: dict[str, int] = {}
    for i, entry in enumerate(entries):
        where: Loc = ("data", "mixture", i)
        if "weight" not in entry or "rows" not in entry:
            continue
        weight, rows = entry["weight"], entry["rows"]
        if weight is not None and rows is not None:
            problems.append(Problem(where, "gives weight and rows; keep weight (a share of the mixture) or rows (a count)"))
        elif weight is None and rows is None:
            problems.append(Problem(where, "give weight (a share of the mixture, e.g. weight: 1) or rows (a number of rows)"))
        elif weight is not None and not (math.isfinite(weight) and weight > 0):
            problems.append(
                Problem((*where, "weight"), f"must be a positive number, got {shown(weight)}; leave a source out to drop it")
            )
        name = label(entry.get("name"), entry.get("file"), entry.get("source"), entry.get("hub"))
        if name in names:
            problems.append(
                Problem(where, f"has the name {name!r}, as data.mixture[{names[name]}] has; give each source its own name: key")
            )
        names.setdefault(name, i)
    if size is None or problems or any("weight" not in e or "rows" not in e for e in entries):
        return problems
    fixed = sum(e["rows"] for e in entries if e["rows"] is not None)
    if all(e["weight"] is None for e in entries):
        problems.append(
            Problem(("data", "size"), f"every source gives rows ({fixed} in all); leave size out, or give a source a weight")
        )
    elif size <= fixed:
        problems.append(
            Problem(("data", "size"), f"{size} leaves no rows for the weighted sources after the rows: of the others ({fixed})")
        )
    return problems


def apportion(total: int, weights: list) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder: the parts add up to ``total``, each within
    one of its exact share; ties go to the earlier weight).

    >>> apportion(200, [0.4, 0.3, 0.3]), apportion(10, [1, 1, 1]), apportion(0, [2, 1])
    ([80, 60, 60], [4, 3, 3], [0, 0])
    """
    from fractions import Fraction  # here, not at the top: with decimal it cost every command's start 1.5 ms

    exact = [Fraction(str(w)) for w in weights]
    whole = sum(exact)
    shares = [total * w / whole for w in exact]
    parts = [math.floor(s) for s in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: (-(shares[i] - parts[i]), i))
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def plan(weights: list[float | None], rows: list[int | None], available: list[int | None], size: int | None) -> list[int | None]:
    """Training rows to take of each source, by its ``weight`` or ``rows`` (one of them is None): its ``rows``, or
    its weight's share of ``size`` less the fixed rows, or, without ``size``, of the largest mixture that repeats no
    row. None where that depends on a source whose rows are not counted yet (a hub dataset before it is fetched).

    >>> plan([2, 1], [None, None], [100, 30], None)
    [60, 30]
    >>> plan([1, None], [None, 5], [100, 3], 25)
    [20, 5]
    """
    counts: list[int | None] = list(rows)
    weighted = [i for i, n in enumerate(rows) if n is None]
    if not weighted:
        return counts
    from fractions import Fraction

    shares = [Fraction(str(weights[i])) for i in weighted]
    have = [available[i] for i in weighted]
    counted = [n for n in have if n is not None]
    if size is not None:
        total = size - sum(c for c in counts if c is not None)
    elif len(counted) < len(have):
        return counts
    else:  # a share never passes its source's rows: the floor keeps each exact share within them, so does rounding up
        total = min(math.floor(n * sum(shares) / w) for n, w in zip(counted, shares, strict=True))
    for i, part in zip(weighted, apportion(total, shares), strict=True):
        counts[i] = part
    return counts


def shortfalls(
    names: list[str], weights: list[float | None], rows: list[int | None], counts: list[int | None], available: list[int | None]
) -> list[str]:
    """One line for each source asked for more rows than it has, and one for a weighted source whose share is none."""
    notes = []
    for name, weight, fixed, count, have in zip(names, weights, rows, counts, available, strict=True):
        if count is None or have is None:
            continue
        asked = f"rows: {fixed}" if fixed is not None else f"weight {weight:g}"
        if count > have:
            notes.append(
                f"data: mixture: {name}: {asked} asks for {plural(count, 'row')}, it has {have}; every row is used and "
                f"{count - have} drawn again (repeated)"
            )
        elif count == 0:
            notes.append(f"data: mixture: {name}: {asked} gives it no training rows; raise its weight or data.size")
    return notes


def _take(rng: random.Random, have: int, count: int) -> list[int]:
    """``count`` row numbers out of ``have``: without replacement, and past ``have`` one whole pass after another."""
    picked: list[int] = []
    while len(picked) < count:
        picked += rng.sample(range(have), min(have, count - len(picked)))
    return picked


def draw(names: list[str], counts: list[int], available: list[int], seed: int) -> list[tuple[int, int]]:
    """(source, row) for each training row of the mixture, shuffled together. Each source draws with its own
    random stream, from the seed and its name, so that changing another source (or the order) leaves its rows be.

    >>> draw(["a", "b"], [2, 1], [5, 3], seed=0) == draw(["a", "b"], [2, 1], [5, 3], seed=0)
    True
    >>> sorted(source for source, _ in draw(["a", "b"], [2, 1], [5, 3], seed=0))
    [0, 0, 1]
    """
    picks = []
    for i, (name, count, have) in enumerate(zip(names, counts, available, strict=True)):
        rng = random.Random(f"{seed}/{name}")  # a str seeds the same stream on every run (it is hashed with sha512)
        picks += [(i, row) for row in _take(rng, have, count)]
    random.Random(seed).shuffle(picks)
    return picks


def describe(
    names: list[str],
    counts: list[int | None],
    evals: list[int | None] | None,
    weights: list | None = None,
    whole: tuple[str, int] | None = None,
) -> str:
    r"""``mixture of 3 sources: a.jsonl 40% (80 rows), ...; eval 12 rows (4 per source)``. ``evals`` is None without
    an eval, else each source's eval rows (0: none of its own); a count is None where only loading tells (a hub
    dataset's), and the source is shown by its weight. ``whole``: (the key that names the whole mixture's held-out
    set, its rows).

    >>> describe(["a.jsonl", "arith"], [80, 20], [4, 4])
    'mixture of 2 sources: a.jsonl 80% (80 rows), arith 20% (20 rows); eval 8 rows (4 per source)'
    >>> print(*describe(["a.jsonl", "org/ds"], [None, None], [4, None], [1, 3]).split("; "), sep="\n")
    mixture of 2 sources: a.jsonl weight 1, org/ds weight 3 (rows counted when the hub rows are fetched)
    eval 4 a.jsonl, org/ds counted when fetched
    >>> describe(["a.jsonl", "b.csv"], [10, 10], [0, 0], whole=("data.eval_file held.jsonl", 12)).split("; ")[1]
    'eval 12 rows from data.eval_file held.jsonl (for the whole mixture)'
    >>> describe(["a.jsonl", "b.csv"], [10, 10], [2, 0], whole=("data.eval_prompts", 3)).split("; ")[1]
    'eval 5 rows (3 from data.eval_prompts for the whole mixture, 2 a.jsonl, 0 b.csv)'
    """
    total = sum(c for c in counts if c is not None)
    parts = []
    for i, (name, count) in enumerate(zip(names, counts, strict=True)):
        if count is None:
            parts.append(f"{name} weight {(weights or [])[i]:g}" if weights else name)
        else:
            parts.append(f"{name} {round(100 * count / total) if total else 0}% ({plural(count, 'row')})")
    line = f"mixture of {plural(len(names), 'source')}: {', '.join(parts)}"
    if None in counts:
        line += " (rows counted when the hub rows are fetched)"
    if evals is None or (whole is None and not any(n != 0 for n in evals)):
        return f"{line}; no eval"
    if whole is not None and not any(n != 0 for n in evals):
        return f"{line}; eval {plural(whole[1], 'row')} from {whole[0]} (for the whole mixture)"
    if whole is None and None not in evals and len(set(evals)) == 1:
        return f"{line}; eval {plural(sum(n or 0 for n in evals), 'row')} ({evals[0]} per source)"
    each = [f"{name} counted when fetched" if n is None else f"{n} {name}" for name, n in zip(names, evals, strict=True)]
    if whole is not None:
        each.insert(0, f"{whole[1]} from {whole[0]} for the whole mixture")
    if None in evals:
        return f"{line}; eval {', '.join(each)}"
    return f"{line}; eval {plural(sum(n or 0 for n in evals) + (whole[1] if whole else 0), 'row')} ({', '.join(each)})"


def one_kind(rows: list[dict]) -> list[str]:
    """Give each column but the prompt one kind of value across a mixture's sources, in place: numbers become text
    where another source holds text in that column (datasets reads a CSV's numbers as numbers, a JSONL file may
    hold the same answers as strings), said in a note; RecipeError for any other two kinds."""
    kinds: dict[str, dict[str, str]] = {}  # column -> {kind of its values -> the first source holding that kind}
    for r in rows:
        for key, value in r.items():
            if key != "prompt" and value is not None:
                kinds.setdefault(key, {}).setdefault(_kind(value) or "", r[COLUMN])  # a value's kind: never None
    notes = []
    for key, found in kinds.items():
        if set(found) == {"numbers", "text"}:
            for r in rows:
                if _kind(r.get(key)) == "numbers":
                    r[key] = str(int(r[key])) if float(r[key]).is_integer() else str(r[key])
            notes.append(
                f"data: mixture: column {key!r} holds numbers in {found['numbers']} and text in {found['text']}; "
                "the numbers are read as text"
            )
        elif len(found) > 1:
            (a, first), (b, second) = list(found.items())[:2]
            raise RecipeError(
                Problem(
                    ("data", "mixture"),
                    f"column {key!r} holds {a} in {first} and {b} in {second}; give it one kind in every source, or rename "
                    "it in one",
                )
            )
    return notes


def _kind(value) -> str | None:
    """A value's kind as a column of a table holds it; None for a missing value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "numbers"
    names: dict[type, str] = {str: "text", list: "lists", dict: "mappings"}
    return names.get(type(value), type(value).__name__)


def by_source(sources: list[str], result: dict) -> dict[str, dict[str, float | None]]:
    """Each source's pass rate per reward, from an eval's per-prompt scores (``sources``: each eval row's source).

    >>> result = {"rewards": {"r": {"pass_threshold": 1.0, "per_prompt": [[1.0, 0.0], [1.0, 1.0], [0.0]]}}}
    >>> by_source(["a", "a", "b"], result)
    {'a': {'r': 0.75}, 'b': {'r': 0.0}}
    """
    out: dict[str, dict[str, float | None]] = {}
    for name in dict.fromkeys(sources):
        for reward, stats in result["rewards"].items():
            scores = [s for src, row in zip(sources, stats["per_prompt"], strict=True) if src == name for s in row]
            passed = sum(s >= stats["pass_threshold"] for s in scores)
            out.setdefault(name, {})[reward] = round(passed / len(scores), 4) if scores else None
    return out
