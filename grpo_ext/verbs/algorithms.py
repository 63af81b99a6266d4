"""The GRPO variants a recipe names with ``algorithm:``: the ``algorithms`` verb.

    grpo-ext algorithms               # every variant, one line each
    grpo-ext algorithms dapo          # one variant: its paper, each setting it makes and why

The table is ``settings/variants.py`` (``VARIANTS``); a recipe's own ``training:`` keys win over a variant's.
"""

import argparse

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import suggest
from grpo_ext.settings import variants


def cmd_algorithms(args: argparse.Namespace) -> None:
    """``grpo-ext algorithms [NAME]``: the GRPO variants a recipe can name, or one variant's settings and why."""
    if args.name and args.name not in variants.VARIANTS:
        raise RecipeError(f"algorithms: unknown variant {args.name!r}{suggest(args.name, variants.VARIANTS)}")
    print("\n".join(variants.details(args.name) if args.name else variants.listing()))


def add_parser(subparsers) -> None:
    """``grpo-ext algorithms [NAME]``."""
    p = subparsers.add_parser("algorithms", help="GRPO variants by name (algorithm: NAME in a recipe) and what each sets")
    p.add_argument("name", nargs="?", help="one variant: its paper, each setting and why")
    p.set_defaults(fn=cmd_algorithms)
