"""The ``train`` command's parser and its check: ``grpo-ext train RECIPE ...`` reads and checks the recipe here, and
only a recipe that passes loads the run's layers (``grpo_ext.verbs.train``, handed the recipe by ``cli.WORK``), so
that a refused recipe costs what ``grpo-ext validate`` costs."""

from pathlib import Path

from grpo_ext.recipe import Recipe, add_recipe_arguments, load, quick


def recipe_for(recipe: str | Path | Recipe, overrides: list[str] | tuple = (), quick_run: bool = False) -> Recipe:
    """The recipe a run (or a dry run) takes: loaded with the ``overrides``, and with --quick's changes under them."""
    if not quick_run:
        return recipe if isinstance(recipe, Recipe) else load(str(recipe), list(overrides))
    return quick.again(recipe) if isinstance(recipe, Recipe) else quick.load(str(recipe), list(overrides))


def check(args) -> Recipe:
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
