"""What ships with grpo_ext, and a shipped recipe copied to edit: the ``ls`` and ``cp`` verbs.

    grpo-ext ls                       # shipped recipes, rewards, model aliases and the model shapes plan knows
    grpo-ext cp digit my.yaml         # a copy to edit; then grpo-ext validate my.yaml && python -m grpo_ext.train my.yaml

From Python the same lists are ``grpo_ext.core.catalog.shipped_recipes()``, ``grpo_ext.rewards.known_names()`` and
``grpo_ext.core.catalog.MODELS``.
"""

import argparse
from pathlib import Path

from grpo_ext import rewards
from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import refuse_to_replace, write_atomic
from grpo_ext.core.text import first_line, suggest
from grpo_ext.settings import shapes


def cmd_ls(_args: argparse.Namespace) -> None:
    print("recipes (grpo-ext cp NAME my.yaml; python -m grpo_ext.train NAME):")
    for name, path in catalog.shipped_recipes().items():
        print(f"  {name:<24} {catalog.recipe_summary(path)}")
        print(f"  {'':<24} {catalog.recipe_facts(path)}")
    print("rewards:")
    for name in rewards.known_names():
        print(f"  {name:<24} {first_line(rewards.REGISTRY[name].__doc__) if name in rewards.REGISTRY else '(entry point)'}")
    print("model aliases:")
    for name, entry in catalog.MODELS.items():
        print(f"  {name:<24} {entry['about']}")
    print("model shapes grpo-ext plan knows offline (an -Instruct/-it variant shares its base's shape):")
    for line in shapes.listing():
        print(f"  {line}")


def cmd_cp(args: argparse.Namespace) -> None:
    shipped = catalog.shipped_recipes()
    if args.name not in shipped:
        raise RecipeError(f"no shipped recipe named {args.name!r}{suggest(args.name, shipped)}")
    dest = Path(args.dest)
    if dest.is_dir():
        dest = dest / shipped[args.name].name
    refuse_to_replace([dest], args.force, option="DEST", command="cp")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # the shipped recipe names its schema relative to recipes/; the copy names the shipped file wherever it goes
    text = shipped[args.name].read_text(encoding="utf-8")
    write_atomic(dest, catalog.point_at_schema(text, catalog.schema_file().resolve().as_uri()))
    print(
        f"copied {args.name} to {dest}; edit it (runs go to its output_dir), then: "
        f"grpo-ext validate {dest} && python -m grpo_ext.train {dest}"
    )


def add_parser(subparsers) -> None:
    """``grpo-ext ls`` and ``grpo-ext cp NAME DEST [--force]``."""
    subparsers.add_parser("ls", help="shipped recipes, rewards and model aliases").set_defaults(fn=cmd_ls)
    p = subparsers.add_parser("cp", help="copy a shipped recipe to edit")
    p.add_argument("name")
    p.add_argument("dest")
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    p.set_defaults(fn=cmd_cp)
