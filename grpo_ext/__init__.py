"""grpo_ext: YAML recipes, a reward library and a TRL version shim for GRPO training.

From a shell::

    grpo-ext train recipes/digit.yaml                     # train (also: python -m grpo_ext.train ...)
    grpo-ext train digit --dry-run                        # validate and show the effective config
    grpo-ext ls                                           # shipped recipes, rewards and model aliases

From Python::

    import grpo_ext

    recipe = grpo_ext.load_recipe("digit", ["training.max_steps=4"])   # validated; RecipeError lists every problem
    summary = grpo_ext.train(recipe)                                      # the run's summary.json, as a dict
    grpo_ext.evaluate(recipe, ["runs/digit"])                            # score models on the eval prompts
    grpo_ext.evaluate_checkpoints(recipe, "runs/digit")                   # score every checkpoint of a run
    grpo_ext.filter_rows("arith", k=8, keep="0.1:0.9")                    # keep the prompts solved sometimes
    grpo_ext.merge("runs/digit-lora")                                     # fold a LoRA adapter into its base
    grpo_ext.push("runs/digit", "me/digit-grpo", dry_run=True)            # what a push to the Hub would upload
    lines, healthy = grpo_ext.doctor("runs/digit")                        # a run's health findings and remedies

Importing this package is cheap: torch, transformers and trl are imported only when a run needs them.
"""

from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.recipe import Recipe
from grpo_ext.recipe import load as load_recipe
from grpo_ext.verbs.doctor import diagnose as doctor
from grpo_ext.verbs.evaluate import evaluate_models as evaluate
from grpo_ext.verbs.filter import filter_rows
from grpo_ext.verbs.merge import merge
from grpo_ext.verbs.plan import plan
from grpo_ext.verbs.push import push
from grpo_ext.verbs.sweep import sweep as evaluate_checkpoints
from grpo_ext.verbs.train import dry_run, train

__version__ = "0.1.0"
__all__ = [
    "Recipe",
    "RecipeError",
    "RunError",
    "doctor",
    "dry_run",
    "evaluate",
    "evaluate_checkpoints",
    "filter_rows",
    "load_recipe",
    "merge",
    "plan",
    "push",
    "train",
]
