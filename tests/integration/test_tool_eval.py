"""The eval and the pre-flight of a recipe with tools sample whole conversations through TRL's tool loop, as
training does: a scripted policy (the trainer's single-turn generation replaced, every other part real: the chat
template, TRL's parser, the calculator, the rewards) that calls the calculator and answers with its result passes
every eval sample, which a single-reply eval would fail; one that never calls it is named by the pre-flight. The
run's summary.json and report.md say how the tools were used."""

import json
import re

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import compat

pytestmark = pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")

ROWS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in [(3, 4), (5, 2), (6, 6), (1, 8), (7, 9), (2, 2)]]
HELD_OUT = [{"prompt": "What is 12 + 30?", "answer": "42"}, {"prompt": "What is 8 + 9?", "answer": "17"}]


def scripted(calls: bool):
    """A policy that, asked 'What is A + B?', calls the calculator on 'A + B' (or, without ``calls``, guesses 0), and
    after a tool result answers with it; its replies are tokenized as a model's would be, ending in <|im_end|>."""

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        tokenizer = self.processing_class
        out = []
        for ids in prompt_ids:
            turn = tokenizer.decode(ids).rsplit("<|im_start|>user", 1)[-1]
            result = re.search(r"<tool_response>\n(.*?)\n</tool_response>", turn, re.S)
            question = re.search(r"What is (\d+ \+ \d+)\?", turn)
            if result:
                reply = f"Answer: {result.group(1)}"
            elif calls and question:
                call = json.dumps({"name": "calculator", "arguments": {"expression": question.group(1)}})
                reply = f"<tool_call>\n{call}\n</tool_call>"
            else:
                reply = "Answer: 0"
            out.append(tokenizer.encode(reply + "<|im_end|>", add_special_tokens=False))
        return out, None

    return generate


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    # room for the calculator's schema, which the tiny tokenizer spells in about 300 tokens
    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=1024)


def tool_recipe(tmp_path, model) -> dict:
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in HELD_OUT))
    return {
        "model": {"name": str(model)},
        "data": {"file": "sums.jsonl", "eval_file": "held.jsonl"},
        "tools": ["calculator"],
        "rewards": ["math_accuracy"],
        "training": {
            "max_steps": 1,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": 200,
            "max_tool_calling_iterations": 1,
            "save_strategy": "no",
        },
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 2},
        "output_dir": str(tmp_path / "run"),
    }


@pytest.mark.parametrize("calls", [True, False])
def test_eval_and_preflight_run_the_tool_loop(calls, tmp_path, chatml_model, no_hub, monkeypatch, capsys):
    from trl import GRPOTrainer

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", scripted(calls))
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(tool_recipe(tmp_path, chatml_model)))
    assert cli.main(["train", str(path)]) == 0
    err = capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    before = summary["eval_before"]
    pre = summary["health"]["preflight"]
    assert before["rewards"]["math_accuracy"]["pass_rate"] == (1.0 if calls else 0.0)  # the calculator's sums
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
