"""The pre-flight and the evals draw from their own random streams: a run with them follows the same trajectory as
one without (the same first-step metrics and the same weights after training), on the tiny model."""

import json

import yaml

from grpo_ext import cli
from tests.helpers import resumable_doc


def test_same_first_steps_with_the_preflight_and_evals_on_and_off(tiny_model, digit_doc, tmp_path, no_hub):
    from safetensors.torch import load_file

    (tmp_path / "length.py").write_text(  # spread in every group, so each step moves the weights
        "def length(completions, **kwargs):\n    return [float(len(str(c))) for c in completions]\n"
    )
    start = load_file(tiny_model / "model.safetensors")
    runs = {}
    for label, diagnostics in (("on", True), ("off", False)):
        doc = resumable_doc(digit_doc, tiny_model, tmp_path / label, max_steps=2, num_generations=4)
        doc["training"].update(save_strategy="no", per_device_train_batch_size=8, max_completion_length=8, learning_rate=1e-3)
        doc["data"] = {
            "prompts": ["first prompt", "second prompt", "third prompt", "fourth prompt"],
            "eval_prompts": ["held out"],
        }
        doc["rewards"] = ["./length.py:length"]
        doc["health"] = {"preflight": "warn" if diagnostics else "off"}
        doc["eval"] = {"enabled": diagnostics, "samples": 3}
        path = tmp_path / f"{label}.yaml"
        path.write_text(yaml.safe_dump(doc))
        assert cli.main(["train", str(path)]) == 0
        summary = json.loads((tmp_path / label / "summary.json").read_text())
        assert ((summary.get("health") or {}).get("preflight") is not None) == diagnostics and (
            summary.get("eval_before") is not None
        ) == diagnostics
        lines = [json.loads(line) for line in (tmp_path / label / "metrics.jsonl").read_text().splitlines()]
        runs[label] = (lines, load_file(tmp_path / label / "final" / "model.safetensors"))
    (on_lines, on_weights), (off_lines, off_weights) = runs["on"], runs["off"]
    for key in ("loss", "reward", "completions/mean_length"):
        assert [line.get(key) for line in on_lines] == [line.get(key) for line in off_lines], key
    assert max(float((on_weights[k] - off_weights[k]).abs().max()) for k in off_weights) == 0.0
    assert max(float((on_weights[k] - start[k]).abs().max()) for k in start) > 1e-4  # training moved the weights
