"""Whether TRL can use a tool or an environment: every problem at once, each one line naming where it is and the fix.

TRL (GRPOTrainer, 1.x) hands its tools to the chat template, where transformers' ``get_json_schema`` turns each
into the schema the model reads, and runs a call as ``tool(**arguments)`` with what the model wrote. That fails, at
the first prompt of a run, on a tool that is not a function or a method, an argument without a type hint or without
a line in the docstring's ``Args:``, a type hint JSON schema cannot state, ``(choices: ...)`` that are not JSON, or
no docstring; and a call cannot reach ``*args``, ``**kwargs`` or a positional-only argument. These checks find all
of them before a run starts.

They read signatures, type hints and docstrings with ``schema.py``, which writes the schema as transformers does
with the standard library alone: a recipe is validated without importing transformers (most of a second) or torch
(which transformers imports to map ``torch.Tensor`` hints).
"""

import inspect
import typing

from grpo_ext.core.text import listing, shown
from grpo_ext.tools.schema import SchemaProblem, choices, hint_schema, read_docstring

# TRL calls these on an environment itself; every other public method is a tool
_ENVIRONMENT_OWN = ("reset", "get_reward")


def check_tool(fn: object, where: str) -> list[str]:
    """Every reason TRL would fail on ``fn`` as a tool, one line each, starting with ``where`` (``tools[0]``).

    >>> def shout(text: str) -> str:
    ...     '''Say it louder.
    ...
    ...     Args:
    ...         text: What to say.
    ...     '''
    ...     return text.upper()
    >>> check_tool(shout, "tools[0]")
    []
    >>> check_tool(lambda text: text, "tools[1]")
    ['tools[1]: a lambda has no name the model can call; write it as a def with a docstring']
    """
    return _problems(fn, where, receiver=False)


def _problems(fn: object, where: str, receiver: bool) -> list[str]:
    """``check_tool``; with ``receiver``, ``fn`` is a function on a class and its first argument the instance."""
    if not callable(fn):
        return [f"{where}: {shown(fn)} is not a function but {_a(fn)}; name a function (def)"]
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        return [
            f"{where}: {shown(fn)} is {_a(fn)}; transformers shows the model only functions and methods "
            "as tools (not functools.partial, nor an object with __call__), so wrap it in a def"
        ]
    name = fn.__name__
    if name == "<lambda>":
        return [f"{where}: a lambda has no name the model can call; write it as a def with a docstring"]
    problems = []
    doc = inspect.getdoc(fn)
    if not doc:
        problems.append(f"{where}: {name} has no docstring; write what it does, then Args: with a line for each argument")
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # a hint naming what its module does not define, or not a type at all
        return [*problems, f"{where}: the type hints of {name} do not resolve ({type(exc).__name__}: {exc}); fix them"]
    params = list(inspect.signature(fn).parameters.values())[1 if receiver else 0 :]
    documented = read_docstring(doc).args if doc else None
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            stars = "*" if p.kind is p.VAR_POSITIONAL else "**"
            problems.append(f"{where}: {name} takes {stars}{p.name}, which a tool call cannot fill; name each argument")
            continue
        if p.kind is p.POSITIONAL_ONLY:
            problems.append(f"{where}: argument {p.name!r} of {name} is positional-only; TRL passes arguments by name")
        if p.name not in hints:
            problems.append(
                f"{where}: argument {p.name!r} of {name} has no type hint; write {p.name}: str (or int, float, bool, ...)"
            )
        elif not _describable(hints[p.name]):
            problems.append(
                f"{where}: argument {p.name!r} of {name} is typed {_hint_text(hints[p.name])}, which JSON schema cannot "
                "state; use str, int, float, bool, list, dict, a Literal, an Enum or a union of those"
            )
        if documented is not None and p.name not in documented:
            problems.append(f"{where}: argument {p.name!r} of {name} has no line in its docstring's Args:; add '{p.name}: ...'")
        elif documented is not None:
            try:
                choices(documented[p.name], p.name)
            except SchemaProblem as exc:
                problems.append(f"{where}: argument {p.name!r} of {name}: {exc}")
    if "return" not in hints:
        problems.append(f"{where}: {name} has no return type hint; write -> str (the model reads the result as text)")
    return problems


