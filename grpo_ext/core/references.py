"""What a recipe names by a string: a registry entry, ``module:function``, ``path/to/file.py:function`` (relative
to the recipe's folder) or a name an installed package registers as an entry point. Rewards and tools are named
the same ways; each kind has its own registry, entry-point group and word in messages (``Kind``).

Names from the standard library's process and system modules are refused before anything is imported
(``SYSTEM_MODULES``): ``os:system`` is never a reward or a tool. A file of your own may still use them.
"""

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from grpo_ext.core.files import resolve_path
from grpo_ext.core.text import closest, shown

# Standard-library modules whose functions run programs, load or run code, or change files and the interpreter
# (os:system, subprocess:run, shutil:rmtree, builtins:exec, runpy:run_path, ...).
SYSTEM_MODULES = frozenset(
    "_io _posixsubprocess _thread builtins code codeop concurrent ctypes importlib io marshal multiprocessing nt os "
    "pdb pickle posix pty runpy shelve shutil signal socket subprocess sys threading".split()
)


@dataclass(frozen=True)
class Kind:
    """A kind of named thing: its word in messages, its registry (name -> factory), its entry-point group and the
    command that lists its names."""

    word: str  # "reward", "tool"
    registry: dict[str, Any]
    group: str  # entry-point group, "grpo_ext.rewards"
    listing: str  # "grpo-ext rewards ls"


