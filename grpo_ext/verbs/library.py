"""The reward and tool libraries a recipe names from: the ``rewards`` and ``tools`` verbs.

    grpo-ext rewards [ls]                          # every reward name with its one-line description
    grpo-ext rewards show NAME                     # where it comes from, its arguments, its whole docstring
    grpo-ext rewards score NAME --completion TEXT [--prompt P] [--answer A] [--arg k=v] [--column k=v]
    grpo-ext tools [ls]                            # the tool library, then the environments
    grpo-ext tools show NAME                       # a tool's arguments and the documentation the model reads

A NAME is what a recipe writes: a registry name, ``module:function``, ``file.py:function`` or an installed package's
entry point (``core/references.py``). ``rewards score`` runs one reward as training runs it, under its guard, with no
model. From Python: ``grpo_ext.rewards.build(name, args, base_dir)`` and ``grpo_ext.rewards.REGISTRY``.
"""

import contextlib
import inspect
import json
from pathlib import Path

from grpo_ext import rewards
from grpo_ext.core import references
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import first_line, shown
from grpo_ext.recipe import parse_override
from grpo_ext.recipe.schema import SCHEMA
from grpo_ext.rewards import guard, judge, registry, unscored
from grpo_ext.tools import environments
from grpo_ext.tools import library as tool_library


def _listing(kind: references.Kind) -> None:
    """Every name of a kind (rewards, tools) with its one-line description."""
    for name in references.known_names(kind):
        doc = kind.registry[name].__doc__ if name in kind.registry else "registered by an installed package"
        print(f"{name:<24} {first_line(doc)}")


def _found(kind: references.Kind, name: str) -> tuple:
    """(object, is_factory) that ``NAME`` of ``grpo-ext rewards|tools show NAME`` names, or its one-line error."""
    try:
        return references.find(kind, name, Path.cwd())
    except LookupError as exc:
        raise RecipeError(f"{kind.word}s show: {exc}") from None


def _factory_lines(name: str, params: list[inspect.Parameter]) -> list[str]:
    """A factory's arguments, then the recipe entry that gives them (the required ones), as ``show`` prints them."""
    required = ", ".join(f"{p.name}: ..." for p in params if p.default is p.empty)
    return ["args: " + (", ".join(str(p) for p in params) or "none"), f"in a recipe: {{name: {name}, args: {{{required}}}}}"]


def _parameters(obj) -> list[inspect.Parameter]:
    """The parameters a recipe's ``args`` can name (none for an object with no signature)."""
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD]


def cmd_rewards(_args) -> None:
    """``grpo-ext rewards [ls]``: every reward name with its one-line description."""
    _listing(registry.KIND)


def cmd_rewards_show(args) -> None:
    """``grpo-ext rewards show NAME``: where a reward comes from, its arguments and its whole docstring."""
    obj, is_factory = _found(registry.KIND, args.name)
    source = "entry point"
    if args.name in registry.REGISTRY:
        source = "built in"
    elif registry.is_reference(args.name):
        source = "module or file"
    print(f"{args.name} ({source})")
    params = _parameters(obj)
    if registry.is_reference(args.name):  # a user's function: where it is, and what it takes
        with contextlib.suppress(TypeError, OSError):
            print(f"source: {Path(inspect.getsourcefile(obj)).resolve()}, line {inspect.getsourcelines(obj)[1]}")
        is_factory = "completions" not in {p.name for p in params}  # a reward takes completions; a factory its args
        if not is_factory:
            print(f"columns: {', '.join(rewards.describe(obj).columns) or 'none'} (each row's values, as keyword arguments)")
    if is_factory:
        print("\n".join(_factory_lines(args.name, params)))
    print(inspect.cleandoc(obj.__doc__ or "(no docstring)"))


def cmd_tools(_args) -> None:
    """``grpo-ext tools [ls]``: every library tool with its one-line description, then the library's environments."""
    _listing(tool_library.KIND)
    print("\nenvironments (environment: NAME):")
    _listing(environments.KIND)


