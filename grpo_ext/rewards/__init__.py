"""Layer 3, rewards: reward functions by name: what a reward is and may declare (``api.py``), the registry
(``registry.py``), the built-in rewards that fill it (each module imported when one of its names is first looked
up: ``registry.BUILTINS``), and the guard that runs each reward (``guard.py``). Imports ``settings`` and ``core``."""

from grpo_ext.rewards.api import Reward, RewardInfo, completion_text, describe
from grpo_ext.rewards.guard import Guarded, guard_all
from grpo_ext.rewards.registry import REGISTRY, build, known_names, register, resolve

__all__ = [
    "REGISTRY",
    "Guarded",
    "Reward",
    "RewardInfo",
    "build",
    "completion_text",
    "describe",
    "guard_all",
    "known_names",
    "register",
    "resolve",
]
