"""Layer 4, recipe: load a YAML file (or a shipped recipe by name), apply ``key=value`` overrides, validate.

Everything here is plain Python and PyYAML: a recipe is checked completely, all problems reported at once with their
key paths, before torch, transformers or trl is imported (``rules.check``), and a recipe that passed is typed: a
``Recipe`` of frozen sections (``checked.py``), read by attribute. The ``training:`` section holds GRPOConfig keys
under TRL's own names; ``settings.compat`` checks and translates them for the installed TRL.
Imports ``rewards``, ``settings`` and ``core``.
"""

import importlib
from typing import TYPE_CHECKING, Any

from grpo_ext.recipe.changes import RESUME_MAY_CHANGE, changed_keys
from grpo_ext.recipe.read import absolute_path, add_recipe_arguments, apply_overrides, locate, parse_override, read_yaml
from grpo_ext.recipe.rules import EVAL_SOURCES, TRAIN_SOURCES, Passed, check, check_file, held_out_size
from grpo_ext.recipe.schema import MAX_RECIPE_BYTES, SCHEMA, TOP_LEVEL, Spec
from grpo_ext.recipe.training import Training

if TYPE_CHECKING:
    from grpo_ext.recipe import quick
    from grpo_ext.recipe.checked import (
        Data,
        Eval,
        Explore,
        Groups,
        Health,
        Logging,
        Model,
        Named,
        Recipe,
        Reward,
        Source,
        load,
        typed,
        validate,
    )

# The typed recipe's names, and the module that holds each, imported on first use (PEP 562's __getattr__): a command
# checks a recipe (``check_file``) before it types it (``typed``), so that a refused recipe never builds the typed
# sections' classes (their generated methods were a tenth of a refusal's time).
_TYPED = {
    **dict.fromkeys(
        ("Data", "Eval", "Explore", "Groups", "Health", "Logging", "Model", "Named", "Recipe", "Reward", "Source"),
        "checked",
    ),
    "typed": "checked",
    "load": "checked",
    "validate": "checked",
}

__all__ = [
    "EVAL_SOURCES",
    "MAX_RECIPE_BYTES",
    "RESUME_MAY_CHANGE",
    "SCHEMA",
    "TOP_LEVEL",
    "TRAIN_SOURCES",
    "Data",
    "Eval",
    "Explore",
    "Groups",
    "Health",
    "Logging",
    "Model",
    "Named",
    "Passed",
    "Recipe",
    "Reward",
    "Source",
    "Spec",
    "Training",
    "absolute_path",
    "add_recipe_arguments",
    "apply_overrides",
    "changed_keys",
    "check",
    "check_file",
    "held_out_size",
    "load",
    "locate",
    "parse_override",
    "quick",
    "read_yaml",
    "typed",
    "validate",
]


def __getattr__(name: str) -> Any:
    """``recipe.NAME``: a name of ``_TYPED`` from its module, or a module of this package, imported now."""
    if name in _TYPED:
        value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{_TYPED[name]}"), name)
        return value
    if name in ("agents", "checked", "files", "json_schema", "quick"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
