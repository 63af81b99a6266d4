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
import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import resolve_path
from grpo_ext.core.text import closest, shown

ENTRY_POINT_GROUP = "grpo_ext.rewards"

RewardFunc = Callable[..., list[float | None]]

# Standard-library modules whose functions run programs, load or run code, or change files and the interpreter
# (os:system, subprocess:run, shutil:rmtree, builtins:exec, runpy:run_path, ...): never a reward, so a recipe that
# names one is refused before anything is imported or called. A reward file of your own may still use them.
SYSTEM_MODULES = frozenset(
    "_io _posixsubprocess _thread builtins code codeop concurrent ctypes importlib io marshal multiprocessing nt os "
    "pdb pickle posix pty runpy shelve shutil signal socket subprocess sys threading".split()
)

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


def refuse_system(name: str, module: str | None) -> None:
    """LookupError when ``module`` (dotted) is one of SYSTEM_MODULES or inside one; ``name`` is what the recipe wrote."""
    top = (module or "").partition(".")[0]
    if top in SYSTEM_MODULES:
        raise LookupError(
            f"{shown(name)} comes from {top}, a standard-library module that runs programs or changes the system, "
            f"not a reward; name a function of your own (file.py:function) or a registry reward (grpo-ext rewards ls)"
        )


def _import_reference(name: str, base_dir: Path) -> object:
    target, _, attr = name.rpartition(":")
    if not target or not attr:
        raise LookupError(f"reward reference {name!r} must look like 'module:function' or 'file.py:function'")
    if not target.endswith(".py"):
        refuse_system(name, target)  # before the import: naming such a module runs nothing
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
    obj = getattr(module, attr)
    refuse_system(name, getattr(obj, "__module__", None))  # a module's own alias of one (mod:system for os.system)
    return obj


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
        refuse_system(name, eps[0].module)
        try:
            obj = eps[0].load()
        except Exception as exc:
            raise LookupError(
                f"entry point {name!r} of package {_package(eps[0])} ({eps[0].value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        refuse_system(name, getattr(obj, "__module__", None))
        return obj, False
    hint = closest(name, known_names())
    more = f"did you mean {hint!r}?" if hint else "see `grpo-ext rewards ls` for the names"
    raise LookupError(f"unknown reward {shown(name)}; {more}")


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
        else:
            lines.append(f"{m.get('role', 'user')}: {m.get('content', '')}" if roles else str(m.get("content", "")))
    return "\n".join(lines)


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
