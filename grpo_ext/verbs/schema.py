"""The recipe's JSON Schema, for an editor's YAML language server: the ``schema`` verb.

    grpo-ext schema                                       # print it
    grpo-ext schema --out recipes/recipe.schema.json --force

A recipe uses it with the line ``catalog.SCHEMA_LINE`` + the file's URI (``grpo-ext cp`` writes that line); the
schema itself is built from ``recipe/schema.py`` by ``recipe/json_schema.py``.
"""

import argparse
import sys
from pathlib import Path

from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import refuse_to_replace, write_atomic
from grpo_ext.recipe import json_schema


def cmd_schema(args: argparse.Namespace) -> None:
    """``grpo-ext schema [--out FILE [--force]]``: the recipe's JSON Schema, for an editor's YAML language server."""
    text = json_schema.text()
    if args.out is None:
        sys.stdout.write(text)
        return
    out = Path(args.out)
    if out.is_dir():
        raise RecipeError(f"--out: {out} is a folder; give a file name, e.g. {out / catalog.SCHEMA_FILE}")
    if not out.parent.is_dir():
        raise RecipeError(f"--out: folder {out.parent} does not exist; create it or give another path")
    refuse_to_replace([out], args.force, command="schema")
    write_atomic(out, text)
    print(f"wrote {out}; put this line in a recipe to use it: {catalog.SCHEMA_LINE}{out.resolve().as_uri()}")


def add_parser(subparsers) -> None:
    """``grpo-ext schema [--out FILE [--force]]``."""
    p = subparsers.add_parser("schema", help="the recipe's JSON Schema, for editors (completion and docs on every key)")
    p.add_argument("--out", help="write it to this file instead of printing it")
    p.add_argument("--force", action="store_true", help="replace the --out file if it exists")
    p.set_defaults(fn=cmd_schema)
