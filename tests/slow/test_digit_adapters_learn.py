"""The shipped LoRA and QLoRA digit recipes, for real: SmolLM2-135M-Instruct learns on a CPU through adapters.

Slow (a minute or two each on 2 cores, plus a one-time fetch and conversion of the model). Runs in CI.
The LoRA recipe runs at float32 (what a CPU without native bf16 computes in) and, on a CPU with native bf16, under
bf16 autocast too, so that CI fails when either precision stops learning. The QLoRA run, which computes in float32
on every CPU, is also merged, and the merged model must answer the eval prompts as the trained one did.
"""

import pytest

from grpo_ext import cli
from grpo_ext.run.hardware import cpu_bf16
from tests.helpers import train_shipped

BF16 = pytest.mark.skipif(cpu_bf16() is None, reason="this CPU has no native bf16 (avx512_bf16 or amx_bf16)")
RECIPES = [
    # (shipped recipe, its precision, merge and compare greedy answers?)
    pytest.param("digit-lora", "training.bf16=false", False, id="lora-float32"),  # LoRA over the float32 base
    pytest.param("digit-lora", "training.bf16=true", False, id="lora-bf16", marks=BF16),
    pytest.param("digit-qlora", "training.bf16=false", True, id="qlora-float32"),  # over a 4-bit NF4 base; merged
]


@pytest.mark.slow
@pytest.mark.parametrize("name,precision,merge", RECIPES)
def test_adapter_recipe_learns(name, precision, merge, tmp_path, no_hub, capsys):
    before, after, _ = train_shipped(name, tmp_path / "run", "digit_exact", (precision,))
    assert after >= 0.8
    assert after - before >= 0.5
    assert (tmp_path / "run" / "final" / "adapter_config.json").is_file()
    if merge:
        capsys.readouterr()
        assert cli.main(["merge", str(tmp_path / "run"), "--out", str(tmp_path / "merged")]) == 0
        assert "8 identical to the trained model's" in capsys.readouterr().err
