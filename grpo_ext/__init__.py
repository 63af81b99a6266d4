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

What a run says while it works (the model it loads, each step, the evals) is records of the ``grpo_ext`` logger, which
the command line writes as its ``grpo_ext: ...`` lines; from Python nothing is written until you install a handler:
``logging.basicConfig(level=logging.INFO)``, or ``grpo_ext.core.console.show()`` for the command line's lines.

Importing this package is cheap: each name above is imported when it is first used, and torch, transformers and trl
only when a run needs them. ``grpo_ext.train`` is the function; ``python -m grpo_ext.train`` runs the command line's
shim ``grpo_ext/train.py``, which is run, never imported.
"""

import importlib

from grpo_ext.core.errors import RecipeError, RunError

# The API: each name, the module that holds it and its name there; imported on first use (PEP 562's __getattr__),
# so that ``import grpo_ext``, and with it every command, loads no layer it does not use.
_API: dict[str, tuple[str, str]] = {
    "Recipe": ("grpo_ext.recipe", "Recipe"),
    "load_recipe": ("grpo_ext.recipe", "load"),
    "doctor": ("grpo_ext.verbs.doctor", "diagnose"),
    "evaluate": ("grpo_ext.verbs.evaluate", "evaluate_models"),
    "filter_rows": ("grpo_ext.verbs.filter", "filter_rows"),
    "merge": ("grpo_ext.verbs.merge", "merge"),
    "plan": ("grpo_ext.verbs.plan", "plan"),
    "push": ("grpo_ext.verbs.push", "push"),
    "evaluate_checkpoints": ("grpo_ext.verbs.sweep", "sweep"),
    "dry_run": ("grpo_ext.verbs.train", "dry_run"),
    "train": ("grpo_ext.verbs.train", "train"),
}

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


def __getattr__(name: str):
    """``grpo_ext.NAME`` for a name of the API: imported now, then kept as an attribute."""
    if name not in _API:
        raise AttributeError(f"module 'grpo_ext' has no attribute {name!r}")
    module, attr = _API[name]
    value = globals()[name] = getattr(importlib.import_module(module), attr)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