class constant_factory:
    """Factory of a registry entry that takes no arguments; picklable, keeps the entry's docstring."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.Signature()

    def __call__(self) -> Callable[..., Any]:
        return self.fn


def is_reference(name: str) -> bool:
    """True for ``module:function`` and ``file.py:function`` references."""
    return ":" in name


def _may_register(group: str) -> bool:
    """Whether an installed package may register entry points in ``group``. False only where importlib.metadata would
    find none: every place it looks is a folder on sys.path, and no ``entry_points.txt`` of a ``*.dist-info`` or
    ``*.egg-info`` folder there names the group; a zip, an egg or a finder with packages of its own is left to it."""
    if any(hasattr(finder, "find_distributions") and finder is not PathFinder for finder in sys.meta_path):
        return True
    for entry in sys.path:
        if not os.path.isdir(entry or "."):
            if os.path.exists(entry):
                return True  # a zip file
            continue
        if entry.lower().endswith(".egg") or _folder_may_register(entry or ".", group):
            return True
    return False


# A folder's answer for a group, by (folder, group): (the folder's mtime when it was read, the answer). Installing or
# removing a package adds or removes its *.dist-info folder, which moves the folder's mtime; until then a lookup
# reads one stat, not every entry_points.txt of site-packages (3.5 ms there, for each reward a recipe names).
_SCANNED: dict[tuple[str, str], tuple[int, bool]] = {}


def _folder_may_register(folder: str, group: str) -> bool:
    """Whether an ``entry_points.txt`` of a ``*.dist-info`` or ``*.egg-info`` folder in ``folder`` names ``group``
    (or may: a folder it cannot read, a file it cannot decode, left to importlib.metadata)."""
    key = (os.path.abspath(folder), group)
    try:
        mtime = os.stat(folder).st_mtime_ns
        if key in _SCANNED and _SCANNED[key][0] == mtime:
            return _SCANNED[key][1]
        children = list(os.scandir(folder))
    except OSError:  # a folder it may not read: left to importlib.metadata
        return True
    found = False
    for child in children:
        if not child.name.lower().endswith((".dist-info", ".egg-info")):
            continue
        try:
            with open(os.path.join(child.path, "entry_points.txt"), "rb") as f:
                found = f"[{group}]" in f.read().decode("utf-8")
        except OSError:  # no entry points, or not a folder
            continue
        except UnicodeDecodeError:  # left to importlib.metadata, which says what is wrong with it
            found = True
        if found:
            break
    _SCANNED[key] = (mtime, found)
    return found


def entry_points(kind: Kind) -> dict[str, list[Any]]:
    """Installed packages' entries of this kind by name (``importlib.metadata.EntryPoint``s); a name two packages
    register lists both."""
    # importlib.metadata is imported only when a package may register one: importing it and reading every
    # package's entry points took longer than the rest of validating a recipe, which looks its rewards up here
    if not _may_register(kind.group):
        return {}
    import importlib.metadata

    found: dict[str, list[Any]] = {}
    for ep in importlib.metadata.entry_points(group=kind.group):
        if all(ep.value != seen.value for seen in found.get(ep.name, [])):
            found.setdefault(ep.name, []).append(ep)
    return found


def _package(ep: Any) -> str:
    return str(ep.dist.name if ep.dist else ep.value)


def known_names(kind: Kind) -> list[str]:
    return sorted(set(kind.registry) | set(entry_points(kind)))


def refuse_system(kind: Kind, name: str, module: str | None) -> None:
    """LookupError when ``module`` (dotted) is one of SYSTEM_MODULES or inside one; ``name`` is what the recipe wrote."""
    top = (module or "").partition(".")[0]
    if top in SYSTEM_MODULES:
        raise LookupError(
            f"{shown(name)} comes from {top}, a standard-library module that runs programs or changes the system, "
            f"not a {kind.word}; name a function of your own (file.py:function) or a registry {kind.word} ({kind.listing})"
        )


def import_reference(kind: Kind, name: str, base_dir: Path) -> object:
    """The object ``module:function`` or ``file.py:function`` names; LookupError with a one-line reason."""
    target, _, attr = name.rpartition(":")
    if not target or not attr:
        raise LookupError(f"{kind.word} reference {name!r} must look like 'module:function' or 'file.py:function'")
    if not target.endswith(".py"):
        refuse_system(kind, name, target)  # before the import: naming such a module runs nothing
    if target.endswith(".py"):
        path = resolve_path(target, base_dir)
        if not path.is_file():
            raise LookupError(f"{kind.word} file {str(path)!r} does not exist; give a path relative to the recipe's folder")
        module_name = f"grpo_ext_user_{kind.word}s.{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None  # a .py file's, which the source loader reads
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # a sys.exit at its top level would end the command as a success
            raise LookupError(f"importing {kind.word} file {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(target)
        except (Exception, SystemExit) as exc:
            beside = resolve_path(target.replace(".", "/") + ".py", base_dir)
            hint = (
                f"; {beside.name} is a file beside the recipe: name it {target.replace('.', '/')}.py:{attr}"
                if isinstance(exc, ModuleNotFoundError) and beside.is_file()
                else ""
            )
            raise LookupError(f"importing module {target!r} failed: {type(exc).__name__}: {exc}{hint}") from exc
    if not hasattr(module, attr):
        options = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        near = closest(attr, options)
        more = f"; did you mean {near!r}?" if near else ""
        raise LookupError(f"{target!r} has no attribute {attr!r}{more}")
    obj = getattr(module, attr)
    refuse_system(kind, name, getattr(obj, "__module__", None))  # a module's own alias of one (mod:system for os.system)
    return obj


def find(kind: Kind, name: str, base_dir: Path) -> tuple[Any, bool]:
    """Look a name up: the registry, a reference, then the entry points. Returns (object, is_registry_factory);
    raises LookupError with a one-line reason."""
    eps = entry_points(kind).get(name, [])
    if name in kind.registry:
        if eps:
            raise LookupError(
                f"{kind.word} {name!r} is built in, and package {_package(eps[0])} registers the same name "
                f"({eps[0].value}); rename its entry point in the {kind.group!r} group"
            )
        return kind.registry[name], True
    if is_reference(name):
        return import_reference(kind, name, base_dir), False
    if len(eps) > 1:
        sources = " and ".join(f"{_package(ep)} ({ep.value})" for ep in eps)
        raise LookupError(f"{kind.word} {name!r} is registered by {sources}; uninstall one, or name it as module:function")
    if eps:
        refuse_system(kind, name, eps[0].module)
        try:
            obj = eps[0].load()
        except (Exception, SystemExit) as exc:
            raise LookupError(
                f"entry point {name!r} of package {_package(eps[0])} ({eps[0].value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        refuse_system(kind, name, getattr(obj, "__module__", None))
        return obj, False
    hint = closest(name, known_names(kind))
    more = f"did you mean {hint!r}?" if hint else f"see `{kind.listing}` for the names"
    raise LookupError(f"unknown {kind.word} {shown(name)}; {more}")
