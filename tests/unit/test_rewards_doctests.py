"""Every example in the reward modules' docstrings runs and gives what it shows."""

import doctest
import importlib

import pytest

MODULES = ["api", "registry", "digit", "maths", "answers", "formats", "shaping", "verify", "tool_use", "unscored"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"grpo_ext.rewards.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
