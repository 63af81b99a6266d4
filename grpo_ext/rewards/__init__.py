"""Layer 3, rewards: reward functions by name: the registry (``registry.py``), the built-in rewards that fill it,
and the guard that runs each reward (``guard.py``). Imports ``settings`` and ``core``."""

from grpo_ext.rewards import answers, code, digit, formats, judge, maths, reward_model, shaping, tool_use  # noqa: F401  (register the built-in rewards)
from grpo_ext.rewards.guard import Guarded, guard_all
from grpo_ext.rewards.registry import REGISTRY, build, completion_text, known_names, register, resolve

__all__ = ["REGISTRY", "Guarded", "build", "completion_text", "guard_all", "known_names", "register", "resolve"]
