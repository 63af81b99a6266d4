"""The shipped digit recipe, for real: SmolLM2-135M-Instruct learns to answer with one digit on a CPU.

Slow (about 3 minutes on 2 cores, plus a one-time fetch and conversion of the model). Runs in CI.
"""

import pytest

from tests.helpers import train_shipped


@pytest.mark.slow
def test_digit_recipe_learns(tmp_path, no_hub):
    before, after, summary = train_shipped("digit", tmp_path / "run", "digit_exact")
    assert after >= 0.8
    assert after - before >= 0.5
    assert summary["reward_last"] > summary["reward_first"]
