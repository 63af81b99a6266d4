"""A recipe's ``tools:`` and ``environment:``: each found by its name (``grpo_ext.tools``), built, and checked
for what TRL will need of it at run time, before torch loads.

    tools:
      - calculator                          # the library's (grpo-ext tools ls)
      - name: lookup                        # a library factory, called with args; paths are the recipe's
        args: {path: data/capitals.csv}
      - mytools.py:weather                  # a function of your own, file relative to the recipe
    environment: game.py:GuessingGame       # a class (or a library one: guess_number): one instance per rollout
    # environment: {name: game.py:GuessingGame, args: {high: 20}}    # its constructor's arguments
    training:
      max_tool_calling_iterations: 4        # tool calls a completion may make

Every problem is one line naming its key: an unknown tool, a tool without the type hints or docstring TRL turns
into the schema the model reads, two tools of one name, an environment without ``reset`` or a tool method, a
``reset`` that cannot take the columns of the rows TRL calls it with, constructor arguments its class does not take,
a TRL or transformers too old for tools, and a worked example (``data.examples``) calling a tool the model is not
given.

A tool and the environment are named the same way (``_named``): a name, or a mapping with ``name`` and ``args``. A
tool's factory is called with its args here, since the tool it returns is what is checked; the environment's class
is checked as it is and its args against its constructor's signature, without building it (its constructor may
start a game server): TRL builds it, with the args (``factory``), once a run starts. The checks take one class;
``environment:`` holds one.
"""

import contextlib
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_ext.core import references
from grpo_ext.core.errors import Loc, Problem, RunError, problem, where
from grpo_ext.core.files import resolve_path
from grpo_ext.core.text import shown
from grpo_ext.core.values import kind_of
from grpo_ext.data import examples
from grpo_ext.recipe.read import absolute_path
from grpo_ext.settings import compat
from grpo_ext.tools import check_environment, check_names, check_reset, check_tool, environments, library
from grpo_ext.tools.checks import tool_methods

Tool = Callable[..., Any]  # a function the model may call, as TRL takes it
PATH_ARGS = ("path", "folder")  # the library factories' file and folder arguments, relative to the recipe
ARGS: Loc = ("environment", "args")


def check(top: dict[str, Any], base_dir: Path, problems: list[Problem]) -> tuple[list[Tool], type | None]:
    """(the tools built, in order; the environment class or None) for a recipe's top level, problems appended."""
    entries = top.get("tools") or []
    env_ref = top.get("environment")
    if not entries and env_ref is None:
        return [], None
    if not isinstance(entries, list):
        problems.append(Problem(("tools",), f"a list of tool names or mappings with name and args, got {kind_of(entries)}"))
        return [], None
    for key in ("tools",) * bool(entries) + ("environment",) * (env_ref is not None):
        refused = compat.tools_problem(key)
        if refused:
            problems.append(problem(refused))
            return [], None
    if (top.get("data") or {}).get("chat") is False:
        key = "tools" if entries else "environment"
        problems.append(
            Problem((key,), "the model sees its tools through the chat template, and data.chat is false; set data.chat: auto")
        )
    built, names = [], {}
    for i, entry in enumerate(entries):
        tool = _tool(entry, ("tools", i), base_dir, problems)
        if tool is not None:
            built.append(tool)
            names[f"tools[{i}]"] = getattr(tool, "__name__", "")
    environment = None
    if env_ref is not None:
        environment = _environment(env_ref, base_dir, problems)
        if environment is not None:
            names.update({f"environment.{n}": n for n in tool_methods(environment)})
    problems.extend(map(problem, check_names(names)))
    return built, environment


