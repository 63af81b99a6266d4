"""The shipped LoRA and QLoRA digit recipes, for real: SmolLM2-135M-Instruct learns on a CPU through adapters.

Slow (a few minutes each on 2 cores, plus a one-time fetch and conversion of the model). Runs in CI.
The QLoRA run is also merged, and the merged model must answer the eval prompts as the trained one did.
"""

import pytest

from grpo_ext import cli
from tests.helpers import train_shipped

RECIPES = [
    # (shipped recipe, merge and compare greedy answers?)
    ("digit-lora", False),  # LoRA over the float32 base
    ("digit-qlora", True),  # LoRA over a 4-bit NF4 base; merged into the dequantized base
]


@pytest.mark.slow
@pytest.mark.parametrize("name,merge", RECIPES)
def test_adapter_recipe_learns(name, merge, tmp_path, no_hub, capsys):
    before, after, _ = train_shipped(name, tmp_path / "run", "digit_exact")
    assert after >= 0.8
    assert after - before >= 0.5
    assert (tmp_path / "run" / "final" / "adapter_config.json").is_file()
    if merge:
        capsys.readouterr()
        assert cli.main(["merge", str(tmp_path / "run"), "--out", str(tmp_path / "merged")]) == 0
        assert "8 identical to the trained model's" in capsys.readouterr().err
