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
"""

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path

from grpo_ext.base import closest, resolve_path, shown
from grpo_ext.errors import RecipeError

ENTRY_POINT_GROUP = "grpo_ext.rewards"

RewardFunc = Callable[..., list[float | None]]

REGISTRY: dict[str, Callable[..., RewardFunc]] = {}


def register(name: str, *, factory: bool = False):
    """Add a built-in reward to the registry under ``name``.

    A plain reward function is registered as a factory that takes no arguments; with ``factory=True``
    the decorated function itself is the factory and its keyword arguments are the recipe's ``args``.
    """

    def decorate(fn):
        if name in REGISTRY:
            raise ValueError(f"reward {name!r} is registered twice")
        REGISTRY[name] = fn if factory else _constant_factory(fn)
        return fn

    return decorate


class _constant_factory:
    """Factory of a reward that takes no arguments; picklable, keeps the reward's docstring."""

    def __init__(self, fn: RewardFunc):
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.Signature()

    def __call__(self) -> RewardFunc:
        return self.fn


def is_reference(name: str) -> bool:
    """True for ``module:function`` and ``file.py:function`` references."""
    return ":" in name


def entry_points() -> dict[str, list[importlib.metadata.EntryPoint]]:
    """Installed packages' rewards by name; a name two packages register lists both."""
    found: dict[str, list[importlib.metadata.EntryPoint]] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if all(ep.value != seen.value for seen in found.get(ep.name, [])):
            found.setdefault(ep.name, []).append(ep)
    return found


def _package(ep: importlib.metadata.EntryPoint) -> str:
    return ep.dist.name if ep.dist else ep.value


def known_names() -> list[str]:
    return sorted(set(REGISTRY) | set(entry_points()))


def _import_reference(name: str, base_dir: Path) -> object:
    target, _, attr = name.rpartition(":")
    if not target or not attr:
        raise LookupError(f"reward reference {name!r} must look like 'module:function' or 'file.py:function'")
    if target.endswith(".py"):
        path = resolve_path(target, base_dir)
        if not path.is_file():
            raise LookupError(f"reward file {str(path)!r} does not exist; give a path relative to the recipe's folder")
        module_name = f"grpo_ext_user_rewards.{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise LookupError(f"importing reward file {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:
            raise LookupError(f"importing module {target!r} failed: {type(exc).__name__}: {exc}") from exc
    if not hasattr(module, attr):
        options = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        hint = closest(attr, options)
        more = f"; did you mean {hint!r}?" if hint else ""
        raise LookupError(f"{target!r} has no attribute {attr!r}{more}")
    return getattr(module, attr)


def find(name: str, base_dir: Path) -> tuple[Callable, bool]:
    """Look a reward up by name. Returns (object, is_factory). Raises LookupError with a one-line reason."""
    eps = entry_points().get(name, [])
    if name in REGISTRY:
        if eps:
            raise LookupError(
                f"reward {name!r} is built in, and package {_package(eps[0])} registers the same name "
                f"({eps[0].value}); rename its entry point in the {ENTRY_POINT_GROUP!r} group"
            )
        return REGISTRY[name], True
    if is_reference(name):
        return _import_reference(name, base_dir), False
    if len(eps) > 1:
        sources = " and ".join(f"{_package(ep)} ({ep.value})" for ep in eps)
        raise LookupError(f"reward {name!r} is registered by {sources}; uninstall one, or name it as module:function")
    if eps:
        try:
            return eps[0].load(), False
        except Exception as exc:
            raise LookupError(
                f"entry point {name!r} of package {_package(eps[0])} ({eps[0].value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
    hint = closest(name, known_names())
    more = f"did you mean {hint!r}?" if hint else "see `grpo-ext rewards ls` for the names"
    raise LookupError(f"unknown reward {shown(name)}; {more}")


def build(name: str, args: dict, base_dir: Path, path: str) -> RewardFunc:
    """Build the reward that ``rewards[i]`` names, or raise RecipeError naming the key path ``path``."""
    try:
        obj, is_factory = find(name, base_dir)
    except LookupError as exc:
        raise RecipeError(f"{path}.name: {exc}") from None
    if not callable(obj):
        raise RecipeError(f"{path}.name: {name!r} is a {type(obj).__name__}, not a function")
    if is_factory or args:
        try:
            inspect.signature(obj).bind(**args)
        except TypeError as exc:
            params = ", ".join(p for p in inspect.signature(obj).parameters if p != "kwargs") or "none"
            raise RecipeError(f"{path}.args: {exc} (arguments of {name!r}: {params})") from None
        except ValueError:
            pass
        try:
            fn = obj(**args)
        except Exception as exc:
            raise RecipeError(f"{path}.args: {name!r} rejected its arguments: {type(exc).__name__}: {exc}") from None
        if not callable(fn):
            raise RecipeError(f"{path}: calling {name!r} with args did not return a function")
        return _takes_trl_call(fn, name, path)
    return _takes_trl_call(obj, name, path)


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
