"""What a reward is: TRL's call contract, the attributes a reward may declare, and the helpers its author writes with.

A reward is a callable with a ``__name__`` (the metric name TRL logs) that keeps TRL's contract,
``fn(completions, **kwargs) -> list[float | None]`` (``Reward``); a plain function is one. Beside the call it may
declare any of these, as attributes of the function or of its class (``Declared``), each read by one part of a run;
a reward that declares none gets the default after the colon:

- ``columns``: the dataset columns it reads, checked against the rows before a model loads: the keywords it
  requires that TRL does not pass itself.
- ``pass_threshold``: the score at which an eval sample passes it (a recipe's ``rewards[i].pass_threshold`` wins):
  ``eval.pass_threshold``.
- ``score_range``: (low, high), the range its scores stay in; the eval keeps a mean's interval inside it: none.
- ``partial_credit``: the registry name of the reward that gives partial credit on the way to this one, which the
  pre-flight names when this one gives no gradient: none.
- ``answer_of(completion)``: the completion's final answer, for the eval's majority vote (maj@n): no maj@n.
- ``preflight()``: a check before the policy loads (a judge's server answers, a reward model loads), RecipeError
  if not: no check.
- ``why_none(row, index)``: why completion ``index`` of its last call, whose row's columns are ``row``, scored
  None (``grpo-ext rewards score`` says it): "gives no reason".
- ``said(prompt, completion)``: what the model it asks (a judge) replied to a completion; completions.jsonl keeps
  it, and the pre-flight names such a reward as a judge: not a judge.

``describe`` reads them, once, into a ``RewardInfo`` with the defaults filled in: nothing else reads a reward's
attributes. The guard around each reward of a run (``guard.Guarded``) holds its ``info``, with the recipe's
``pass_threshold`` over the reward's own.

A reward is registered by name with ``registry.register``; what it is written with is here: ``completion_text`` (a
completion as text, whether plain or chat), ``prompt_text``, ``column`` (a dataset column, or an error naming the
argument that picks it), ``named`` (a function with arguments bound, under a metric name) and ``ReferenceReward``
(scores each completion against its row's reference).
"""

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from grpo_ext.settings import compat

# A reward's ``score_range`` when it scores 0 to 1, as most built-in rewards do.
UNIT = (0.0, 1.0)

RewardFunc = Callable[..., list[float | None]]


@runtime_checkable
class Reward(Protocol):
    """TRL's contract for a reward: called with the completions and every dataset column by keyword, it returns one
    score per completion, None where it judges none; ``__name__`` is the name TRL logs its mean under."""

    __name__: str

    def __call__(self, completions: list, **kwargs) -> list[float | None]: ...


class Declared(Reward, Protocol):
    """A reward with every attribute grpo_ext reads off one (the table at the top of this module); each is optional,
    and ``describe`` fills in what a reward leaves out."""

    columns: tuple[str, ...]
    pass_threshold: float
    score_range: tuple[float, float]
    partial_credit: str

    def answer_of(self, completion) -> str | None: ...

    def preflight(self) -> None: ...

    def why_none(self, row: dict, index: int = 0) -> str | None: ...

    def said(self, prompt, completion) -> str | None: ...


@dataclass(frozen=True)
class RewardInfo:
    """What a reward declares, read once by ``describe``, each attribute of ``Declared`` with its default filled in;
    ``name`` is its ``__name__`` (None for an object without one)."""

    name: str | None = None
    columns: tuple[str, ...] = ()
    pass_threshold: float | None = None
    score_range: tuple[float, float] | None = None
    partial_credit: str | None = None
    answer_of: Callable[[object], str | None] | None = None
    preflight: Callable[[], None] | None = None
    why_none: Callable[..., str | None] | None = None
    said: Callable[[object, object], str | None] | None = None


# The attributes a reward may declare: RewardInfo's fields after its name.
DECLARED = tuple(f.name for f in fields(RewardInfo))[1:]
_ABILITIES = ("answer_of", "preflight", "why_none", "said")  # the declared methods: taken when callable


def describe(fn) -> RewardInfo:
    """What ``fn`` declares (see ``Declared``), defaults filled in; a guarded reward's own ``info``; the defaults for
    None (a reward only a name stands for: an environment's ``get_reward``).

    >>> def half(completions, **kwargs):
    ...     return [0.5] * len(completions)
    >>> half.score_range = (0, 1)
    >>> info = describe(half)
    >>> info.name, info.score_range, info.pass_threshold, info.columns
    ('half', (0.0, 1.0), None, ())
    """
    if fn is None:
        return RewardInfo()
    held = getattr(fn, "info", None)
    if isinstance(held, RewardInfo):
        return held
    found = {attribute: getattr(fn, attribute, None) for attribute in DECLARED}
    return RewardInfo(
        name=fn.__name__ if isinstance(fn, Reward) and isinstance(fn.__name__, str) else None,
        columns=tuple(found["columns"]) if found["columns"] is not None else compat.required_columns(fn),
        pass_threshold=found["pass_threshold"],
        score_range=_score_range(found["score_range"]),
        partial_credit=found["partial_credit"] if isinstance(found["partial_credit"], str) else None,
        **{ability: found[ability] if callable(found[ability]) else None for ability in _ABILITIES},
    )


