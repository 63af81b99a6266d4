"""Tasksets of the ``verifiers`` library (its v1 API, ``import verifiers.v1 as vf``) as a source of rows:
``data.source: verifiers`` with ``data.source_args: {taskset: "module:function", args: {...}}``.

The taskset's tasks become the training rows (each prompt with the task's system prompt before it), and its
``@vf.reward`` methods the run's rewards, each with its weight (validation adds one ``rewards:`` entry per reward,
``reward`` below, a factory referenced as ``grpo_ext.data.verifiers_tasks:reward``), and the ``@vf.tool`` methods of
its taskset-wide ``Toolset``s the model's tools, named as verifiers names them (``<server>_<tool>``; one ``tools:``
entry each, ``tool`` below), called in the training process rather than served over MCP. Eval rows are the tasks of the
factory called with ``eval_args`` (its eval split, e.g. ``{split: test}``), else the last ``held_out`` tasks.

A reward scores a completion on a ``vf.Trace`` built from the task's prompt and the completion, as verifiers'
scoring reads it (``trace.last_reply``, ``trace.messages``, ``task``). What needs more than that is refused in one
line (``check``): an ``Env`` or a harness, tasks that need a container or a runtime, judges (a hosted model),
tool servers of each task (``Task.toolsets``, set up per rollout), a taskset that never ends, and a task the user
opens. ``verifiers`` is an optional
extra, imported only when a recipe names it.
"""

import functools
import importlib.util
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_ext.core import references
from grpo_ext.core.errors import Loc, Problem, RecipeError
from grpo_ext.core.text import shown
from grpo_ext.settings.limits import MAX_ROWS

INSTALL = "pip install -e '.[verifiers]'"
REWARD = "grpo_ext.data.verifiers_tasks:reward"  # the rewards: entry validation adds for each of the taskset's rewards
TOOL = "grpo_ext.data.verifiers_tasks:tool"  # the tools: entry validation adds for each tool of the taskset's toolsets
ARGS = ("taskset", "args", "eval_args", "held_out")  # data.source_args of a verifiers source
COLUMNS = ("vf_task", "vf_split")  # each row's task: its index in its split, and the split (train or eval)
KIND = references.Kind("taskset", {}, "grpo_ext.tasksets", "its module")
AT: Loc = ("data", "source_args")


def installed() -> bool:
    """Whether the optional extra is installed (``verifiers`` importable), without importing it."""
    try:
        return importlib.util.find_spec("verifiers") is not None
    except ImportError:  # a finder that refuses it: not importable either
        return False


def absolute(args: dict, base_dir: Path) -> dict:
    """``source_args`` with a ``file.py:function`` taskset read from the recipe's folder, so that the rows and the
    rewards (built in other processes, from the recorded recipe) find the same file."""
    ref = args.get("taskset")
    if not isinstance(ref, str) or ":" not in ref:
        return args
    target, _, attr = ref.rpartition(":")
    if not target.endswith(".py") or Path(target).is_absolute():
        return args
    return {**args, "taskset": f"{(base_dir / target).resolve()}:{attr}"}


def check(args: Any) -> list[Problem]:
    """Problems with a verifiers source's ``data.source_args``: its keys, the extra installed, the taskset found and
    built with its args, and only what training can run (see the module's docstring). Loads the taskset."""
    if not installed():
        return [Problem(("data", "source"), f"names a verifiers taskset, and verifiers is not installed; {INSTALL}")]
    if not isinstance(args, dict):
        return [Problem(AT, "give {taskset: module:function, args: {...}}")]
    unknown = [k for k in args if k not in ARGS]
    if unknown:
        return [Problem((*AT, unknown[0]), f"unknown key; a verifiers source takes {', '.join(ARGS)}")]
    if not isinstance(args.get("taskset"), str) or ":" not in args["taskset"]:
        return [
            Problem(
                (*AT, "taskset"), f"give the taskset as module:function or file.py:function, got {shown(args.get('taskset'))}"
            )
        ]
    for key in ("args", "eval_args"):
        if args.get(key) is not None and not isinstance(args[key], dict):
            return [Problem((*AT, key), f"must be a mapping of the taskset's arguments, got {shown(args[key])}")]
    held = args.get("held_out", 0)
    if isinstance(held, bool) or not isinstance(held, int) or not 0 <= held <= MAX_ROWS:
        return [Problem((*AT, "held_out"), f"must be a whole number from 0 to {MAX_ROWS}, got {shown(held)}")]
    try:
        train, held_out = _tasks(*_key(args))
    except RecipeError as exc:
        return list(exc.found)
    if held and args.get("eval_args") is not None:
        return [Problem((*AT, "held_out"), "and eval_args are both given; keep one source of eval tasks")]
    if len(train) == 0:
        return [Problem((*AT, "taskset"), "yields no training tasks")]
    return []