def cmd_tools_show(args) -> None:
    """``grpo-ext tools show NAME``: a tool's arguments (a factory's, with args) and the docstring the model reads."""
    obj, is_factory = _found(tool_library.KIND, args.name)
    if is_factory and not inspect.signature(obj).parameters:  # a library tool that takes no args: the tool itself
        obj, is_factory = obj(), False
    print(f"{args.name} ({'library' if args.name in tool_library.REGISTRY else 'module, file or entry point'})")
    if is_factory:
        print("\n".join(_factory_lines(args.name, _parameters(obj))))
    else:
        with contextlib.suppress(TypeError, ValueError):
            print(f"call: {getattr(obj, '__name__', args.name)}{inspect.signature(obj)}")
    if is_factory or not obj.__doc__:
        print(inspect.cleandoc(obj.__doc__ or "(no docstring: the model would see no description)"))
        return
    from transformers.utils import get_json_schema  # what TRL renders into the prompt (no torch import)

    try:
        schema = get_json_schema(obj)["function"]
    except Exception as exc:  # the checks a recipe runs say the same, in one line
        raise RecipeError(f"tools show: transformers cannot describe {args.name} to the model: {exc}") from None
    print("the model reads (the schema in its prompt):")
    print(json.dumps(schema, indent=2, ensure_ascii=False))


def cmd_rewards_score(args) -> None:
    """``grpo-ext rewards score NAME --completion TEXT [--prompt P] [--answer A] [--arg k=v] [--column k=v]
    [--column-yaml k=v]``: one score, no model; ``--completion`` given several times scores them as one group of
    the prompt, as training hands a group (``llm_judge``'s ``mode: group`` grades them together). The reward runs
    under training's guard (its time limit, its checks of the scores, an exit caught), so a score training refuses
    is refused here with training's line; None comes with its reason, and a judge's reply is shown."""
    reward_args = _key_values(args.arg, "--arg", "max_length=256")
    fn = rewards.build(args.name, reward_args, Path.cwd(), "rewards score")
    row = _columns(args.column) | _key_values(args.column_yaml, "--column-yaml", "'tests=[{input: 2, output: 4}]'")
    prompt = args.prompt if args.prompt is not None else row.get("prompt", "")
    if args.prompt is not None and "prompt" in row:
        raise RecipeError("rewards score: the prompt is given twice (--prompt and --column prompt=...); keep --prompt")
    row.pop("prompt", None)  # the prompt goes to the reward as its prompts, as TRL hands it, not as a column
    if args.answer is not None:
        row[reward_args.get("answer_column", "answer")] = args.answer
    missing = [c for c in rewards.describe(fn).columns if c not in row]
    if missing:
        answer = reward_args.get("answer_column", "answer")
        given = " ".join("--answer VALUE" if c == answer else f"--column {c}=VALUE" for c in missing)
        raise RecipeError(f"rewards score: {args.name} reads column {', '.join(map(repr, missing))} of each row; pass {given}")
    timeout = SCHEMA["reward"]["timeout"].default  # a recipe's rewards[i].timeout when it sets none
    guarded = rewards.Guarded(fn, guard.metric_name(args.name, fn), timeout=timeout)
    n = len(args.completion)
    columns = {name: [value] * n for name, value in row.items()}
    scores = guarded(prompts=[prompt] * n, completions=args.completion, **columns)
    replies = fn.replies if isinstance(fn, judge.Judge) else [None] * n
    group = isinstance(fn, judge.Judge) and fn.settings.mode == "group"  # one reply grades them all
    for i, score in enumerate(scores):
        label = guarded.__name__ if n == 1 else f"{guarded.__name__} #{i + 1}"
        if score is None:
            print(f"{label}: None; {unscored.reason(fn, row, i)}")
        else:
            print(f"{label}: {round(score, 6)}")  # 0.72, not 0.7200000000000001
        if replies[i] is not None and not group:
            print(f"judge said: {shown(replies[i], judge.SAID_CHARS)}")
    if group and replies[0] is not None:
        print(f"judge said: {shown(replies[0], judge.SAID_CHARS)}")
    if _counts_tokens(fn):
        print("note: lengths counted in characters here (no tokenizer); training and eval count tokens")


