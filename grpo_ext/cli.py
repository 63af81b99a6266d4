"""The ``grpo-ext`` command (also ``python -m grpo_ext``; ``python -m grpo_ext.train`` is ``grpo-ext train``).

    grpo-ext train RECIPE [key=value ...] [--dry-run] [--overwrite] [--resume]   train from a recipe
    grpo-ext train RECIPE --quick [key=value ...]       every phase of a run, small: does the recipe run end to end?
    grpo-ext validate FILE [FILE ...] [key=value ...]   check recipes (with overrides); exit 2 if any is bad
    grpo-ext ls                                         shipped recipes, rewards and model aliases
    grpo-ext cp NAME DEST.yaml                          copy a shipped recipe to edit
    grpo-ext eval RECIPE --model A [--model B ...]      score models side by side on the recipe's eval prompts
    grpo-ext eval RECIPE --model RUN_DIR --checkpoints  score every checkpoint of a run; eval_curve.png
    grpo-ext rewards [ls]                               reward names with their one-line descriptions
    grpo-ext rewards show NAME                          a reward's arguments and documentation
    grpo-ext rewards score NAME --completion TEXT [--prompt P] [--answer A] [--arg k=v] [--column k=v]   score one completion
    grpo-ext tools [ls] | tools show NAME               tools a recipe's model may call, and one tool's documentation
    grpo-ext filter RECIPE [--model M] [--k 8] [--keep 0.1:0.9]   keep the training rows a model solves sometimes
    grpo-ext merge RUN_DIR [--out DIR] [--force]        fold a LoRA adapter into its base model
    grpo-ext push RUN_DIR OWNER/NAME [--private] [--revision BRANCH] [--dry-run]   publish final/ on the Hub, with a card
    grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB] [--gpus N --sharding zero3]   peak memory; what to change
    grpo-ext doctor RUN_DIR [--samples [N]]             a run's health: findings and remedies; exit 1 when not healthy
    grpo-ext doctor --env [RECIPE]                      versions, devices and cache for a bug report; known-bad combinations
    grpo-ext algorithms [NAME]                          GRPO variants a recipe names with algorithm:, and what each sets
    grpo-ext schema [--out FILE [--force]]              the recipe's JSON Schema, for an editor's YAML language server

Exit status, for every verb: 0 done; 2 bad input (one ``error:`` line per problem, nothing written);
1 a failure while running; 130 interrupted. A verb that writes files (cp, schema, eval, filter, merge) replaces
one already there only with ``--force``, and says so before any work.
"""

import argparse
import importlib
import os
import sys
from typing import Any

from grpo_ext.core import console
from grpo_ext.core.errors import ElsewhereError, RecipeError, RunError

# Each command and the module that owns it: its parser (``add_parser(subparsers)``) and the function the command
# runs. A command's module is imported when that command is parsed, so that ``grpo-ext validate`` loads neither
# torch nor any other command's module; ``grpo-ext --help`` imports them all. The order is ``--help``'s.
COMMANDS: dict[str, str] = {
    "train": "grpo_ext.verbs.train_command",
    "validate": "grpo_ext.verbs.validate",
    "ls": "grpo_ext.verbs.catalog",
    "cp": "grpo_ext.verbs.catalog",
    "rewards": "grpo_ext.verbs.library",
    "tools": "grpo_ext.verbs.library",
    "schema": "grpo_ext.verbs.schema",
    "algorithms": "grpo_ext.verbs.algorithms",
    "eval": "grpo_ext.verbs.sweep",  # both forms, models side by side and --checkpoints: sweep imports evaluate
    "filter": "grpo_ext.verbs.filter",
    "merge": "grpo_ext.verbs.merge",
    "push": "grpo_ext.verbs.push",
    "plan": "grpo_ext.verbs.plan",
    "doctor": "grpo_ext.verbs.doctor",
}

# A command whose module above only checks its input, and the function that does its work, called with the parsed
# command line and what the check returned; its module is imported once the check has passed, so that a refused
# recipe loads none of the layers a run needs (``grpo-ext train`` of a bad recipe costs what ``validate`` costs).
WORK: dict[str, tuple[str, str]] = {"train": ("grpo_ext.verbs.train", "cmd_train")}


class _Formatter(argparse.HelpFormatter):
    """argparse's help, as wide as the terminal, measured without ``shutil``: argparse builds a formatter for every
    option it is given and imports ``shutil`` (with its compression modules) to read the width, 6 ms of a refused
    recipe's 110. The width is read as ``shutil.get_terminal_size`` reads it: ``COLUMNS``, else standard output's
    terminal, else 80."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """A parser whose help is formatted by ``_Formatter``, as its commands' parsers are."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ is not None else 80
        except (AttributeError, ValueError, OSError):  # not a terminal, or a stream without a descriptor
            columns = 80
    return columns


def parser(commands=COMMANDS) -> argparse.ArgumentParser:
    """The parser of ``grpo-ext``, with the subcommands that the modules of ``commands`` add (default: all)."""
    p = _Parser(prog="grpo-ext", description="GRPO training from YAML recipes on top of TRL.")
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    for module in dict.fromkeys(COMMANDS[name] for name in commands):
        importlib.import_module(module).add_parser(sub)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse a command line; ``key=value`` overrides may stand before or after the options. Only the named
    command's module is imported; any other command line (``--help``, a misspelt command) gets them all."""
    named = argv[:1] if argv and argv[0] in COMMANDS else COMMANDS
    args, extra = parser(named).parse_known_args(argv)
    if extra and (not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra)):
        parser().error(f"unrecognized arguments: {' '.join(extra)}")  # its usage line names every command
    if extra:
        args.overrides = [*args.overrides, *extra]  # key=value overrides written after the options
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every error becomes its exit status here, and only here."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser().print_help(sys.stderr)
        return 2
    args = parse_args(argv)
    console.show()  # the command line writes grpo_ext's records as its lines; the Python API leaves that to its caller
    try:
        status = args.fn(args)
        if args.verb in WORK:
            module, name = WORK[args.verb]
            status = getattr(importlib.import_module(module), name)(args, status)
        status = status or 0
        sys.stdout.flush()  # a reader that went away shows here, not as a traceback at exit
        return status
    except RecipeError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return 2
    except ElsewhereError as exc:  # another process of the run printed the error line
        print(f"grpo_ext: {exc}", file=sys.stderr)
        return 1
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; the run directory keeps what was saved", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`grpo-ext train X --dry-run | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