def rows(taskset: str, args: dict | None = None, eval_args: dict | None = None, held_out: int = 0) -> tuple[list, list]:
    """(training rows, eval rows) of the taskset: each a ``prompt`` (chat messages, the task's system prompt first,
    or its text) and the columns that name its task (``COLUMNS``)."""
    train, held = _tasks(taskset, _frozen(args), _frozen(eval_args), held_out)
    return [_row(t, i, "train") for i, t in enumerate(train)], [_row(t, i, "eval") for i, t in enumerate(held)]


def rewards_of(args: dict) -> list[tuple[str, float]]:
    """(name, weight) of each of the taskset's rewards, in verifiers' order (priority, then name)."""
    train, _ = _tasks(*_key(args))
    return [(fn.__name__, float(getattr(fn, "_vf_weight", 1.0))) for fn in train[0].hooks("reward")]


def reward(taskset: str, reward: str, args: dict | None = None, eval_args: dict | None = None, held_out: int = 0) -> Callable:
    """The taskset's reward ``reward`` as a TRL reward function: each completion scored on a trace of its task's
    prompt and the completion, as verifiers' ``Task.score`` calls it."""
    train, held = _tasks(taskset, _frozen(args), _frozen(eval_args), held_out)
    names = [fn.__name__ for fn in train[0].hooks("reward")]
    if reward not in names:
        raise ValueError(f"the taskset has no reward {reward!r} (its rewards: {', '.join(names)})")

    def score(completions: list, vf_task: list[int], vf_split: list[str], **kwargs: Any) -> list[float | None]:
        return [
            _score((held if split == "eval" else train)[index], reward, completion)
            for completion, index, split in zip(completions, vf_task, vf_split, strict=True)
        ]

    score.__name__ = score.__qualname__ = reward
    score.__doc__ = f"The verifiers taskset's reward {reward!r} ({taskset})."
    return score


def tools_of(args: dict) -> list[str]:
    """The names the model calls the taskset's tools by, in order."""
    return list(_served(args["taskset"], _frozen(args.get("args") or {})))


def tool(
    taskset: str, tool: str, args: dict | None = None, eval_args: dict | None = None, held_out: int = 0
) -> Callable[..., Any]:
    """The taskset's tool ``tool`` as a plain function TRL can show and call: the ``@vf.tool`` method of its toolset,
    its docstring (with an ``Args:`` line for each argument it does not describe) and its type hints."""
    served = _served(taskset, _frozen(args or {}))
    if tool not in served:
        raise ValueError(f"the taskset has no tool {tool!r} (its tools: {', '.join(served) or 'none'})")
    return _as_function(tool, served[tool])


# --- loading ---------------------------------------------------------------------------------------------------


def _frozen(args: dict | None) -> str | None:
    return None if args is None else json.dumps(args, sort_keys=True)


def _key(args: dict) -> tuple[str, str | None, str | None, int]:
    return args["taskset"], _frozen(args.get("args") or {}), _frozen(args.get("eval_args")), args.get("held_out", 0)


@functools.lru_cache(maxsize=8)
def _tasks(ref: str, args: str | None, eval_args: str | None, held_out: int) -> tuple[list, list]:
    """(training tasks, eval tasks), each checked; loaded once a process for the same source_args."""
    factory = _factory(ref)
    train = _load(factory, ref, json.loads(args or "{}"), "args")
    if eval_args is not None:
        held = _load(factory, ref, json.loads(eval_args), "eval_args")
    elif held_out:
        if held_out >= len(train):
            raise RecipeError(Problem((*AT, "held_out"), f"holds out {held_out} of {len(train)} tasks; leave some to train on"))
        train, held = train[:-held_out], train[-held_out:]
    else:
        held = []
    return train, held


