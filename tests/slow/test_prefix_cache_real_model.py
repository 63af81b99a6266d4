"""The loss pass with the shared prompt encoded once (run/prefix_cache.py) on the real model: SmolLM2 under a
system prompt of about a hundred tokens gives TRL's loss and gradients either way."""

import pytest
import torch

from grpo_ext.recipe import load
from grpo_ext.run import models
from grpo_ext.settings import compat
from tests.helpers import ROOT
from tests.integration.test_prefix_cache import assert_the_same_gradient, loss_pass_both_ways

pytestmark = pytest.mark.skipif(not compat.trl_at_least("1.0"), reason="TRL before 1.0 generates from text")


def test_real_model_loss_pass_is_the_same_with_the_prompt_encoded_once(tmp_path, no_hub):
    recipe = load(str(ROOT / "recipes" / "digit.yaml"), ["model.dtype=float32"])
    model, tokenizer, _ = models.load(recipe.model, recipe.base_dir, lambda *_: None)
    torch.manual_seed(0)
    system = " ".join(f"Example {i}: asked for {i} plus {i + 3}, the calculator says {2 * i + 3}." for i in range(6))
    assert_the_same_gradient(loss_pass_both_ways(model, tokenizer, tmp_path, system, completion_tokens=8))
