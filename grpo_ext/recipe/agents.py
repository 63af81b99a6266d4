"""A recipe's ``tools:`` and ``environment:``: each found by its name (``grpo_ext.tools``), built, and checked
for what TRL will need of it at run time, before torch loads.

    tools:
      - calculator                          # the library's (grpo-ext tools ls)
      - name: lookup                        # a library factory, called with args; paths are the recipe's
        args: {path: data/capitals.csv}
      - mytools.py:weather                  # a function of your own, file relative to the recipe
    environment: game.py:GuessingGame       # a class (or a library one: guess_number): one instance per rollout
    training:
      max_tool_calling_iterations: 4        # tool calls a completion may make

Every problem is one line naming its key: an unknown tool, a tool without the type hints or docstring TRL turns
into the schema the model reads, two tools of one name, an environment without ``reset`` or a tool method, a TRL
or transformers too old for tools, and a worked example (``data.examples``) calling a tool the model is not given.
"""

import inspect
from pathlib import Path

from grpo_ext.core import references
from grpo_ext.core.files import resolve_path
from grpo_ext.core.text import shown
from grpo_ext.core.values import kind_of
from grpo_ext.recipe.read import absolute_path
from grpo_ext.settings import compat, examples
from grpo_ext.tools import check_environment, check_names, check_tool, environments, library
from grpo_ext.tools.checks import tool_methods

PATH_ARGS = ("path", "folder")  # the library factories' file and folder arguments, relative to the recipe


def check(top: dict, base_dir: Path, problems: list[str]) -> tuple[list, object | None]:
    """(the tools built, in order; the environment class or None) for a recipe's top level, problems appended."""
    entries = top.get("tools") or []
    env_ref = top.get("environment")
    if not entries and env_ref is None:
        return [], None
    if not isinstance(entries, list):
        problems.append(f"tools: a list of tool names or mappings with name and args, got {kind_of(entries)}")
        return [], None
    for key in ("tools",) * bool(entries) + ("environment",) * (env_ref is not None):
        problem = compat.tools_problem(key)
        if problem:
            problems.append(problem)
            return [], None
    if (top.get("data") or {}).get("chat") is False:
        key = "tools" if entries else "environment"
        problems.append(f"{key}: the model sees its tools through the chat template, and data.chat is false; set data.chat: auto")
    built, names = [], {}
    for i, entry in enumerate(entries):
        tool = _tool(entry, f"tools[{i}]", base_dir, problems)
        if tool is not None:
            built.append(tool)
            names[f"tools[{i}]"] = getattr(tool, "__name__", "")
    environment = None
    if env_ref is not None:
        environment = _environment(env_ref, base_dir, problems)
        if environment is not None:
            names.update({f"environment.{n}": n for n in tool_methods(environment)})
    problems.extend(check_names(names))
    return built, environment


def check_calls(turns: list[dict], tools: list, environment) -> list[str]:
    """Each tool call of the worked examples (``data.examples``) names a tool the model is shown: one it copied from
    an example that it may not call would be a call that fails."""
    methods = [getattr(environment, n) for n in tool_methods(environment)] if environment is not None else []
    known = {getattr(t, "__name__", ""): t for t in [*tools, *methods]}
    problems = []
    for where, name, arguments in examples.called(turns):
        if name not in known:
            have = f"its tools are {', '.join(known)}" if known else "it has no tools: or environment:"
            what = "calls" if arguments is not None else "is a result of"
            problems.append(f"{where}.name: {what} {name!r}, which the recipe does not give the model ({have})")
            continue
        params = [p.name for p in _arguments(known[name])]
        wrong = sorted(set(arguments or {}) - set(params))
        if wrong:
            problems.append(
                f"{where}.arguments: {name} takes {', '.join(params) or 'no arguments'}, not {', '.join(wrong)}; "
                "the model copies the call it is shown"
            )
    return problems


def _tool(entry, where: str, base_dir: Path, problems: list[str]):
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or set(entry) - {"name", "args"}:
        problems.append(f"{where}: a tool is a name or a mapping with name and args, got {shown(entry)}")
        return None
    name, args = entry["name"], entry.get("args") or {}
    try:
        obj, is_factory = library.find(name, base_dir)
    except LookupError as exc:
        problems.append(f"{where}.name: {exc}")
        return None
    if is_factory or args:
        if is_factory:
            args = _paths(args, base_dir)
        try:
            obj = obj(**args)
        except (Exception, SystemExit) as exc:
            problems.append(f"{where}.args: {name!r} refused them: {type(exc).__name__}: {exc}")
            return None
    if name in library.REGISTRY:
        return obj  # the library's own pass the checks, held against transformers in tests/unit/test_tools.py
    found = check_tool(obj, where)  # reads the docstring with transformers' parser: most of a validation's time
    problems.extend(found)
    return None if found else obj


def _environment(ref, base_dir: Path, problems: list[str]):
    if not isinstance(ref, str) or not ref.strip():
        names = ", ".join(environments.REGISTRY)
        problems.append(f"environment: name a class: a library one ({names}), file.py:Class or module:Class, got {shown(ref)}")
        return None
    try:
        cls, _ = references.find(environments.KIND, ref, base_dir)
    except LookupError as exc:
        problems.append(f"environment: {exc}")
        return None
    if ref in environments.REGISTRY:
        return cls  # as the library's tools: checked in tests/unit/test_tool_runs.py
    found = check_environment(cls, "environment")
    problems.extend(found)
    return None if found else cls


def _paths(args: dict, base_dir: Path) -> dict:
    """A library factory's args with its file and folder arguments (``PATH_ARGS``) taken from the recipe's folder."""
    return {k: str(resolve_path(v, base_dir)) if k in PATH_ARGS and isinstance(v, str) else v for k, v in args.items()}


def portable(entry, base_dir: Path):
    """A tools[i] entry with its file reference and its path arguments absolute, as a run records it."""
    if isinstance(entry, str):
        return absolute_path(["tools"], entry, base_dir)
    args = _paths(entry.get("args") or {}, base_dir)
    return {**entry, "name": absolute_path(["tools"], entry["name"], base_dir), **({"args": args} if args else {})}


def _arguments(fn) -> list[inspect.Parameter]:
    """A tool's arguments as the model sees them: an environment method's without ``self``."""
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def functions_shown(tools: list, environment) -> list:
    """Every function the model is shown: the recipe's tools, then the environment's tool methods (as functions of
    its class: transformers writes their schema without ``self``, as TRL's tool loop does for an instance's)."""
    return [*tools, *([getattr(environment, n) for n in tool_methods(environment)] if environment is not None else [])]


def describe(tools: list, environment) -> list[str]:
    """One line per tool as the model will see it: its name, arguments with their types, and first docstring line."""
    lines = []
    for fn in functions_shown(tools, environment):
        params = _arguments(fn)
        args = ", ".join(f"{p.name}: {getattr(p.annotation, '__name__', p.annotation)}" for p in params)
        doc = (inspect.getdoc(fn) or "").splitlines()
        lines.append(f"{fn.__name__}({args}): {doc[0] if doc else ''}")
    return lines