def check_calls(turns: list[dict[str, Any]], tools: list[Tool], environment: type | None) -> list[Problem]:
    """Each tool call of the worked examples (``data.examples``) names a tool the model is shown: one it copied from
    an example that it may not call would be a call that fails."""
    methods = [getattr(environment, n) for n in tool_methods(environment)] if environment is not None else []
    known = {getattr(t, "__name__", ""): t for t in [*tools, *methods]}
    problems = []
    for loc, name, arguments in examples.called(turns):
        if name not in known:
            have = f"its tools are {', '.join(known)}" if known else "it has no tools: or environment:"
            what = "calls" if arguments is not None else "is a result of"
            problems.append(Problem((*loc, "name"), f"{what} {name!r}, which the recipe does not give the model ({have})"))
            continue
        params = [p.name for p in _arguments(known[name])]
        wrong = sorted(set(arguments or {}) - set(params))
        if wrong:
            problems.append(
                Problem(
                    (*loc, "arguments"),
                    f"{name} takes {', '.join(params) or 'no arguments'}, not {', '.join(wrong)}; the model copies the call "
                    "it is shown",
                )
            )
    return problems


def _named(entry: object, loc: Loc, what: str, problems: list[Problem]) -> tuple[str, dict[str, Any]] | None:
    """(name, args) of a tools[i] or environment entry, a name or a mapping with ``name`` and ``args``; None with a
    line saying ``what`` such an entry is, when it is neither."""
    if isinstance(entry, str):
        entry = {"name": entry}
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("name"), str)
        or not entry["name"].strip()
        or set(entry) - {"name", "args"}
        or not isinstance(entry.get("args") or {}, dict)
    ):
        problems.append(Problem(loc, f"{what} or a mapping with name and args, got {shown(entry)}"))
        return None
    return entry["name"], entry.get("args") or {}


def _tool(entry: object, loc: Loc, base_dir: Path, problems: list[Problem]) -> Tool | None:
    named = _named(entry, loc, "a tool is a name", problems)
    if named is None:
        return None
    name, args = named
    try:
        obj, is_factory = library.find(name, base_dir)
    except LookupError as exc:
        problems.append(Problem((*loc, "name"), str(exc)))
        return None
    if is_factory or args:
        if is_factory:
            args = _paths(args, base_dir)
        try:
            obj = obj(**args)
        except (Exception, SystemExit) as exc:
            problems.append(Problem((*loc, "args"), f"{name!r} refused them: {type(exc).__name__}: {exc}"))
            return None
    if name in library.REGISTRY:
        return obj  # the library's own pass the checks, held against transformers in tests/unit/test_tools.py
    found = check_tool(obj, where(loc))  # reads the docstring with transformers' parser: most of a validation's time
    problems.extend(map(problem, found))
    return None if found else obj


def _environment(entry: object, base_dir: Path, problems: list[Problem]) -> type | None:
    """The class ``environment:`` names, checked, with its args checked against its constructor, problems appended;
    the class even when it has some, so that the rows are held against its ``reset`` in the same round (the recipe
    is refused all the same); None when nothing is found, or what is found is not a class."""
    names = ", ".join(environments.REGISTRY)
    named = _named(entry, ("environment",), f"an environment is a class's name ({names}, file.py:Class, module:Class)", problems)
    if named is None:
        return None
    ref, args = named
    loc = ("environment", "name") if isinstance(entry, dict) else ("environment",)
    try:
        cls, _ = references.find(environments.KIND, ref, base_dir)
    except LookupError as exc:
        problems.append(Problem(loc, str(exc)))
        return None
    # the library's are checked in tests/unit/test_tool_runs.py, as the library's tools are
    found = [] if ref in environments.REGISTRY else check_environment(cls, "environment")
    if not inspect.isclass(cls):
        problems.extend(map(problem, found))
        return None
    problems.extend([*map(problem, found), *_constructor(cls, ref, args, given=isinstance(entry, dict))])
    return cls


