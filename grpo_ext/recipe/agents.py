"""A recipe's ``tools:`` and ``environment:``: each found by its name (``grpo_ext.tools``), built, and checked
for what TRL will need of it at run time, before torch loads.

    tools:
      - calculator                          # the library's (grpo-ext tools ls)
      - name: lookup                        # a library factory, called with args; paths are the recipe's
        args: {path: data/capitals.csv}
      - mytools.py:weather                  # a function of your own, file relative to the recipe
    environment: game.py:GuessingGame       # a class (or a library one: guess_number): one instance per rollout
    # environment: {name: game.py:GuessingGame, args: {high: 20}}    # its constructor's arguments
    # environment: {games: guess_number, words: game.py:Words}        # several, by name: each row's environment column
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
start a game server): TRL builds it, with the args (``factory``), once a run starts.

``environment:`` may also map names to environments, each in either form (TRL 1.8's ``environment_factory`` as a
dict): each row then names its own in its ``environment`` column (``ROUTE``), TRL shows that row only its
environment's tools, and calls its ``reset`` without that column. A mapping is told from one environment by its
``name`` key, which one environment written as a mapping has and a mapping of several may not use as a name. Each
environment is checked as one is, at ``environment.NAME``; ``check_routes`` holds the rows' column against the names.
"""

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from grpo_ext import tools as toolbox  # its modules load on first use (its __init__): a recipe without tools never does
from grpo_ext.core import references
from grpo_ext.core.errors import Loc, Problem, RunError, problem, where
from grpo_ext.core.files import resolve_path
from grpo_ext.core.text import shown
from grpo_ext.core.values import kind_of
from grpo_ext.data import examples
from grpo_ext.recipe.read import absolute_path
from grpo_ext.settings import compat

Tool = Callable[..., Any]  # a function the model may call, as TRL takes it
PATH_ARGS = ("path", "folder")  # the library factories' file and folder arguments, relative to the recipe
ENVIRONMENT: Loc = ("environment",)
ROUTE = "environment"  # the column naming each row's environment, when environment: maps names to several (TRL's own)


def several(entry: object) -> TypeGuard[dict[Any, Any]]:
    """Whether ``environment:`` maps names to environments, rather than naming one (a mapping with ``name``).

    >>> several({"games": "guess_number"}), several({"name": "guess_number"}), several("guess_number"), several({})
    (True, False, False, True)
    """
    return isinstance(entry, dict) and "name" not in entry


def check(top: dict[str, Any], base_dir: Path, problems: list[Problem]) -> tuple[list[Tool], type | None, dict[str, type]]:
    """(the tools built, in order; the environment class or None; the classes of several environments by name, or
    empty) for a recipe's top level, problems appended."""
    entries = top.get("tools") or []
    env_ref = top.get("environment")
    if not entries and env_ref is None:
        return [], None, {}
    if not isinstance(entries, list):
        problems.append(Problem(("tools",), f"a list of tool names or mappings with name and args, got {kind_of(entries)}"))
        return [], None, {}
    for key in ("tools",) * bool(entries) + ("environments" if several(env_ref) else "environment",) * (env_ref is not None):
        refused = compat.tools_problem(key)
        if refused:
            problems.append(problem(refused))
            return [], None, {}
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
    environment, classes = None, {}
    if several(env_ref):
        classes = _environments(env_ref, base_dir, problems)
    elif env_ref is not None:
        environment = _environment(env_ref, ENVIRONMENT, base_dir, problems)
    # a row is shown the tools and its own environment's methods: a name used twice there reaches one of them
    shown_to = {f"{where(ENVIRONMENT)}.{name}.": cls for name, cls in classes.items()}
    shown_to |= {f"{where(ENVIRONMENT)}.": environment} if environment is not None else {}
    lines = toolbox.check_names(names)
    for prefix, cls in shown_to.items():
        lines += toolbox.check_names({**names, **{f"{prefix}{n}": n for n in toolbox.tool_methods(cls)}})
    problems.extend(map(problem, dict.fromkeys(lines)))
    return built, environment, classes


