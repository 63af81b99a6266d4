"""Reward registry: names → reward factories, plus user rewards by module path, file path or entry point.

A reward follows TRL's contract: ``fn(completions, **kwargs) -> list[float | None]``. Completions are
strings (plain-text prompts) or message lists (chat prompts); dataset columns arrive as keyword
arguments. Each registry entry is a *factory*: called with the recipe's ``args`` it returns the reward
function, whose ``__name__`` is the metric name TRL logs.

How a recipe names a reward (``rewards[i].name``):

- a registry name: ``digit_exact`` (see ``grpo-ext rewards``);
- ``package.module:function``: an importable module;
- ``path/to/file.py:function``: a file, relative to the recipe's folder;
- a name that an installed package registers in the ``grpo_ext.rewards`` entry-point group.

With ``args``, the named object is called with them to build the reward; without, it is the reward.
Validating a recipe (``resolve``) imports what a reward names and checks its arguments against the
signature, and builds only the registry's own rewards: a user's factory is called with the recipe's
``args`` when a run needs the reward (``Resolved.build``), never by ``validate``, ``--dry-run``,
``plan`` or ``merge``. Names from the standard library's process and system modules are refused.
"""

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ext.core import references
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.references import is_reference as is_reference  # the cli asks it of a reward name

ENTRY_POINT_GROUP = "grpo_ext.rewards"
# A reward's ``score_range``: the lowest and highest score it gives, which the eval keeps a mean's interval within
# (results/scoring.score_range reads it). UNIT is that of a reward scoring 0 to 1.
UNIT = (0.0, 1.0)

RewardFunc = Callable[..., list[float | None]]

REGISTRY: dict[str, Callable[..., RewardFunc]] = {}
KIND = references.Kind("reward", REGISTRY, ENTRY_POINT_GROUP, "grpo-ext rewards ls")


def register(name: str, *, factory: bool = False):
    """Add a built-in reward to the registry under ``name``.

    A plain reward function is registered as a factory that takes no arguments; with ``factory=True``
    the decorated function itself is the factory and its keyword arguments are the recipe's ``args``.
    """

    def decorate(fn):
        if name in REGISTRY:
            raise ValueError(f"reward {name!r} is registered twice")
        REGISTRY[name] = fn if factory else references.constant_factory(fn)
        return fn

    return decorate


def known_names() -> list[str]:
    return references.known_names(KIND)


def find(name: str, base_dir: Path) -> tuple[Callable, bool]:
    """Look a reward up by name. Returns (object, is_factory). Raises LookupError with a one-line reason."""
    return references.find(KIND, name, base_dir)


@dataclass(frozen=True)
class Resolved:
    """A reward as validation leaves it: ``fn`` when it is ready (a registry reward, built from its args; a user's
    function named without args), else ``factory``, the user's, with the ``args`` that ``build`` calls it with."""

    name: str
    path: str  # the recipe key, rewards[i]
    fn: RewardFunc | None = None
    factory: Callable | None = None
    args: dict = field(default_factory=dict)

    @property
    def deferred(self) -> bool:
        return self.fn is None

    def build(self) -> RewardFunc:
        """The reward function; a user's factory runs here, each time (a run asks once)."""
        return self.fn if self.fn is not None else _call_factory(self.factory, self.args, self.name, self.path)


def resolve(name: str, args: dict, base_dir: Path, path: str) -> Resolved:
    """Find the reward that ``rewards[i]`` names and check its ``args`` against the signature; RecipeError naming
    the key path ``path``. Only a registry factory is called here; a user's factory waits for ``Resolved.build``."""
    try:
        obj, is_factory = find(name, base_dir)
    except LookupError as exc:
        raise RecipeError(f"{path}.name: {exc}") from None
    if not callable(obj):
        raise RecipeError(f"{path}.name: {name!r} is a {type(obj).__name__}, not a function")
    if not (is_factory or args):
        return Resolved(name, path, fn=_takes_trl_call(obj, name, path))
    try:
        inspect.signature(obj).bind(**args)
    except TypeError as exc:
        params = ", ".join(p for p in inspect.signature(obj).parameters if p != "kwargs") or "none"
        raise RecipeError(f"{path}.args: {exc} (arguments of {name!r}: {params})") from None
    except ValueError:
        pass
    if is_factory:
        return Resolved(name, path, fn=_call_factory(obj, args, name, path))
    return Resolved(name, path, factory=obj, args=args)


def build(name: str, args: dict, base_dir: Path, path: str) -> RewardFunc:
    """Build the reward that ``rewards[i]`` names, user factory included, or raise RecipeError naming ``path``."""
    return resolve(name, args, base_dir, path).build()


def _call_factory(factory: Callable, args: dict, name: str, path: str) -> RewardFunc:
    try:
        fn = factory(**args)
    except (Exception, SystemExit) as exc:  # a factory that exits is refusing its arguments too
        raise RecipeError(f"{path}.args: {name!r} rejected its arguments: {type(exc).__name__}: {exc}") from None
    if not callable(fn):
        raise RecipeError(f"{path}: calling {name!r} with args did not return a function")
    return _takes_trl_call(fn, name, path)


def _takes_trl_call(fn: RewardFunc, name: str, path: str) -> RewardFunc:
    """TRL calls a reward with keywords, ``completions=`` among them: refuse a function that cannot take that call."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn
    if "completions" not in {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}:
        shown = ", ".join(p.name for p in params) or "nothing"
        raise RecipeError(
            f"{path}.name: {name!r} takes ({shown}); a reward takes completions (plural) and any dataset "
            f"columns by name, e.g. def {getattr(fn, '__name__', 'reward')}(completions, **kwargs)"
        )
    return fn


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
