"""Built-in generators of prompts with answers (``data.source``), plain Python.

A generator returns (training rows, eval rows). ``arith``'s rows have a ``prompt`` and an ``answer`` column
(GSM8K style: working, then ``#### n``), so ``math_accuracy`` scores it as it scores GSM8K; ``guess``'s rows are games
of the ``guess_number`` environment, with the ``secret`` it reads.
"""

import inspect
import random
from collections.abc import Callable
from pathlib import Path

from grpo_ext.core.errors import Problem, RecipeError
from grpo_ext.core.text import shown, suggest
from grpo_ext.data import verifiers_tasks
from grpo_ext.settings.limits import MAX_ROWS

NAMES = ["Ava", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kim", "Leo", "Mia", "Noor", "Omar", "Pia"]
THINGS = ["apples", "marbles", "stickers", "books", "coins", "pencils", "shells", "cards", "cookies", "stamps"]


def _problem(rng: random.Random, max_operand: int) -> tuple[str, str]:
    """One word problem and its GSM8K-style answer: one step of addition or subtraction."""
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(2, max_operand), rng.randint(1, max_operand)
    if rng.random() < 0.5:
        question = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
        return question, f"{name} has {a} + {b} = {a + b} {thing}.\n#### {a + b}"
    a, b = max(a, b) + 1, min(a, b)
    question = f"{name} has {a} {thing} and gives away {b}. How many {thing} are left?"
    return question, f"{name} has {a} - {b} = {a - b} {thing} left.\n#### {a - b}"


def arith(train: int = 256, held_out: int = 32, max_operand: int = 20, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Arithmetic word problems with GSM8K-style answers; eval problems never appear in training.

    >>> train_rows, eval_rows = arith(train=2, held_out=1, seed=0)
    >>> sorted(train_rows[0]), train_rows[0]["answer"].splitlines()[-1].startswith("#### ")
    (['answer', 'prompt'], True)
    """
    rng = random.Random(seed)
    seen: dict[str, str] = {}
    attempts = 0
    while len(seen) < train + held_out:
        question, answer = _problem(rng, max_operand)
        seen.setdefault(question, answer)
        attempts += 1
        if attempts > 50 * (train + held_out):
            raise ValueError(
                f"max_operand={max_operand} allows too few distinct problems for {train + held_out}; raise max_operand"
            )
    rows = [{"prompt": q, "answer": a} for q, a in seen.items()]
    return rows[:train], rows[train:]


def guess(train: int = 128, held_out: int = 32, low: int = 1, high: int = 9, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Games of the library's ``guess_number`` environment: a prompt stating the range, and the ``secret`` (with
    ``low`` and ``high``) that the environment's ``reset`` reads; secrets drawn uniformly by ``seed``. The held-out
    games share the prompt and draw their own secrets: what is learnt is the game, not a number.

    >>> train_rows, eval_rows = guess(train=2, held_out=1, seed=0)
    >>> sorted(train_rows[0]), train_rows[0]["secret"]
    (['high', 'low', 'prompt', 'secret'], 7)
    """
    if not low < high:
        raise ValueError(f"low={low} must be below high={high}")
    rng = random.Random(seed)
    prompt = (
        f"I am thinking of a whole number from {low} to {high}. Find it: call guess with a number, and I will say "
        "higher, lower or right."
    )
    rows = [{"prompt": prompt, "secret": rng.randint(low, high), "low": low, "high": high} for _ in range(train + held_out)]
    return rows[:train], rows[train:]


# verifiers: a taskset of the verifiers library (data/verifiers_tasks.py), checked by its own rules
GENERATORS: dict[str, Callable[..., tuple[list[dict], list[dict]]]] = {
    "arith": arith,
    "guess": guess,
    "verifiers": verifiers_tasks.rows,
}
COUNTS = ("train", "held_out")  # the generators' arguments that count rows: whole numbers from 0 to MAX_ROWS


def check_source(name: str, args: dict) -> list[Problem]:
    """Problems with ``data.source`` and ``data.source_args``, without generating anything."""
    if name not in GENERATORS:
        # a path is the likeliest slip: "source" reads as "where my rows are"
        looks_like_file = isinstance(name, str) and ("/" in name or Path(name).suffix != "")
        hint = f"; for a file of your own write file: {name} in place of source" if looks_like_file else suggest(name, GENERATORS)
        return [Problem(("data", "source"), f"unknown generator {shown(name)}{hint}")]
    if name == "verifiers":
        return verifiers_tasks.check(args)
    try:
        inspect.signature(GENERATORS[name]).bind(**args)
    except TypeError as exc:
        params = ", ".join(inspect.signature(GENERATORS[name]).parameters)
        return [Problem(("data", "source_args"), f"{exc} (arguments of {name!r}: {params})")]
    return [
        Problem(("data", "source_args", key), f"must be a whole number from 0 to {MAX_ROWS}, got {shown(args[key])}")
        for key in COUNTS
        if key in args and (isinstance(args[key], bool) or not isinstance(args[key], int) or not 0 <= args[key] <= MAX_ROWS)
    ]


def generated(source: str, args: dict) -> tuple[list[dict], list[dict]]:
    """(training rows, held-out rows) of the generator ``source`` (``data.source``) called with ``args``
    (``data.source_args``, checked by ``check_source``)."""
    try:
        return GENERATORS[source](**args)
    except ValueError as exc:
        raise RecipeError(Problem(("data", "source_args"), str(exc))) from None