def _key_values(texts: list[str], option: str, example: str) -> dict:
    """``key=value`` strings (values read as YAML) as a mapping."""
    out = {}
    for text in texts:
        keys, value = parse_override(text)
        if len(keys) != 1:
            raise RecipeError(f"{option} {text!r}: give key=value with a plain key, e.g. {option} {example}")
        out[str(keys[0])] = value
    return out


def _columns(texts: list[str]) -> dict[str, str]:
    """``--column NAME=TEXT`` strings as a mapping; each text kept as given, line breaks and all."""
    out = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise RecipeError(f"--column {shown(text)}: give NAME=TEXT, e.g. --column topic=cats")
        out[name] = value
    return out


def _counts_tokens(fn) -> bool:
    """Whether a reward measures ``completion_ids`` (token counts), which this command cannot give it."""
    try:
        return "completion_ids" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def add_parser(subparsers) -> None:
    """``grpo-ext rewards [ls | show NAME | score NAME ...]`` and ``grpo-ext tools [ls | show NAME]``."""
    rw = subparsers.add_parser("rewards", help="reward names (ls), one reward's documentation (show), try one (score)")
    rw.set_defaults(fn=cmd_rewards)
    rw_sub = rw.add_subparsers(dest="rewards_verb")
    rw_sub.add_parser("ls", help="every reward name with its one-line description").set_defaults(fn=cmd_rewards)
    show = rw_sub.add_parser("show", help="a reward's source, arguments and documentation")
    show.add_argument("name")
    show.set_defaults(fn=cmd_rewards_show)
    score = rw_sub.add_parser(
        "score",
        help="score one completion, without a model",
        description="Score one completion with one reward, under the guard training runs it under: a score training "
        "refuses, or a reward that raises or exits, is an error (exit 1); a None score comes with its reason. "
        "--column keeps a value's text as given (line breaks included); --column-yaml reads it as YAML.",
    )
    score.add_argument("name", help="registry name, module:function or file.py:function, as in a recipe")
    score.add_argument(
        "--completion",
        action="append",
        required=True,
        help="a completion to score; given several times, the completions of one prompt, scored as one group",
    )
    score.add_argument("--prompt", help="the prompt the completions answer (a judge's rubric shows it as {prompt})")
    score.add_argument("--answer", help="the reference answer (the dataset's answer column)")
    score.add_argument(
        "--arg", action="append", default=[], metavar="KEY=VALUE", help="a reward argument, read as YAML (repeatable)"
    )
    score.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=TEXT",
        help="a dataset column the reward reads, its text kept as given, line breaks and all (repeatable)",
    )
    score.add_argument(
        "--column-yaml",
        action="append",
        default=[],
        metavar="NAME=YAML",
        help="a dataset column whose value is read as YAML: a list, a mapping, a number (repeatable)",
    )
    score.set_defaults(fn=cmd_rewards_score)

    tl = subparsers.add_parser("tools", help="tools a recipe's model may call (ls), one tool's documentation (show)")
    tl.set_defaults(fn=cmd_tools)
    tl_sub = tl.add_subparsers(dest="tools_verb")
    tl_sub.add_parser("ls", help="every library tool with its one-line description").set_defaults(fn=cmd_tools)
    tshow = tl_sub.add_parser("show", help="a tool's arguments and the documentation the model reads")
    tshow.add_argument("name", help="library name, module:function or file.py:function")
    tshow.set_defaults(fn=cmd_tools_show)
