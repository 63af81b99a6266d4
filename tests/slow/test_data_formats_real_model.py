"""A user's own data on the real model: the shipped conversational recipe trains one step."""

import json

from grpo_ext import cli
from tests.helpers import ROOT


def test_real_model_trains_on_a_conversational_jsonl(tmp_path, no_hub):
    """The shipped conversational recipe, with its held-out rows and math_accuracy, on SmolLM2 (one step)."""
    over = [
        "training.max_steps=1",
        "training.max_completion_length=8",
        "eval.samples=1",
        "data.eval_size=2",
        f"output_dir={tmp_path / 'run'}",
    ]
    assert cli.main(["train", str(ROOT / "recipes" / "arith-chat.yaml"), *over]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["eval_before"]["prompts"] == 2 and "math_accuracy" in summary["eval_after"]["rewards"]
