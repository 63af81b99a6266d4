"""A GRPO variant by name (``algorithm:``) trains the tiny model and the run records it."""

import json

import yaml

from grpo_ext.recipe import validate
from tests.helpers import bare_digit, tiny_doc


def test_a_preset_trains_and_the_run_records_it(tiny_model, digit_doc, tmp_path, no_hub):
    """The original GRPO (beta > 0: a reference model and a KL metric) trains the tiny model; the run's recipe
    keeps the algorithm and the keys it set."""
    import grpo_ext

    doc = tiny_doc(bare_digit(digit_doc, algorithm="grpo"), tiny_model, tmp_path / "run")
    doc["training"]["max_steps"] = 1
    summary = grpo_ext.train(validate(doc), overwrite=True)
    assert summary["status"] == "completed"
    recorded = yaml.safe_load((tmp_path / "run" / "recipe.yaml").read_text())
    assert recorded["algorithm"] == "grpo" and recorded["training"]["beta"] == 0.04
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any("kl" in m for m in metrics)
