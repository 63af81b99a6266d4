"""A tool of the user's own whose call fits max_completion_length and whose call and result do not: TRL runs the call,
rolls its result back and ends the sample on the call, counting it as a call that worked. The pre-flight (its
rollouts and the worked example of data.examples held against the budget), the progress line, report.md and
``grpo-ext doctor`` count the dropped results and name the budget; with room for the result nothing is dropped.
A scripted policy stands in for the model (``scripted_model``; the chat template, TRL's parser and tool loop, the
tool and the rewards are real)."""

import json
import re

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import compat
from tests.helpers import chatml_turn, tool_call

pytestmark = pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")

FACTS = '''
def facts(topic: str) -> str:
    """Facts about a city.

    Args:
        topic: the city to look up
    """
    return f"{topic} is a city in France with a long history."
'''

CITIES = ["Paris", "Lyon", "Nice", "Lille"]


def policy(prompt: str) -> str:
    """Asked to look a city up, it calls facts on it; after a result it answers with the result's first word."""
    turn, result = chatml_turn(prompt)
    if result is not None:
        return f"Answer: {result.split()[0]}<|im_end|>"
    city = re.search(r"Look up (\w+)\.", turn).group(1)
    return tool_call("facts", topic=city) + "<|im_end|>"


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    # the tiny tokenizer spells the call in about 70 tokens and its result, with the next turn's opening, in about 70
    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


def facts_recipe(tmp_path, model, budget: int) -> dict:
    (tmp_path / "facts.py").write_text(FACTS)
    rows = [{"prompt": f"Look up {c}.", "answer": c} for c in CITIES]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    return {
        "model": {"name": str(model)},
        "data": {
            "file": "rows.jsonl",
            "eval_file": "held.jsonl",
            "examples": [
                {"role": "user", "content": "Look up Rome."},
                {"role": "assistant", "tool_calls": [{"name": "facts", "arguments": {"topic": "Rome"}}]},
                {"role": "tool", "name": "facts", "content": "Rome is a city in Italy with a long history."},
                {"role": "assistant", "content": "Answer: Rome"},
            ],
        },
        "tools": ["facts.py:facts"],
        "rewards": ["answer_match", {"name": "tool_success", "weight": 0.2}],
        "training": {
            "max_steps": 2,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": budget,
            "max_tool_calling_iterations": 1,
            "save_strategy": "no",
        },
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 2},
        "output_dir": str(tmp_path / "run"),
    }


DROPPED = "tool results dropped: the conversation would pass max_completion_length"

BUDGETS = [
    # (max_completion_length, results dropped): 96 holds the call and not its result; 320 holds both and the answer
    (96, True),
    (320, False),
]


@pytest.mark.parametrize(("budget", "dropped"), BUDGETS)
def test_results_trl_dropped_are_counted_and_named(budget, dropped, tmp_path, chatml_model, no_hub, scripted_model, capsys):
    scripted_model(policy)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(facts_recipe(tmp_path, chatml_model, budget)))
    assert cli.main(["train", str(path)]) == 0
    err = capsys.readouterr().err
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    report = (run / "report.md").read_text()
    healthy = cli.main(["doctor", str(run)]) == 0
    doctor = capsys.readouterr().out
    if not dropped:
        assert all("result dropped:" not in text and DROPPED not in text for text in (err, report, doctor))
        assert "| before | 4 | 100% | 0% | 0% | 1 | 0 |" in report
        assert summary["eval_before"]["rewards"]["tool_success"]["pass_rate"] == 1.0  # every result came back
        return
    # the pre-flight: every sample's result dropped, and the worked example held against the budget before sampling
    assert (
        "pre-flight: tools: 4 of 4 samples called one (100%), 0 wrote a call that could not be read, 0 got an error "
        f"back; 1 calls a sample; 4 {DROPPED} (96)" in err
    )
    (worked,) = re.findall(r"warning before step 1: a worked call of data\.examples and its result take (\d+) tokens", err)
    assert int(worked) > 96 and "more than max_completion_length (96): TRL will drop the result" in err
    assert f"health: warning before step 1: 4 {DROPPED} (96), 100% of the calls" in err
    # training: TRL's failure_frequency says no call failed; the progress line and the watchdog say what happened
    assert re.findall(r"step \d/2 .* (\d) tool results dropped", err) == ["2", "2"]
    assert "health: warning at step 1: 2 tool results dropped over the last 1 step, 100% of the calls" in err
    assert summary["tools"]["failed_share_mean"] == 0.0 and summary["tools"]["results_dropped"] == 4
    assert summary["eval_before"]["tools"]["dropped"] == 4 and summary["health"]["preflight"]["tools"]["dropped"] == 4
    assert summary["eval_before"]["rewards"]["tool_success"]["pass_rate"] == 0.0  # no result ever came back
    # report.md: the Tools section counts them, the Health section names them, the transcripts mark each one
    assert f"0% of the calls failed on the mean step; 4 {DROPPED} (96) (TRL counts these calls as ones that worked)." in report
    assert f"- eval before: 4 {DROPPED} (96)" in report
    pre = "Tools in the pre-flight: 100% of the samples called one, 0% wrote a call that could not be read, 0% got an error"
    assert f"{pre} back; 4 {DROPPED} (96)." in report
    assert "\\n← (result dropped: the conversation would pass max_completion_length (96))" in report
    # the doctor: the count from metrics.jsonl and the pre-flight, the remedy, and not healthy
    assert f"tools: 8 {DROPPED} (96) (4 in training, 4 in the pre-flight); remedy: raise training.max_completion_length" in doctor
    assert not healthy and "verdict: not healthy" in doctor