def _environments(entries: dict[Any, Any], base_dir: Path, problems: list[Problem]) -> dict[str, type]:
    """The classes of ``environment:``'s mapping by name, each checked as one environment is at ``environment.NAME``;
    those found, even with problems (so that the rows are held against them in the same round)."""
    if not entries:
        problems.append(
            Problem(
                ENVIRONMENT,
                "is an empty mapping; name one environment, or several by name (each row's environment column picks "
                "one), e.g. {games: guess_number, words: game.py:Words}",
            )
        )
        return {}
    found = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name.strip():
            problems.append(Problem(ENVIRONMENT, f"names each environment with a word, as rows name it; got {shown(name)}"))
            continue
        cls = _environment(entry, (*ENVIRONMENT, name), base_dir, problems)
        if cls is not None:
            found[name] = cls
    return found


def check_calls(turns: list[dict[str, Any]], tools: list[Tool], environments: list[type]) -> list[Problem]:
    """Each tool call of the worked examples (``data.examples``) names a tool the model is shown: one it copied from
    an example that it may not call would be a call that fails. With several environments, a tool of any of them."""
    known = {getattr(t, "__name__", ""): t for t in functions_shown(tools, environments)}
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
        obj, is_factory = toolbox.find(name, base_dir)
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
    if name in toolbox.REGISTRY:
        return obj  # the library's own pass the checks, held against transformers in tests/unit/test_tools.py
    found = toolbox.check_tool(obj, where(loc))  # reads the docstring with transformers' parser: most of a validation's time
    problems.extend(map(problem, found))
    return None if found else obj


def _environment(entry: object, at: Loc, base_dir: Path, problems: list[Problem]) -> type | None:
    """The class an environment entry (``environment:``, or one of its mapping at ``at``) names, checked, with its
    args checked against its constructor, problems appended; the class even when it has some, so that the rows are
    held against its ``reset`` in the same round (the recipe is refused all the same); None when nothing is found,
    or what is found is not a class."""
    names = ", ".join(toolbox.environments.REGISTRY)
    named = _named(entry, at, f"an environment is a class's name ({names}, file.py:Class, module:Class)", problems)
    if named is None:
        return None
    ref, args = named
    loc = (*at, "name") if isinstance(entry, dict) else at
    try:
        cls, _ = references.find(toolbox.environments.KIND, ref, base_dir)
    except LookupError as exc:
        problems.append(Problem(loc, str(exc)))
        return None
    # the library's are checked in tests/unit/test_tool_runs.py, as the library's tools are
    found = [] if ref in toolbox.environments.REGISTRY else toolbox.check_environment(cls, where(at))
    if not inspect.isclass(cls):
        problems.extend(map(problem, found))
        return None
    problems.extend([*map(problem, found), *_constructor(cls, ref, args, at, given=isinstance(entry, dict))])
    return cls


def _constructor(cls: type, ref: str, args: dict[str, Any], at: Loc, given: bool) -> list[Problem]:
    """Whether TRL's ``factory()`` can build ``cls`` with ``args`` (the environment's at ``at``, bound by name)."""
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
            problems.append(Problem((*at, "args"), f"{cls.__name__} takes no {', '.join(map(str, unknown))} {takes}"))
    needed = [p.name for p in params if p.default is p.empty and p.name not in args]
    if needed:
        how = "" if given else f"; give them as {where(at)}: {{name: {ref}, args: {{...}}}}"
        problems.append(Problem((*at, "args"), f"{cls.__name__} needs {', '.join(needed)} {takes}{how}"))
    return problems


def factory(environment: type | None, args: dict[str, Any]) -> Callable[[], Any] | None:
    """What GRPOTrainer's ``environment_factory`` is given for the checked ``environment:`` (or for each of several,
    by name): a callable that builds the class with its ``args`` (TRL calls it with nothing, for each instance it
    needs); None without one."""
    return None if environment is None else builder(environment, args)


def builder(environment: type, args: dict[str, Any]) -> Callable[[], Any]:
    """A callable that builds ``environment`` with ``args``, as TRL calls a factory (with nothing)."""
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