def _constructor(cls: type, ref: str, args: dict[str, Any], given: bool) -> list[Problem]:
    """Whether TRL's ``factory()`` can build ``cls`` with ``args`` (the environment's, bound by name)."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # a class whose signature Python cannot read: TRL's first build will tell
        return []
    params = [p for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes = f"(arguments of {cls.__name__}: {', '.join(p.name for p in params) or 'none'})"
    problems = []
    if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        by_name = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
        unknown = [name for name in args if name not in by_name]
        if unknown:
            problems.append(Problem(ARGS, f"{cls.__name__} takes no {', '.join(map(str, unknown))} {takes}"))
    needed = [p.name for p in params if p.default is p.empty and p.name not in args]
    if needed:
        how = "" if given else f"; give them as environment: {{name: {ref}, args: {{...}}}}"
        problems.append(Problem(ARGS, f"{cls.__name__} needs {', '.join(needed)} {takes}{how}"))
    return problems


def factory(environment: type | None, args: dict[str, Any]) -> Callable[[], Any] | None:
    """What GRPOTrainer's ``environment_factory`` is given for the checked ``environment:``: a callable that builds
    the class with its ``args`` (TRL calls it with nothing, for each instance it needs); None without one."""
    if environment is None:
        return None
    return functools.partial(_built, environment, args)


def _built(environment: type, args: dict[str, Any]) -> Any:
    """An instance of ``environment`` built with ``args``, whose ``reset`` stops the run in one line naming it when it
    returns what TRL cannot add to a prompt (a gym-style ``(observation, info)``, a state dict): TRL appends it to the
    prompt's last message, and fails there with a bare TypeError. Only what the instance's ``reset`` attribute is
    changes: TRL finds the tools and ``get_reward`` on the class."""
    instance = environment(**args)
    reset = instance.reset

    @functools.wraps(reset)
    def checked(*positional: Any, **row: Any) -> Any:
        observation = reset(*positional, **row)
        if observation is None or isinstance(observation, (str, list)):
            return observation
        kind = type(observation).__name__
        raise RunError(
            f"environment: {environment.__name__}.reset returned {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
            f"({shown(observation, 40)}); TRL adds what reset returns to the end of the prompt: return the text "
            "the model is to read (a str), or None"
        )

    with contextlib.suppress(AttributeError, TypeError):  # an instance that refuses the attribute: TRL's error stands
        instance.reset = checked
    return instance


def check_rows(environment: type, columns: dict[str, tuple[list[str] | None, str]]) -> list[Problem]:
    """The environment's ``reset`` against each set of rows TRL calls it with (``columns``: stage -> (the columns, the
    rows described), as validation finds them; None where only loading tells, a hub dataset's)."""
    return [
        problem(found)
        for cols, rows in columns.values()
        if cols is not None
        for found in check_reset(environment, cols, rows, "environment")
    ]


def _paths(args: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """A library factory's args with its file and folder arguments (``PATH_ARGS``) taken from the recipe's folder."""
    return {k: str(resolve_path(v, base_dir)) if k in PATH_ARGS and isinstance(v, str) else v for k, v in args.items()}


def portable(entry: str | dict[str, Any], base_dir: Path, key: str = "tools") -> str | dict[str, Any]:
    """A tools[i] or environment entry with its file reference absolute, and a library factory's path arguments, as a
    run records it."""
    if isinstance(entry, str):
        return str(absolute_path([key], entry, base_dir))
    args = entry.get("args") or {}
    if entry["name"] in library.REGISTRY:  # a library factory reads them from the recipe's folder (_tool)
        args = _paths(args, base_dir)
    return {**entry, "name": absolute_path([key], entry["name"], base_dir), **({"args": args} if args else {})}


def _arguments(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """A tool's arguments as the model sees them: an environment method's without ``self``."""
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def functions_shown(tools: list[Tool], environment: type | None) -> list[Tool]:
    """Every function the model is shown: the recipe's tools, then the environment's tool methods (as functions of
    its class: transformers writes their schema without ``self``, as TRL's tool loop does for an instance's)."""
    return [*tools, *([getattr(environment, n) for n in tool_methods(environment)] if environment is not None else [])]


def describe(tools: list[Tool], environment: type | None) -> list[str]:
    """One line per tool as the model will see it: its name, arguments with their types, and first docstring line."""
    lines = []
    for fn in functions_shown(tools, environment):
        params = _arguments(fn)
        args = ", ".join(f"{p.name}: {getattr(p.annotation, '__name__', p.annotation)}" for p in params)
        doc = (inspect.getdoc(fn) or "").splitlines()
        lines.append(f"{fn.__name__}({args}): {doc[0] if doc else ''}")
    return lines
