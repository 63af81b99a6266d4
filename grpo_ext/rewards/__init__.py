"""Reward functions by name: the registry (``registry.py``) and the built-in rewards that fill it."""

from grpo_ext.rewards import digit, format, maths, shaping  # noqa: F401  (register the built-in rewards)
from grpo_ext.rewards.registry import REGISTRY, build, completion_text, known_names, register

__all__ = ["REGISTRY", "build", "completion_text", "known_names", "register"]