def check_rows(environment: type, columns: dict[str, tuple[list[str] | None, str]], at: Loc = ENVIRONMENT) -> list[Problem]:
    """The environment's ``reset`` (at ``at``) against each set of rows TRL calls it with (``columns``: stage -> (the
    columns, the rows described), as validation finds them; None where only loading tells, a hub dataset's). One of
    several environments (``at`` below ``environment``) is called without the ``environment`` column that chose it."""
    routed = len(at) > len(ENVIRONMENT)
    return [
        problem(found)
        for cols, rows in columns.values()
        if cols is not None
        for found in toolbox.check_reset(environment, [c for c in cols if not (routed and c == ROUTE)], rows, where(at))
    ]


def check_routes(
    names: list[str], rows: Iterable[tuple[str, Mapping[str, Any]]], described: str, fix: str = ""
) -> Problem | None:
    """One line for the rows whose ``environment`` column names none of ``names`` (a recipe's several environments),
    or which lack it: the first such row (``rows``: (where it is, the row)), the names it may take, and how many
    more rows are so; None when every row names one. TRL refuses such a row only once its batch is drawn. ``fix``:
    another way to name them, said after the column.

    >>> rows = [("line 1", {"environment": "games"}), ("line 2", {"environment": "chess"}), ("line 3", {})]
    >>> check_routes(["games", "words"], rows, "the rows").message  # doctest: +NORMALIZE_WHITESPACE
    "line 2 of the rows names 'chess', not one of the environments (games, words); set each row's environment
     column to one of them (1 more row names none of them)"
    """
    first, more = None, 0
    for at, row in rows:
        if isinstance(row.get(ROUTE), str) and row[ROUTE] in names:
            continue
        if first is None:
            first = (at, row)
        else:
            more += 1
    if first is None:
        return None
    at, row = first
    said = f"names {shown(row[ROUTE])}, not one of" if ROUTE in row else "has no environment column, which names one of"
    so = f" ({more} more row{'' if more == 1 else 's'} name{'s' if more == 1 else ''} none of them)" if more else ""
    return Problem(
        ENVIRONMENT,
        f"{at} of {described} {said} the environments ({', '.join(names)}); set each row's environment column to one "
        f"of them{fix}{so}",
    )


def _paths(args: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """A library factory's args with its file and folder arguments (``PATH_ARGS``) taken from the recipe's folder."""
    return {k: str(resolve_path(v, base_dir)) if k in PATH_ARGS and isinstance(v, str) else v for k, v in args.items()}


def portable(entry: str | dict[str, Any], base_dir: Path, key: str = "tools") -> str | dict[str, Any]:
    """A tools[i] or environment entry with its file reference absolute, and a library factory's path arguments, as a
    run records it."""
    if isinstance(entry, str):
        return str(absolute_path([key], entry, base_dir))
    args = entry.get("args") or {}
    if entry["name"] in toolbox.REGISTRY:  # a library factory reads them from the recipe's folder (_tool)
        args = _paths(args, base_dir)
    return {**entry, "name": absolute_path([key], entry["name"], base_dir), **({"args": args} if args else {})}


def _arguments(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """A tool's arguments as the model sees them: an environment method's without ``self``."""
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def functions_shown(tools: list[Tool], environments: list[type]) -> list[Tool]:
    """Every function the model is shown: the recipe's tools, then each environment's tool methods (as functions of
    its class: transformers writes their schema without ``self``, as TRL's tool loop does for an instance's). With
    several environments a row is shown its own environment's alone: this is every row's, the most a prompt holds."""
    return [*tools, *(getattr(cls, n) for cls in environments for n in toolbox.tool_methods(cls))]


def describe(tools: list[Tool], environments: list[type]) -> list[str]:
    """One line per tool as the model will see it: its name, arguments with their types, and first docstring line."""
    lines = []
    for fn in functions_shown(tools, environments):
        params = _arguments(fn)
        args = ", ".join(f"{p.name}: {getattr(p.annotation, '__name__', p.annotation)}" for p in params)
        doc = (inspect.getdoc(fn) or "").splitlines()
        lines.append(f"{fn.__name__}({args}): {doc[0] if doc else ''}")
    return lines
