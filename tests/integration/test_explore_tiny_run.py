"""The end boost (``explore:``) seen end to end in the completions' lengths of a tiny run."""

import json

import yaml

from grpo_ext import cli
from tests.helpers import tiny_doc


def test_tiny_run_samples_short_while_boosted(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    # A huge boost from the reply's first token ends every boosted completion at its second token; the random
    # tiny model left to itself almost never samples the end token, so step 2 runs to max_completion_length.
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", explore={"end_boost": 1000.0, "start": 0, "steps": 1})
    doc["training"]["max_completion_length"] = 6
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path), "eval.enabled=false", "training.save_strategy=no"]) == 0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    lengths = [line["completions/mean_length"] for line in lines]
    assert lengths[0] <= 2 < lengths[1], lengths
    err = capsys.readouterr().err
    assert "explore: end-of-reply boost x1000.0 a token from the reply's first token, for the first 1 step" in err
    assert "explore: end-of-reply boost off from step 2" in err
