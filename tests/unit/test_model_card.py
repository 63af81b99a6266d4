"""The model card `grpo-ext push` uploads, built from a hand-written run directory: front matter the Hub reads, the
sections and numbers of summary.json, the recipe as run, the loading example, and nothing shown as None."""

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from grpo_ext.results import model_card


def scores(mean, low, high, rate, rate_low, rate_high) -> dict:
    """One reward's eval entry as summary.json records it."""
    return {
        "mean": mean,
        "pass_rate": rate,
        "judged": 8,
        "pass_threshold": 1.0,
        "mean_ci": {"value": mean, "low": low, "high": high},
        "pass_rate_ci": {"value": rate, "low": rate_low, "high": rate_high},
        "pass_at": {"1": {"value": rate, "low": rate_low, "high": rate_high}},
    }


def eval_entry(mean, rate) -> dict:
    return {
        "rewards": {"digit_exact": scores(mean, mean - 0.1, mean + 0.1, rate, rate - 0.3, min(rate + 0.2, 1.0))},
        "prompts": 4,
        "samples": 8,
        "mean_length": 3.5,
        "examples": [{"prompt": "Reply with one digit.", "completions": ["7", "3"]}],
        "settings": {"samples": 2, "temperature": 0.7, "pass_threshold": 1.0, "seed": 0},
        "seconds": 1.0,
    }


SUMMARY = {
    "recipe": "digit.yaml",
    "model": "catalog alias 'smollm2-135m-instruct'",
    "versions": {"trl": "1.16.0", "transformers": "5.24.0", "torch": "2.13.0+cpu", "python": "3.11.7"},
    "status": "completed",
    "steps": 30,
    "train_seconds": 61.5,
    "reward_first": 0.125,
    "reward_last": 0.875,
    "eval_before": eval_entry(0.25, 0.25),
    "eval_after": eval_entry(0.875, 0.75),
    "processes": 1,
    "eval_change": {
        "digit_exact": {"difference": {"value": 0.5, "low": 0.2, "high": 0.8}, "verdict": "better: +0.50 [+0.20, +0.80]"}
    },
}

RECIPE = """\
model:
  name: smollm2-135m-instruct
  lora: null
data:
  prompts:
  - Reply with one digit.
  system_prompt: null
rewards:
- name: digit_exact
  weight: 1.0
  args: {}
training:
  max_steps: 30
  learning_rate: 3.0e-05
  num_generations: 8
  beta: 0.0
algorithm: dr_grpo
output_dir: runs/digit
seed: 0
"""

LORA_CONFIG = {"base_model_name_or_path": "/home/me/.cache/grpo_ext/models/smollm2", "peft_type": "LORA", "r": 8}


def make_run(
    root: Path,
    summary: dict | None = None,
    recipe: str = RECIPE,
    *,
    adapter: bool = False,
    figures: tuple[str, ...] = ("curves.png",),
) -> Path:
    """A finished run directory by hand: summary.json, recipe.yaml, final/ (a model or an adapter), plots."""
    run = root / "run"
    (run / "final").mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(SUMMARY if summary is None else summary))
    (run / "recipe.yaml").write_text(recipe)
    if adapter:
        (run / "final" / "adapter_config.json").write_text(json.dumps(LORA_CONFIG))
    else:
        (run / "final" / "config.json").write_text("{}")
    (run / "final" / "chat_template.jinja").write_text("{{ messages }}")
    for name in figures:
        (run / name).write_bytes(b"\x89PNG\r\n")
    return run


