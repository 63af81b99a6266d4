"""grpo_ext: YAML recipes, a reward library and a TRL version shim for GRPO training.

    python -m grpo_ext.train recipes/digit.yaml          # train
    python -m grpo_ext.train digit --dry-run              # validate and show the effective config
    grpo-ext ls                                           # shipped recipes, rewards and model aliases

Importing this package is cheap: torch, transformers and trl are imported only when a run needs them.
"""

__version__ = "0.1.0"