def _score_range(declared) -> tuple[float, float] | None:
    """A declared ``score_range`` as (low, high) floats; None where it is none, or says it in another form: anything
    but a tuple of two finite numbers, the lower first.

    >>> [_score_range(r) for r in [(0, 1), (-1.0, 0.0), (1, 0), [0, 1], (0, float("inf")), (True, 2), None]]
    [(0.0, 1.0), (-1.0, 0.0), None, None, None, None, None]
    """
    if not isinstance(declared, tuple) or len(declared) != 2:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in declared):
        return None
    return (float(declared[0]), float(declared[1])) if declared[0] < declared[1] else None


def prompt_text(prompt: str | list, roles: bool = False) -> str:
    r"""A prompt as plain text: chat messages one per line, each after its role when ``roles``.

    >>> chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    >>> prompt_text("2+2?"), prompt_text(chat), prompt_text(chat, roles=True)
    ('2+2?', 'Be brief.\n2+2?', 'system: Be brief.\nuser: 2+2?')
    """
    if not isinstance(prompt, list):
        return str(prompt)
    lines = []
    for m in prompt:
        if not isinstance(m, dict):
            lines.append(str(m))
            continue
        text = "\n".join([str(m.get("content") or ""), *map(call_text, m.get("tool_calls") or [])]).strip("\n")
        lines.append(f"{m.get('role', 'user')}: {text}" if roles else text)
    return "\n".join(lines)


def call_text(call: dict) -> str:
    """A tool call as a person reads it, in a worked example of the prompt or in a completion.

    >>> call_text({"type": "function", "function": {"name": "guess", "arguments": '{"number": 5}'}})
    '→ guess({"number": 5})'
    >>> called = {"role": "assistant", "content": "", "tool_calls": [{"name": "guess", "arguments": {"number": 5}}]}
    >>> prompt_text([called], roles=True)
    'assistant: → guess({"number": 5})'
    """
    function = call.get("function", call)
    arguments = function.get("arguments")
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"→ {function.get('name')}({shown})"


def completion_text(completion: str | list | dict) -> str:
    """The text of one completion, whether plain text or a list of chat messages.

    >>> completion_text("7")
    '7'
    >>> completion_text([{"role": "assistant", "content": " 7 "}])
    ' 7 '
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, list):
        return "".join(
            completion_text(m) for m in completion if not isinstance(m, dict) or m.get("role", "assistant") == "assistant"
        )
    return str(completion)


def column(kwargs: dict, name: str, arg: str) -> list:
    """The values of the dataset column ``name`` in a reward call, or a ValueError naming the columns that did arrive
    and the reward argument (``arg``) that chooses the column.

    >>> column({"answer": ["7"], "prompts": ["p"]}, "answer", "answer_column")
    ['7']
    """
    if name not in kwargs:
        arrived = ", ".join(k for k in kwargs if k not in ("prompts", "completion_ids", "trainer_state")) or "none"
        raise ValueError(
            f"no {name!r} column reached the reward (dataset columns: {arrived}); set args.{arg} to the column that holds them"
        )
    return kwargs[name]


class ReferenceReward:
    """A reward that scores each completion's text against its row's reference, read from the column
    ``answer_column``; a subclass gives ``score(text, reference)`` and its ``__name__``. Picklable."""

    score_range = UNIT  # a subclass scoring outside 0 to 1 says its own

    def __init__(self, answer_column: str = "answer", max_answer_chars: int = 1000):
        self.answer_column = answer_column
        self.columns = (answer_column,)  # checked against the data before any model loads
        self.max_answer_chars = max_answer_chars

    def __call__(self, completions, **kwargs) -> list[float | None]:
        golds = column(kwargs, self.answer_column, "answer_column")
        return [self.score(completion_text(c), gold) for c, gold in zip(completions, golds, strict=True)]

    def score(self, text: str, reference) -> float | None:
        raise NotImplementedError


def named(fn: Callable, name: str, **params) -> RewardFunc:
    """``fn`` with ``params`` bound, logged by TRL as ``name``; picklable when ``fn`` is a module-level function.

    >>> def longer_than(completions, n, **kwargs):
    ...     return [float(len(c) > n) for c in completions]
    >>> reward = named(longer_than, "longer_than_3", n=3)
    >>> reward.__name__, reward(["ab", "abcd"])
    ('longer_than_3', [0.0, 1.0])
    """
    bound = functools.partial(fn, **params)
    bound.__name__ = name
    bound.__doc__ = fn.__doc__
    return bound
