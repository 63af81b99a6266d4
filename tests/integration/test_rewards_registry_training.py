"""A reward from each kind of source (registry entry point, file, module) trains in one tiny run."""

import json

import yaml

from grpo_ext import cli


def test_module_file_and_entry_point_rewards_train(installed, tiny_model, digit_doc, tmp_path, monkeypatch, no_hub):
    """A reward from each kind of source trains in one tiny run, each logged under its own name."""
    installed("kwpkg", {"keyword_reward": "kwpkg:keyword_reward"})
    (tmp_path / "my_rewards.py").write_text(
        "def brevity(completions, **kwargs):\n    return [1.0 / (1 + len(str(c))) for c in completions]\n"
    )
    mod = tmp_path / "site-mods"
    mod.mkdir()
    (mod / "my_pkg_rewards.py").write_text(
        "def shouting(completions, **kwargs):\n    return [float(str(c).isupper()) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(mod))
    doc = digit_doc
    doc["model"]["name"] = str(tiny_model)
    doc["training"].update(
        max_steps=1, per_device_train_batch_size=4, num_generations=4, max_completion_length=4, save_strategy="no"
    )
    doc["eval"]["enabled"] = False
    doc["rewards"] = ["keyword_reward", "./my_rewards.py:brevity", {"name": "my_pkg_rewards:shouting", "weight": 0.5}]
    doc["output_dir"] = str(tmp_path / "run")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(recipe)]) == 0
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert {"rewards/keyword_reward/mean", "rewards/brevity/mean", "rewards/shouting/mean"} <= set(line)
