"""Reward registry: names → reward factories, plus user rewards by module path, file path or entry point.

A reward follows TRL's contract: ``fn(completions, **kwargs) -> list[float | None]``. Completions are
strings (plain-text prompts) or message lists (chat prompts); dataset columns arrive as keyword
arguments. What a reward is, what it may declare beside the call and the helpers it is written with are in
``api.py``; this module holds the names. Each registry entry is a *factory*: called with the recipe's ``args`` it
returns the reward function, whose ``__name__`` is the metric name TRL logs.

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

import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ext.core import references
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.references import is_reference as is_reference  # the cli asks it of a reward name
from grpo_ext.rewards.api import RewardFunc, describe

ENTRY_POINT_GROUP = "grpo_ext.rewards"

# Each built-in reward's name and the module of this folder that registers it. A name is known from this table, and
# its module is imported when the name is first looked up: a recipe's validation imports the rewards it names, not
# every built-in and what each imports (the sandbox, math-verify's workers, a judge's client), which took a third
# of a refused recipe's `grpo-ext validate`. tests/unit/test_rewards_registry.py checks the table against what
# each module registers.
BUILTINS: dict[str, str] = {
    "answer_match": "answers",
    "code_tests": "code",
    "digit_exact": "digit",
    "digit_shaped": "digit",
    "think_answer_format": "formats",
    "regex_match": "formats",
    "tag_count": "formats",
    "llm_judge": "judge",
    "math_accuracy": "maths",
    "math_closeness": "maths",
    "reward_model": "reward_model",
    "overlong_penalty": "shaping",
    "repetition_penalty": "shaping",
    "cosine_accuracy": "shaping",
    "tool_success": "tool_use",
}


class Registry(Mapping):
    """The built-in rewards by name (``BUILTINS``): ``in``, ``len`` and iteration read the table; looking a name up
    imports its module, whose ``@register`` adds the factory (``registered``), and returns the factory."""

    def __init__(self, builtins: dict[str, str]):
        self.builtins = builtins
        self.registered: dict[str, Callable[..., RewardFunc]] = {}

    def __getitem__(self, name: str) -> Callable[..., RewardFunc]:
        if name in self.builtins and name not in self.registered:
            importlib.import_module(f"{__package__}.{self.builtins[name]}")
        return self.registered[name]

    def __contains__(self, name: object) -> bool:
        return name in self.builtins

    def __iter__(self) -> Iterator[str]:
        return iter(self.builtins)

    def __len__(self) -> int:
        return len(self.builtins)


REGISTRY = Registry(BUILTINS)
KIND = references.Kind("reward", REGISTRY, ENTRY_POINT_GROUP, "grpo-ext rewards ls")
# Arguments that build a registry factory's reward where it has required ones (the docs' reward table builds each
# reward to read what it declares); a factory without them builds from its defaults.
EXAMPLES: dict[str, dict] = {}


def register(name: str, *, factory: bool = False, example: dict | None = None):
    """Add a built-in reward to the registry under ``name``, a name of ``BUILTINS``.

    A plain reward function is registered as a factory that takes no arguments; with ``factory=True``
    the decorated function itself is the factory and its keyword arguments are the recipe's ``args``;
    ``example``: arguments for those it requires, with which it builds a reward to describe (``EXAMPLES``).
    """

    def decorate(fn):
        if name not in BUILTINS:
            raise ValueError(f"reward {name!r} is not in registry.BUILTINS; add it there with its module")
        if name in REGISTRY.registered:
            raise ValueError(f"reward {name!r} is registered twice")
        REGISTRY.registered[name] = fn if factory else references.constant_factory(fn)
        if example is not None:
            EXAMPLES[name] = example
        return fn

    return decorate


def sample(name: str) -> RewardFunc:
    """The registry's reward ``name`` built from its defaults and its ``EXAMPLES`` arguments, to be described.

    >>> sample("overlong_penalty")(["x" * 300])
    [-1.0]
    """
    factory = REGISTRY[name]  # imports its module, which adds its EXAMPLES entry
    return factory(**EXAMPLES.get(name, {}))


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
            f"columns by name, e.g. def {describe(fn).name or 'reward'}(completions, **kwargs)"
        )
    return fn
