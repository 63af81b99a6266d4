"""A reward that is a model: a tiny sequence-classification model built here scores completions in training."""

import json
import pickle

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import load
from grpo_ext.rewards import reward_model
from tests.helpers import tiny_doc


@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory, tiny_model):
    """A random one-output Llama reward head over the tiny model's tokenizer, saved as a checkpoint."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = LlamaConfig.from_pretrained(tiny_model, num_labels=1, pad_token_id=tokenizer.pad_token_id)
    path = tmp_path_factory.mktemp("rm") / "reward-model"
    LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_the_shorthand_names_the_reward_and_a_path_is_read_from_the_recipes_folder(tiny_reward_model, tmp_path, digit_doc):
    doc = tiny_doc(digit_doc, tiny_reward_model, tmp_path / "run")
    doc["rewards"] = [{"model": "../" + tiny_reward_model.parent.name + "/" + tiny_reward_model.name, "weight": 0.5}]
    recipe_path = tiny_reward_model.parent.parent / "here" / "r.yaml"
    recipe_path.parent.mkdir(exist_ok=True)
    recipe_path.write_text(yaml.safe_dump(doc))
    entry = load(str(recipe_path)).rewards[0]
    assert entry.name == "reward_model" and entry.weight == 0.5
    assert entry.args == {"model": str(tiny_reward_model.resolve())}


def test_a_malformed_shorthand_is_one_line(tmp_path, digit_doc, tiny_model):
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["rewards"] = [{"model": "x", "name": "digit_exact"}]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(RecipeError, match=r"rewards\[0\]\.model: a reward model is \{model: PATH_OR_ID\}"):
        load(str(tmp_path / "r.yaml"))


def test_scores_are_the_heads_logits_in_batches_and_it_pickles_unloaded(tiny_reward_model):
    small = reward_model.reward_model(str(tiny_reward_model), batch_size=2)
    prompts = [[{"role": "user", "content": "Pick a digit."}]] * 3
    completions = [[{"role": "assistant", "content": c}] for c in ("7", "seven", "I pick 7")]
    scores = small(prompts=prompts, completions=completions)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores) and len(set(scores)) == 3
    whole = reward_model.reward_model(str(tiny_reward_model), batch_size=8)(prompts=prompts, completions=completions)
    assert whole == pytest.approx(scores, abs=1e-5)  # padding in a batch leaves each score as it was
    again = pickle.loads(pickle.dumps(small))
    assert again._loaded is None and again(prompts=prompts, completions=completions) == pytest.approx(scores, abs=1e-6)
    with pytest.raises(ValueError, match="label 3: .* has 1 output"):
        reward_model.reward_model(str(tiny_reward_model), label=3)(prompts=prompts[:1], completions=completions[:1])


def test_two_steps_with_a_reward_model(tiny_model, tiny_reward_model, digit_doc, tmp_path, no_hub):
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["rewards"] = [{"model": str(tiny_reward_model)}, "digit_exact"]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tmp_path / "r.yaml")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    means = [line.get("rewards/reward_model/mean") for line in lines if "rewards/digit_exact/mean" in line]
    assert len(means) == 2 and all(isinstance(m, float) for m in means)  # the model's scores reached the trainer


def test_a_reward_model_that_is_not_there_stops_before_anything_loads(tmp_path, digit_doc, tiny_model, no_hub, capsys):
    """A missing local path is refused by validation; a folder that holds no model stops train with one line
    before the policy loads, and nothing is written (a hub id that cannot be fetched goes the same way, after
    the hub's own retries)."""
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["rewards"] = [{"model": "./no-such-model"}]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(RecipeError, match=r"rewards\[0\]\.model: .*no-such-model does not exist"):
        load(str(tmp_path / "r.yaml"))
    (tmp_path / "empty").mkdir()
    doc["rewards"] = [{"model": "./empty"}]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tmp_path / "r.yaml")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: reward_model: {tmp_path / 'empty'} cannot be loaded: "), line
    assert not (tmp_path / "run").exists()
