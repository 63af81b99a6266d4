"""A GRPO variant by name (``algorithm:``): the installed TRL's GRPOConfig accepts each usable preset, and one trains the
tiny model and the run records it."""

import json

import pytest
import yaml
from packaging.version import Version

from grpo_ext.recipe import validate
from grpo_ext.run import trainer
from grpo_ext.settings import compat, variants
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


@pytest.mark.parametrize("name", list(variants.VARIANTS))
def test_every_preset_builds_the_installed_grpo_config(name, digit_doc, tmp_path):
    """The installed TRL's own GRPOConfig accepts each usable preset (real field set, no table)."""
    if compat.trl_version() < Version(variants.needs(name)):
        pytest.skip(f"trl {compat.trl_version()} is older than {name} needs; test_preset_on_oldest_and_newest_trl covers it")
    from trl import GRPOConfig

    recipe = validate(bare_digit(digit_doc, algorithm=name, output_dir=str(tmp_path)))
    kwargs, _, _ = trainer.config_kwargs(recipe, present=trainer.config_fields())
    config = GRPOConfig(**kwargs, use_cpu=True, bf16=False)
    for key, (value, _) in variants.VARIANTS[name].settings.items():
        assert compat.canonical(key, getattr(config, key)) == value