def _a(value: object) -> str:
    """``an int``, ``a functools.partial``: what a value is, for a message."""
    kind = (
        type(value).__qualname__
        if type(value).__module__ == "builtins"
        else f"{type(value).__module__}.{type(value).__qualname__}"
    )
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _describable(hint: object) -> bool:
    """Whether transformers can write ``hint`` as JSON schema."""
    try:
        hint_schema(hint)
    except SchemaProblem:
        return False
    return True


def _hint_text(hint: object) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def check_environment(cls: object, where: str) -> list[str]:
    """Every reason TRL would fail on ``cls`` as an ``environment_factory``: a class with a plain ``reset`` (TRL calls it
    without awaiting) and at least one tool method, each checked as a tool without its ``self``; tool methods and
    ``get_reward`` may be async (TRL awaits them). The columns reset is given are ``check_reset``'s.

    >>> class Counter:
    ...     def reset(self, **kwargs):
    ...         self.n = 0
    ...
    ...     def add(self, amount: int) -> str:
    ...         '''Add to the count and return it.
    ...
    ...         Args:
    ...             amount: How much to add.
    ...         '''
    ...         self.n += amount
    ...         return str(self.n)
    >>> check_environment(Counter, "environment")
    []
    >>> check_environment(type("Empty", (), {}), "environment")  # doctest: +NORMALIZE_WHITESPACE
    ['environment: Empty has no reset method; TRL calls reset(**row) before each rollout, write def reset(self, **kwargs)',
     'environment: Empty has no public method besides reset and get_reward, so the model has no tool; add one']
    """
    if not inspect.isclass(cls):
        return [_not_a_class(cls, where)]
    name = cls.__name__
    # as TRL lists them: functions on the class, so a property is never evaluated and a classmethod is not a tool
    functions = dict(inspect.getmembers(cls, predicate=inspect.isfunction))
    problems = []
    if "reset" not in functions:
        problems.append(
            f"{where}: {name} has no reset method; TRL calls reset(**row) before each rollout, write def reset(self, **kwargs)"
        )
    elif inspect.iscoroutinefunction(functions["reset"]):
        problems.append(f"{where}: {name}.reset is async; TRL calls reset without awaiting it, so write it as a plain def")
    if "get_reward" in functions:
        extra = [p for p in list(inspect.signature(functions["get_reward"]).parameters.values())[1:] if p.default is p.empty]
        if extra:
            problems.append(
                f"{where}: {name}.get_reward takes {', '.join(p.name for p in extra)}; TRL calls it with nothing, "
                "once a rollout ends"
            )
    tools = tool_methods(cls)
    if not tools:
        problems.append(f"{where}: {name} has no public method besides reset and get_reward, so the model has no tool; add one")
    for tool in tools:
        static = isinstance(inspect.getattr_static(cls, tool), staticmethod)
        found = _problems(functions[tool], f"{where}.{tool}", receiver=not static)
        if found and not inspect.getdoc(functions[tool]):  # most likely a helper, not meant as a tool
            found[0] += (
                f", or name it _{tool} if it is not a tool (TRL offers the model every public method but reset and get_reward)"
            )
        problems += found
    return problems


def _not_a_class(obj: object, where: str) -> str:
    """The line for an environment that is not a class, naming what it is (never its repr with an address)."""
    fix = "name the environment's class (TRL builds one per rollout), with what its constructor takes in args"
    if inspect.isroutine(obj):
        return f"{where}: {getattr(obj, '__qualname__', obj.__name__)} is a function, not a class; {fix}"
    if not inspect.isclass(type(obj)) or type(obj).__module__ == "builtins":
        return f"{where}: {shown(obj)} is not a class but {_a(obj)}; {fix}"
    return f"{where}: an instance of {type(obj).__qualname__}, not a class; {fix}"


