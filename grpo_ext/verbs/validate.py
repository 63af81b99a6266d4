"""Check recipes without loading any model: the ``validate`` verb.

    grpo-ext validate recipes/digit.yaml my.yaml training.max_steps=5    # every problem of every file; exit 2 if any
    grpo_ext.load_recipe("my.yaml", ["training.max_steps=5"])             # one recipe's rules, from Python

Each file is loaded with the same overrides, under every rule ``train`` applies (``recipe/rules.py``), and every
row of its local data files is read once (``recipe/files.py``), so a recipe that validates is one that ``train`` takes.
Nothing heavy is imported: no torch, transformers or trl, and no other command's module.
"""

import argparse
import sys
from pathlib import Path

from grpo_ext import recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import exists
from grpo_ext.recipe.files import check_recipe_files


def cmd_validate(args: argparse.Namespace) -> None:
    """Each file checked with the same overrides; every problem of every file printed, then exit 2 if any."""
    # files first, then overrides: a word with '=' that is not a file is an override
    overrides = [f for f in args.files if "=" in f and not exists(Path(f))] + args.overrides
    files = [f for f in args.files if f not in overrides]
    if not files:
        raise RecipeError("validate: give at least one recipe file before the section.key=value overrides")
    failed = []
    for ref in files:
        try:
            passed = recipe.check_file(ref, overrides)  # before recipe.typed is read, which loads the typed classes
            check_recipe_files(recipe.typed(passed))  # then every row of its local data files
            print(f"{ref}: ok")
        except RecipeError as exc:
            for line in exc.lines():
                print(line, file=sys.stderr)
            failed.append(ref)
    if failed:
        raise RecipeError([])  # already printed


def add_parser(subparsers) -> None:
    """``grpo-ext validate FILE [FILE ...] [key=value ...]``."""
    p = subparsers.add_parser("validate", help="check recipe files without loading any model")
    p.add_argument("files", nargs="+", help="recipe files or shipped recipe names, then any section.key=value overrides")
    p.set_defaults(fn=cmd_validate, overrides=[])