@functools.lru_cache(maxsize=8)
def _served(ref: str, args: str | None) -> dict[str, Any]:
    """Each tool of the taskset's toolsets by the name the model calls it (verifiers': ``<server>_<tool>``), its
    method bound to a toolset set up once a process."""
    from verifiers.v1.utils.decorators import discover_decorated

    factory = _factory(ref)
    taskset = _build(factory, ref, json.loads(args or "{}"), "args")
    tools: dict[str, Any] = {}
    for toolset in type(taskset).toolsets(taskset.config):
        _run(toolset.setup())
        for method in discover_decorated(toolset, "tool"):
            name = getattr(method, "tool_name", None) or method.__name__
            full = f"{toolset.server_name}_{name}" if toolset.server_name else name
            tools[full] = method
    return tools


def _as_function(name: str, method: Any) -> Callable[..., Any]:
    import typing

    hints = typing.get_type_hints(method)
    hints.setdefault("return", str)  # what a tool returns reaches the model as text
    signature = inspect.signature(method)
    doc = inspect.getdoc(method) or f"The {name} tool."
    undescribed = [p for p in signature.parameters if f"{p}:" not in doc and f"{p} (" not in doc]
    if undescribed:
        doc += ("" if "Args:" in doc else "\n\nArgs:") + "".join(f"\n    {p}: {p}" for p in undescribed)

    def call(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        return _run(result) if inspect.isawaitable(result) else result

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    call.__annotations__ = hints
    call.__signature__ = signature.replace(return_annotation=hints["return"])  # type: ignore[attr-defined]
    return call


def _factory(ref: str) -> Any:
    try:
        return references.import_reference(KIND, ref, Path.cwd())
    except LookupError as exc:
        raise RecipeError(Problem((*AT, "taskset"), str(exc))) from None


def _build(factory: Any, ref: str, args: dict, key: str) -> Any:
    """The taskset the factory (a function, or a vf.Taskset class built with its config) returns for ``args``."""
    import verifiers.v1 as vf
    from verifiers.v1.utils.generic import concrete_type

    if isinstance(factory, type) and issubclass(factory, vf.Env):
        raise RecipeError(Problem((*AT, "taskset"), _refused["env"]))
    try:
        if isinstance(factory, type) and issubclass(factory, vf.Taskset):
            config = concrete_type(factory, vf.TasksetConfig) or vf.TasksetConfig
            taskset = factory(config(**args))
        elif callable(factory):
            taskset = factory(**args)
        else:
            raise TypeError(f"{ref} is a {type(factory).__name__}, not a taskset factory")
    except (Exception, SystemExit) as exc:  # a factory refusing its arguments: its own words, on one line
        said = " ".join(str(exc).split())[:300]
        raise RecipeError(Problem((*AT, key), f"{ref} refused them: {type(exc).__name__}: {said}")) from None
    if isinstance(taskset, vf.Env):
        raise RecipeError(Problem((*AT, "taskset"), _refused["env"]))
    if not isinstance(taskset, vf.Taskset):
        raise RecipeError(Problem((*AT, "taskset"), f"{ref} returned a {type(taskset).__name__}, not a vf.Taskset"))
    return taskset


def _load(factory: Any, ref: str, args: dict, key: str) -> list:
    taskset = _build(factory, ref, args, key)
    if not taskset.bounded:
        raise RecipeError(Problem((*AT, "taskset"), _refused["infinite"]))
    tasks = []
    for task in taskset:
        tasks.append(task)
        if len(tasks) > MAX_ROWS:
            raise RecipeError(
                Problem((*AT, key), f"the taskset yields more than {MAX_ROWS} tasks; pass arguments that take fewer")
            )
    for task in tasks[:1]:  # one task type a taskset: its first task says what every one needs
        problem = _unsupported(task)
        if problem:
            raise RecipeError(Problem((*AT, "taskset"), problem))
    for task in tasks:
        if task.data.prompt is None:
            raise RecipeError(Problem((*AT, "taskset"), _refused["no_prompt"]))
    return tasks


_refused = {
    "env": "names a vf.Env, which a harness plays; name the function that returns its vf.Taskset",
    "infinite": "never ends (INFINITE); give arguments that bound it, or a factory that returns taskset.take(n)",
    "container": "its tasks need a container (NEEDS_CONTAINER); train it with verifiers' own trainer",
    "judges": "its tasks are scored by judges (task.judges), which call a hosted model; use a reward of grpo_ext's instead",
    "runtime": "reward {name} needs a runtime (a sandbox the rollout ran in), which training does not give",
    "toolsets_task": "its tasks have tool servers of their own (Task.toolsets, set up for each rollout); serve them from "
    "the taskset (Taskset.toolsets) or give the model tools with tools: instead",
    "no_rewards": "its tasks have no @vf.reward; name rewards: of grpo_ext's to score them",
    "no_prompt": "a task has no prompt (the user opens the conversation), which training cannot play",
}


def _unsupported(task: Any) -> str | None:
    """Why training cannot run the task as verifiers would, or None."""
    if task.NEEDS_CONTAINER:
        return _refused["container"]
    if task.config.judges:
        return _refused["judges"]
    if type(task).toolsets(task.config):
        return _refused["toolsets_task"]
    hooks = task.hooks("reward")
    if not hooks:
        return _refused["no_rewards"]
    for fn in hooks:
        param = inspect.signature(fn).parameters.get("runtime")
        if param is not None and param.default is inspect.Parameter.empty:
            return _refused["runtime"].format(name=fn.__name__)
    return None


# --- rows and scoring ------------------------------------------------------------------------------------------


def _messages(task: Any) -> list[dict]:
    """The task's prompt as chat messages, its system prompt first."""
    from verifiers.v1.types import content_text

    data = task.data
    out = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    if isinstance(data.prompt, str):
        return [*out, {"role": "user", "content": data.prompt}]
    return out + [{"role": m.role, "content": content_text(m.content)} for m in data.prompt]


def _row(task: Any, index: int, split: str) -> dict:
    messages = _messages(task)
    prompt: str | list[dict] = messages[0]["content"] if len(messages) == 1 and messages[0]["role"] == "user" else messages
    return {"prompt": prompt, "vf_task": index, "vf_split": split}


def _completion(completion: Any) -> list[dict]:
    """A TRL completion (text, or chat messages with the tool loop's calls and results) as chat messages."""
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    return [m for m in completion if isinstance(m, dict)]


def _trace(task: Any, completion: Any) -> Any:
    import verifiers.v1 as vf
    from pydantic import TypeAdapter
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.state import state_cls

    adapter = TypeAdapter(vf.Message)
    nodes: list[Any] = []
    for sampled, message in [(False, m) for m in _messages(task)] + [(True, m) for m in _completion(completion)]:
        fields = {k: v for k, v in message.items() if k in ("role", "content", "name", "tool_call_id")}
        if fields["role"] == "assistant" and message.get("tool_calls"):
            fields["tool_calls"] = [_call(call, i) for i, call in enumerate(message["tool_calls"])]
        if fields["role"] == "tool":
            fields.setdefault("tool_call_id", "")
        fields["content"] = fields.get("content") or ("" if fields["role"] != "assistant" else None)
        parent = len(nodes) - 1 if nodes else None
        nodes.append(
            MessageNode(message=adapter.validate_python(fields), parent=parent, sampled=sampled and fields["role"] == "assistant")
        )
    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="grpo_ext"),
        nodes=nodes,
        state=state_cls(type(task))(),
        is_completed=True,
        ok=True,
    )


def _call(call: dict, index: int) -> dict:
    function = call.get("function", call)
    arguments = function.get("arguments", {})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call.get("id") or f"call_{index}", "name": function.get("name", ""), "arguments": text}


def _score(task: Any, name: str, completion: Any) -> float:
    from verifiers.v1.utils.decorators import invoke

    fn = next(fn for fn in task.hooks("reward") if fn.__name__ == name)
    result = invoke(fn, {"task": task.data, "trace": _trace(task, completion)})
    if inspect.isawaitable(result):
        result = _run(result)
    if isinstance(result, dict):
        raise ValueError(f"reward {name} returned keyed scores ({', '.join(map(str, result))}); return one number")
    return float(result)


def _run(awaitable: Any) -> Any:
    """What a coroutine of the taskset's (a reward, a tool, a toolset's setup) comes to; asyncio is imported here, so
    that a recipe read without verifiers loads none of it."""
    import asyncio

    async def awaited() -> Any:
        return await awaitable

    return asyncio.run(awaited())
