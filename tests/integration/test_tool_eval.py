"""The eval and the pre-flight of a recipe with tools sample whole conversations through TRL's tool loop, as
training does: a scripted policy (the model's replies scripted, ``scripted_model``; every other part real: the chat
template, TRL's parser, the calculator, the rewards) that calls the calculator and answers with its result passes
every eval sample, which a single-reply eval would fail; one that never calls it is named by the pre-flight. The
run's summary.json and report.md say how the tools were used."""

import json
import re
import tempfile
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import compat
from grpo_ext.verbs import evaluate, sweep
from grpo_ext.verbs import filter as pass_filter
from tests.helpers import chatml_turn, tool_call

pytestmark = pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")

ROWS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in [(3, 4), (5, 2), (6, 6), (1, 8), (7, 9), (2, 2)]]
HELD_OUT = [{"prompt": "What is 12 + 30?", "answer": "42"}, {"prompt": "What is 8 + 9?", "answer": "17"}]


def scripted(calls: bool):
    """A policy that, asked 'What is A + B?', calls the calculator on 'A + B' (or, without ``calls``, guesses 0), and
    after a tool result answers with it; each reply ends in <|im_end|>, as a model's would."""

    def reply(prompt: str) -> str:
        turn, result = chatml_turn(prompt)
        question = re.search(r"What is (\d+ \+ \d+)\?", turn)
        if result is not None:
            text = f"Answer: {result}"
        elif calls and question:
            text = tool_call("calculator", expression=question.group(1))
        else:
            text = "Answer: 0"
        return text + "<|im_end|>"

    return reply


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    # room for a tool's schema and four calls, which the tiny tokenizer spells in about 300 and 80 tokens each
    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


def tool_recipe(tmp_path, model) -> dict:
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in HELD_OUT))
    return {
        "model": {"name": str(model)},
        "data": {"file": "sums.jsonl", "eval_file": "held.jsonl"},
        "tools": ["calculator"],
        "rewards": ["math_accuracy", {"name": "tool_success", "weight": 0.2}],
        "training": {
            "max_steps": 1,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": 200,
            "max_tool_calling_iterations": 1,
            "save_strategy": "no",
        },
        "eval": {"samples": 2, "max_prompts": 2},  # both held-out rows: unset, a 1-step tool run scores one (recipe/quick.py)
        "health": {"preflight_prompts": 2},
        "output_dir": str(tmp_path / "run"),
    }


@pytest.mark.parametrize("calls", [True, False])
def test_eval_and_preflight_run_the_tool_loop(calls, tmp_path, chatml_model, no_hub, scripted_model, capsys):
    scripted_model(scripted(calls))
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(tool_recipe(tmp_path, chatml_model)))
    assert cli.main(["train", str(path)]) == 0
    err = capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    before = summary["eval_before"]
    pre = summary["health"]["preflight"]
    assert before["rewards"]["math_accuracy"]["pass_rate"] == (1.0 if calls else 0.0)  # the calculator's sums
    assert before["rewards"]["tool_success"]["pass_rate"] == (1.0 if calls else 0.0)  # read off TRL's tool turns
    assert "pre-flight: playing 2 prompts x 2 conversations with the tool loop" in err
    assert before["tools"]["called"] == pre["tools"]["called"] == (1.0 if calls else 0.0)
    assert before["tools"]["error_back"] == 0.0 and before["samples"] == 4
    assert summary["tools"]["calls_per_completion_first"] == (1.0 if calls else 0.0)  # TRL's count in training
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Tools" in report
    if calls:
        assert '→ calculator({\\"expression\\": \\"12 + 30\\"})\\n← 42\\nAnswer: 42' in report
        assert "eval before: tools: 4 of 4 samples called one (100%)" in err
    else:
        assert "health: warning before step 1: none of the 4 samples called a tool" in err
        assert pre["findings"][-1]["rule"] == "preflight_tools_unused"


def bisecting(prompt: str) -> str:
    """A policy that plays the guessing game by halving the range after each answer, as a scripted model."""
    game = prompt.rsplit("I am thinking of", 1)[-1]
    low, high = map(int, re.search(r"from (\d+) to (\d+)", game).groups())
    guesses = [int(g) for g in re.findall(r'"number": (\d+)', game)]
    answers = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", game, re.S)
    for g, answer in zip(guesses, answers, strict=False):
        low, high = (g + 1, high) if answer == "higher" else (low, g - 1) if answer == "lower" else (g, g)
    if answers and answers[-1].startswith("right"):
        return "Found it.<|im_end|>"
    return f"<tool_call>\n{json.dumps({'name': 'guess', 'arguments': {'number': (low + high) // 2}})}\n</tool_call><|im_end|>"


