"""A verifiers taskset trains as a user writes it (``data.source: verifiers``): the dry run shows its rewards and
weights, 2 steps on the tiny model score every completion with them, and the eval plays its eval split; without the
extra, ``grpo-ext train`` refuses the recipe in one line with the install command, before torch is imported."""

import json
import re
import sys

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import compat
from tests.helpers import ROOT, chatml_turn, run_command, tiny_doc, tool_call, write
from tests.unit.test_verifiers_tasks import TASKS

pytest.importorskip("verifiers.v1", reason="needs the verifiers extra: pip install -e '.[verifiers]'")


def taskset_doc(tmp_path, digit_doc, model) -> dict:
    (tmp_path / "tasks.py").write_text(TASKS)
    doc = tiny_doc(digit_doc, model, tmp_path / "run")
    doc["data"] = {
        "source": "verifiers",
        "source_args": {"taskset": "tasks.py:make_taskset", "args": {"n": 8}, "eval_args": {"split": "test", "n": 2}},
    }
    doc["rewards"] = []
    doc["explore"] = {"end_boost": None}
    return doc


def test_a_taskset_trains_two_steps_with_its_rewards(tmp_path, digit_doc, tiny_model, no_hub, capsys):
    path = write(tmp_path / "recipe.yaml", taskset_doc(tmp_path, digit_doc, tiny_model))
    assert cli.main(["validate", str(path)]) == 0
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "rewards: correct (weight 2.0), short (weight 0.5)" in out and "reward_weights                   [2.0, 0.5]" in out
    assert cli.main(["train", str(path)]) == 0
    err = capsys.readouterr().err
    assert "data: 8 training prompts, 2 eval prompts, chat messages" in err  # its tasks, and its test split for the eval
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "rewards/correct/mean" in r and "rewards/short/mean" in r] == [1, 2]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    scored = summary["eval_after"]["rewards"]
    assert set(scored) == {"correct", "short"} and len(scored["correct"]["per_prompt"]) == 2  # the 2 tasks of its test split
    # the run's recorded recipe reads back to the same rewards, and trains on
    assert cli.main(["validate", str(tmp_path / "run" / "recipe.yaml")]) == 0


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


@pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")
def test_a_taskset_with_a_toolset_trains_two_steps_with_its_tools(tmp_path, digit_doc, chatml_model, no_hub, capsys):
    doc = taskset_doc(tmp_path, digit_doc, chatml_model)
    doc["data"]["source_args"] = {"taskset": "tasks.py:make_tool_taskset", "held_out": 2}
    doc["training"].update(max_completion_length=16, max_tool_calling_iterations=2)
    doc["eval"]["enabled"] = False
    path = write(tmp_path / "recipe.yaml", doc)
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "tools the model sees:\n  calc_add(a: int, b: int): Add two whole numbers.\n  calc_negate(x: int): " in out
    assert cli.main(["train", str(path)]) == 0
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "tools/call_frequency" in r] == [1, 2]  # TRL's tool loop ran each step
    assert [r["step"] for r in records if "rewards/correct/mean" in r] == [1, 2]


def adding(prompt: str) -> str:
    """Asked what N + 1 is, it calls calc_add; given the result, it answers with it."""
    turn, result = chatml_turn(prompt)
    if result is not None:
        return f"{result.strip()}<|im_end|>"
    a = re.search(r"What is (\d+) \+ 1\?", turn).group(1)
    return tool_call("calc_add", a=int(a), b=1) + "<|im_end|>"


@pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")
def test_a_toolsets_tool_answers_the_model(tmp_path, digit_doc, chatml_model, no_hub, scripted_model):
    scripted_model(adding)  # the tool loop, the template, the parser, the tool and the rewards stay real
    doc = taskset_doc(tmp_path, digit_doc, chatml_model)
    doc["data"]["source_args"] = {"taskset": "tasks.py:make_tool_taskset", "held_out": 2}
    doc["training"].update(max_completion_length=128, max_tool_calling_iterations=2)
    doc["eval"]["enabled"] = False
    assert cli.main(["train", str(write(tmp_path / "recipe.yaml", doc))]) == 0
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "rewards/correct/mean" in r]
    # every completion called calc_add, read its sum, and gave it: the taskset's reward scores it right
    assert [(r["rewards/correct/mean"], r["tools/call_frequency"]) for r in steps] == [(1.0, 1.0), (1.0, 1.0)]


def test_without_the_extra_train_refuses_in_one_line_before_torch(tmp_path, digit_doc, tiny_model):
    path = write(tmp_path / "recipe.yaml", taskset_doc(tmp_path, digit_doc, tiny_model))
    code = (
        "import sys, importlib.abc\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"  # verifiers as if not installed
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'verifiers': raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from grpo_ext import cli\n"
        "rc = cli.main(['train', sys.argv[1]])\n"
        "assert 'torch' not in sys.modules, 'imported torch'\n"
        "sys.exit(rc)\n"
    )
    proc, _ = run_command([sys.executable, "-c", code, str(path)], False, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: {path}: data.source: names a verifiers taskset, and verifiers is not installed; pip install -e '.[verifiers]'"
    ]
    assert not (tmp_path / "run").exists()
    assert yaml.safe_load(path.read_text())["rewards"] == []
