"""Layer 4, recipe: load a YAML file (or a shipped recipe by name), apply ``key=value`` overrides, validate.

Everything here is plain Python and PyYAML: a recipe is checked completely, all problems reported at
once with their key paths, before torch, transformers or trl is imported, and the checked recipe is typed: a
``Recipe`` of frozen sections (``checked.py``), read by attribute. The ``training:`` section holds GRPOConfig keys
under TRL's own names; ``settings.compat`` checks and translates them for the installed TRL.
Imports ``rewards``, ``settings`` and ``core``.
"""

from grpo_ext.recipe.changes import RESUME_MAY_CHANGE, changed_keys
from grpo_ext.recipe.checked import Data, Eval, Explore, Groups, Health, Logging, Model, Named, Recipe, Reward, Source, Training
from grpo_ext.recipe.load import load
from grpo_ext.recipe.read import absolute_path, add_recipe_arguments, apply_overrides, locate, parse_override, read_yaml
from grpo_ext.recipe.schema import MAX_RECIPE_BYTES, SCHEMA, TOP_LEVEL, Spec
from grpo_ext.recipe.validate import EVAL_SOURCES, TRAIN_SOURCES, held_out_size, validate

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
    "Recipe",
    "Reward",
    "Source",
    "Spec",
    "Training",
    "absolute_path",
    "add_recipe_arguments",
    "apply_overrides",
    "changed_keys",
    "held_out_size",
    "load",
    "locate",
    "parse_override",
    "read_yaml",
    "validate",
]
