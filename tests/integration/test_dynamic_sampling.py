"""Dynamic sampling (groups.dynamic_sampling) on the tiny model: groups whose rewards have no spread are replaced by
groups for new prompts, so the step trains on informative groups only; off, the same recipe trains on flat groups
(their rows show up as skipped). The joining of scored batches is checked by hand in tests/unit/test_dynamic_join.py."""

import json

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import validate
from grpo_ext.settings import compat, variants
from tests.helpers import jsonl, tiny_doc

# A prompt with "same" in it scores 1.0 for every completion: a flat group. Any other scores 0, 1, 0, 1 across
# the completions of a call, so its group of 4 has spread whatever the tiny model writes.
REWARD = """
import json

def split(prompts, completions, **kwargs):
    with open({out!r}, "a") as f:
        f.write(json.dumps(len(prompts)) + "\\n")
    return [1.0 if "same" in str(p) else float(i % 2) for i, p in enumerate(prompts)]
"""


def doc_for(tmp_path, digit_doc, tiny_model, dynamic: bool) -> dict:
    (tmp_path / "split.py").write_text(REWARD.format(out=str(tmp_path / "calls.jsonl")))
    rows = [{"prompt": f"say the same word {i}"} for i in range(6)] + [{"prompt": f"count to {i}"} for i in range(6)]
    jsonl(tmp_path / "rows.jsonl", rows)
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["data"] = {"file": "rows.jsonl"}
    doc["eval"]["enabled"] = False
    doc["rewards"] = ["split.py:split"]
    doc["training"].update(max_steps=3, per_device_train_batch_size=8, num_generations=4, beta=0.0, loss_type="dapo")
    doc["groups"] = {"dynamic_sampling": dynamic, "max_extra_rounds": 4}
    return doc


def steps(run) -> list[dict]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if "skipped_rows" in x]


def test_flat_groups_are_replaced_and_the_step_trains_on_spread_only(tmp_path, digit_doc, tiny_model, no_hub, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc_for(tmp_path, digit_doc, tiny_model, dynamic=True)))
    assert cli.main(["train", str(path)]) == 0
    out = capsys.readouterr().err
    assert "groups: groups without reward spread are replaced by new prompts' (up to 4 extra rounds a batch)" in out
    records = steps(tmp_path / "run")
    assert len(records) == 3
    assert any(r["groups/dropped"] > 0 for r in records)  # half the prompts are flat: some first draw had one
    for r in records:
        if r["groups/flat_kept"] == 0:  # every group informative: no row has zero advantage to skip
            assert r["skipped_rows"] == 0
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert sum(calls) > 3 * 8  # extra rounds scored more completions than the three batches of 8
    assert any(f"dropped {r['groups/dropped']:.0%}" in out for r in records if r["groups/dropped"] > 0)


def test_off_the_same_recipe_trains_on_flat_groups(tmp_path, digit_doc, tiny_model, no_hub):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc_for(tmp_path, digit_doc, tiny_model, dynamic=False)))
    assert cli.main(["train", str(path)]) == 0
    records = steps(tmp_path / "run")
    assert all("groups/dropped" not in r for r in records)
    assert any(r["skipped_rows"] > 0 for r in records)  # a flat group's rows reached the loss (and were skipped)
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert sum(calls) == 3 * 8


CASES = [
    # (algorithm, groups section, dynamic sampling after validation)
    (None, {}, False),  # off unless asked
    ("dapo", {}, True),  # DAPO's preset turns it on
    ("dapo", {"dynamic_sampling": False}, False),  # the recipe's own value wins
    ("grpo", {"dynamic_sampling": True}, True),
]


@pytest.mark.parametrize("algorithm,groups,expected", CASES)
def test_dapo_turns_it_on(algorithm, groups, expected, digit_doc):
    if algorithm == "dapo" and not compat.trl_at_least(variants.needs("dapo")):
        pytest.skip(f"algorithm: dapo needs trl>={variants.needs('dapo')}; the refusal is tests/unit/test_algorithms.py's")
    if algorithm:
        digit_doc["algorithm"] = algorithm
    digit_doc["groups"] = groups
    assert validate(digit_doc).groups.dynamic_sampling is expected


def test_zero_extra_rounds_is_refused(digit_doc):
    digit_doc["groups"] = {"dynamic_sampling": True, "max_extra_rounds": 0}
    with pytest.raises(RecipeError, match="groups.max_extra_rounds"):
        validate(digit_doc)
