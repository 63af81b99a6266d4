"""The ``train`` command's parser and its check: ``grpo-ext train RECIPE ...`` reads and checks the recipe here, and
only a recipe that passes loads the run's layers (``grpo_ext.verbs.train``, handed the recipe by ``cli.WORK``), so
that a refused recipe costs what ``grpo-ext validate`` costs: it is checked (``recipe.check_file``) before it is typed
(``recipe.typed``), and ``--quick``'s module loads only for ``--quick``."""

import os
from pathlib import Path
from typing import TYPE_CHECKING

from grpo_ext import recipe as recipes
from grpo_ext.recipe import add_recipe_arguments

if TYPE_CHECKING:
    from grpo_ext.recipe import Recipe


def recipe_for(recipe: "str | Path | Recipe", overrides: list[str] | tuple = (), quick_run: bool = False) -> "Recipe":
    """The recipe a run (or a dry run) takes: loaded with the ``overrides``, and with --quick's changes under them."""
    if not isinstance(recipe, str | os.PathLike):  # a Recipe, already checked and typed
        return recipes.quick.again(recipe) if quick_run else recipe
    if quick_run:
        return recipes.quick.load(str(recipe), list(overrides))
    passed = recipes.check_file(str(recipe), list(overrides))  # before recipes.typed is read, which loads its module
    return recipes.typed(passed)


def check(args) -> "Recipe":
    """The command line's recipe, loaded and checked: RecipeError (exit 2) before any of the run's layers loads."""
    return recipe_for(args.recipe, args.overrides, args.quick)


def add_parser(subparsers) -> None:
    """``grpo-ext train RECIPE [key=value ...] [--dry-run] [--quick] [--overwrite] [--resume] [--verbose]``."""
    p = subparsers.add_parser("train", help="train from a recipe", description="Train a model with GRPO from a YAML recipe.")
    add_recipe_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="validate, resolve, print the effective GRPOConfig; load no weights")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: 2 steps, an eval of 2 prompts x 2 samples, no final/, into OUTPUT_DIR-quick (its first "
        "line lists each change; a key=value you give wins)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a previous run in output_dir")
    p.add_argument(
        "--resume", action="store_true", help="continue the unfinished run in output_dir from its last complete checkpoint"
    )
    p.add_argument("--accept-changes", action="store_true", help="with --resume: continue although the recipe differs (recorded)")
    p.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    p.set_defaults(fn=check)