needs_environment = pytest.mark.skipif(
    compat.tools_problem("environment") is not None, reason="environments need trl>=1.8, transformers>=5.2"
)


@needs_environment
def test_the_library_game_is_played_and_scored_by_its_reward(tmp_path, chatml_model, no_hub, scripted_model, capsys):
    """``guess_number`` with ``data.source: guess`` and no reward but the game's own: a policy that halves the range
    wins every game within 4 guesses of 1 to 9, in the eval as in training."""
    scripted_model(bisecting)
    doc = tool_recipe(tmp_path, chatml_model)
    doc.pop("tools")
    doc["data"] = {"source": "guess", "source_args": {"train": 4, "held_out": 3}}
    doc["environment"] = "guess_number"
    doc["rewards"] = []
    doc["training"].update(max_tool_calling_iterations=4, max_completion_length=600)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    assert "rewards: GuessNumber (the environment's get_reward, weight 1.0)" in capsys.readouterr().out
    assert cli.main(["train", str(path)]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["eval_before"]["rewards"]["GuessNumber"]["pass_rate"] == 1.0
    assert summary["health"]["preflight"]["rewards"]["GuessNumber"]["mean"] == 1.0
    assert 1 <= summary["eval_before"]["tools"]["calls_per_sample"] <= 4


@pytest.mark.parametrize("calls", [True, False])
def test_grpo_ext_eval_plays_the_tool_loop(calls, tmp_path, chatml_model, no_hub, scripted_model, capsys):
    """``grpo-ext eval`` of a tool recipe scores what the run's own eval scores: the policy that calls the calculator
    passes every sample, the one that guesses none; a single-reply eval would fail both alike."""
    scripted_model(scripted(calls))
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(tool_recipe(tmp_path, chatml_model)))
    scratch = set(Path(tempfile.gettempdir()).glob("grpo_ext_eval_*"))
    result = evaluate.evaluate_models(str(path), [str(chatml_model)], out=tmp_path / "eval")
    assert set(Path(tempfile.gettempdir()).glob("grpo_ext_eval_*")) <= scratch  # the sampler's output folder is gone
    scores = result["models"][str(chatml_model)]
    assert scores["rewards"]["math_accuracy"]["pass_rate"] == (1.0 if calls else 0.0)
    assert scores["tools"]["called"] == (1.0 if calls else 0.0) and scores["samples"] == 4
    err = capsys.readouterr().err
    assert "playing 2 prompts x 2 conversations with the tool loop" in err
    assert "tools: the model's ChatML template cannot show tools" in err  # the template the run trained with


def test_the_checkpoint_sweep_plays_the_tool_loop(tmp_path, chatml_model, no_hub, scripted_model):
    scripted_model(scripted(True))
    doc = tool_recipe(tmp_path, chatml_model)
    doc["training"].update(max_steps=2, save_strategy="steps", save_steps=1, save_total_limit=None)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    curve = sweep.sweep(str(path), tmp_path / "run")
    saved = [p for p in curve["points"] if p["checkpoint"].startswith("checkpoint-")]
    assert [p["step"] for p in saved] == [1, 2]
    assert [p["rewards"]["math_accuracy"]["pass_rate"] for p in saved] == [1.0, 1.0]
    assert all(p["tools"]["called"] == 1.0 for p in saved)


@pytest.mark.parametrize("calls", [True, False])
def test_filter_plays_the_tool_loop(calls, tmp_path, chatml_model, no_hub, scripted_model):
    """filter judges each row by conversations played as training plays them: the policy that calls the calculator
    passes every row, the one that guesses none."""
    scripted_model(scripted(calls))
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(tool_recipe(tmp_path, chatml_model)))
    summary = pass_filter.filter_rows(str(path), k=2, keep="0:1", out=tmp_path / "kept.jsonl")
    assert summary["pass_rates"] == [1.0 if calls else 0.0] * len(ROWS)
    assert summary["reward"] == "math_accuracy" and summary["kept"] == len(ROWS)


@needs_environment
def test_filter_reads_the_environments_reward(tmp_path, chatml_model, no_hub, scripted_model):
    scripted_model(bisecting)
    doc = tool_recipe(tmp_path, chatml_model)
    doc.pop("tools")
    doc["data"] = {"source": "guess", "source_args": {"train": 3, "held_out": 2}}
    doc.update(environment="guess_number", rewards=[])
    doc["training"].update(max_tool_calling_iterations=4, max_completion_length=600)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    summary = pass_filter.filter_rows(str(path), k=2, keep="0:1", out=tmp_path / "kept.jsonl")
    assert summary["reward"] == "GuessNumber" and summary["pass_rates"] == [1.0, 1.0, 1.0]  # halving wins every game