def front_matter(card: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert match, card[:200]
    return yaml.safe_load(match.group(1))


def python_block(card: str) -> str:
    return re.search(r"```python\n(.*?)```", card, re.S).group(1)


def test_front_matter_for_the_hub(tmp_path):
    meta = front_matter(model_card.model_card(make_run(tmp_path), "me/digit-grpo"))
    assert meta == {
        "base_model": "HuggingFaceTB/SmolLM2-135M-Instruct",  # the catalog alias names the hub model of its GGUF file
        "library_name": "transformers",
        "license": "apache-2.0",  # known for the catalog alias, in the Hub's spelling
        "pipeline_tag": "text-generation",
        "tags": ["grpo", "trl", "grpo_ext"],
    }


@pytest.mark.parametrize(
    "name, base, license_id",
    [
        # a hub id is the base as written; its license is not known offline, so none is claimed
        ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", None),
        # a local folder is no hub model: no base_model at all
        ("./my-model", None, None),
    ],
)
def test_base_model_and_license(tmp_path, name, base, license_id):
    meta = front_matter(model_card.model_card(make_run(tmp_path, recipe=RECIPE.replace("smollm2-135m-instruct", name))))
    assert meta.get("base_model") == base and meta.get("license") == license_id


def test_sections_and_numbers(tmp_path):
    card = model_card.model_card(make_run(tmp_path), "me/digit-grpo")
    assert model_card.MARKER in card.split("---\n", 2)[2].splitlines()[1]  # first line after the front matter
    for heading in ("# digit-grpo", "## Rewards", "## Training", "## Evaluation", "## Training curves", "## How to use it"):
        assert f"\n{heading}\n" in card, heading
    for fact in (
        "- `digit_exact` (weight 1): 1.0 when the completion",  # the reward's own description
        "- algorithm: `dr_grpo`",
        "- steps: 30",
        "- learning rate: 3e-05",
        "- completions per prompt (num_generations): 8",
        "- training time: 61.5 s",
        "- reward during training: 0.125 at the first step, 0.875 at the last",
        "4 held-out prompts, 2 samples each, temperature 0.7",
        "| digit_exact | 0.250 ±0.100 | 0.250 [-0.05, 0.45] | 0.875 ±0.100 | 0.750 [0.45, 0.95] |",
        "After vs before, pass rate of digit_exact: better: +0.50 [+0.20, +0.80]",
        "Intervals are 95%",
        "| trl | 1.16.0 |",
        "| torch | 2.13.0+cpu |",
        "![reward, each reward function",
        "](curves.png)",
    ):
        assert fact in card, fact
    assert "None" not in card


def test_the_recipe_block_is_the_file(tmp_path):
    run = make_run(tmp_path)
    card = model_card.model_card(run)
    block = re.search(r"```yaml\n(.*?)\n```\n", card, re.S).group(1)
    assert block + "\n" == (run / "recipe.yaml").read_text()


def test_a_recipe_with_backticks_keeps_its_block(tmp_path):
    """A prompt holding a code fence cannot end the card's yaml block: the fence is longer than any run inside."""
    recipe = RECIPE.replace("- Reply with one digit.", "- 'Answer in a ```python block.'")
    run = make_run(tmp_path, recipe=recipe)
    block = re.search(r"````yaml\n(.*?)\n````\n", model_card.model_card(run), re.S).group(1)
    assert block + "\n" == recipe


def test_loading_a_full_model(tmp_path):
    code = python_block(model_card.model_card(make_run(tmp_path), "me/digit-grpo"))
    ast.parse(code)
    assert 'AutoModelForCausalLM.from_pretrained("me/digit-grpo")' in code and "peft" not in code
    assert '"content": "Reply with one digit."' in code  # an eval prompt, in the chat template's messages


def test_loading_a_lora_adapter_uses_peft(tmp_path):
    card = model_card.model_card(make_run(tmp_path, adapter=True), "me/digit-lora")
    code = python_block(card)
    ast.parse(code)
    assert "from peft import PeftModel" in code
    assert 'base = AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")' in code
    assert 'PeftModel.from_pretrained(base, "me/digit-lora")' in code
    assert front_matter(card)["library_name"] == "peft"  # the Hub then shows it as an adapter of base_model
    assert "A LoRA adapter trained with GRPO" in card


EMPTY_RUN = [
    # no eval ran: no Evaluation section, no table
    {**SUMMARY, "eval_before": None, "eval_after": None, "eval_change": {}},
    # a run that logged nothing more than its start
    {"recipe": "digit.yaml", "status": "completed", "steps": 2, "train_seconds": None, "reward_first": None},
    # summary.json holds no mapping
    [],
]


@pytest.mark.parametrize("summary", EMPTY_RUN)
def test_missing_pieces_are_left_out(tmp_path, summary):
    card = model_card.model_card(make_run(tmp_path, summary, figures=()))
    assert "None" not in card and "null" not in card.split("```yaml")[0]
    assert "## Evaluation" not in card and "## Training curves" not in card
    assert "## Training\n" in card and "## Recipe\n" in card
    ast.parse(python_block(card))


def test_damaged_recipe_gives_a_card_without_it(tmp_path):
    run = make_run(tmp_path, recipe="model: [unclosed\n")
    card = model_card.model_card(run)
    assert "## Recipe" not in card and "None" not in card
    assert front_matter(card)["library_name"] == "transformers"


def test_every_plot_in_the_run_is_shown(tmp_path):
    card = model_card.model_card(make_run(tmp_path, figures=("curves.png", "eval_curve.png")))
    assert "](curves.png)" in card and "![held-out pass rate against the step of each checkpoint](eval_curve.png)" in card