def check_reset(cls: type, columns: list[str], rows: str, where: str) -> list[str]:
    """Whether ``reset`` takes TRL's call with the columns of ``rows`` (described in the lines): TRL calls
    ``reset(**row)`` before each rollout, with every column of the row, ``prompt`` among them.

    >>> class Game:
    ...     def reset(self, word):
    ...         self.word = word
    >>> check_reset(Game, ["prompt", "word"], "the rows", "environment")  # doctest: +NORMALIZE_WHITESPACE
    ['environment: Game.reset takes no prompt, and TRL passes it every column of the rows: prompt, word;
      add **kwargs to reset']
    >>> check_reset(Game, ["prompt"], "the rows", "environment")[1]  # doctest: +NORMALIZE_WHITESPACE
    'environment: Game.reset needs word, which the rows lack (columns: prompt); add the column to the rows, or give
     word a default'
    """
    fn = dict(inspect.getmembers(cls, predicate=inspect.isfunction)).get("reset")  # as TRL finds it
    if fn is None:
        return []  # check_environment says so
    name, by_name = cls.__name__, (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    receiver = not isinstance(inspect.getattr_static(cls, "reset"), staticmethod)
    params = list(inspect.signature(fn).parameters.values())[1 if receiver else 0 :]
    named = {p.name for p in params if p.kind in by_name}
    problems = []
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        extra = [c for c in columns if c not in named]
        if extra:
            dropped = [c for c in extra if c != "prompt"]  # every row has a prompt: only the others can go
            problems.append(
                f"{where}: {name}.reset takes no {_either(extra)}, and TRL passes it every column of {rows}: "
                f"{listing(columns)}; add **kwargs to reset"
                + (f", or drop {_either(dropped, 'and')} from the rows" if dropped else "")
            )
    for p in params:
        if p.kind is p.VAR_POSITIONAL or p.kind is p.VAR_KEYWORD or p.default is not p.empty:
            continue
        if p.kind is p.POSITIONAL_ONLY:
            problems.append(f"{where}: {name}.reset takes {p.name} positional-only; TRL passes every column by name")
        elif p.name not in columns:
            problems.append(
                f"{where}: {name}.reset needs {p.name}, which {rows} lack (columns: {listing(columns)}); add the column "
                f"to the rows, or give {p.name} a default"
            )
    return problems


def _either(names: list[str], word: str = "or") -> str:
    """``prompt``, ``prompt or hints``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def tool_methods(cls: type) -> list[str]:
    """The names of an environment class's tool methods, as TRL lists them: functions on the class (so a property is
    never evaluated and a classmethod is not a tool), public, other than reset and get_reward."""
    return [
        n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if n not in _ENVIRONMENT_OWN and not n.startswith("_")
    ]


def check_names(names: dict[str, str]) -> list[str]:
    """Tools that share a name, from ``names`` (where -> the name the model calls): TRL keeps one tool of each name
    and the model cannot tell the others apart, so each name must be used once.

    >>> check_names({"tools[0]": "calculator", "tools[1]": "lookup", "environment.lookup": "lookup"})
    ["tools[1] and environment.lookup are both named 'lookup'; a tool call reaches only one, so rename them"]
    """
    by_name: dict[str, list[str]] = {}
    for where, name in names.items():
        by_name.setdefault(name, []).append(where)
    return [
        f"{', '.join(places[:-1])} and {places[-1]} are {'both' if len(places) == 2 else 'all'} named {name!r}; "
        "a tool call reaches only one, so rename them"
        for name, places in by_name.items()
        if len(places) > 1
    ]
