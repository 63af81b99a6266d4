"""The eval before and after training and the reward pre-flight on two processes (CPU DDP over gloo, launched as a
run is: accelerate launch with configs/cpu-ddp.yaml): every process samples its share of the prompts and the main
process scores them all. At temperature 0 the eval's numbers equal those of one process on the same prompts, and the
eval after equals what ``grpo-ext eval`` on one process gives for the weights the run saved; a recipe with tools
plays its eval and its pre-flight through the tool loop on both processes, where they used to be skipped."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import compat
from tests.helpers import ROOT, resumable_doc
from tests.integration.test_row_skipping_processes import launch


def _scores(result: dict) -> dict:
    """What two evals of one model on the same prompts and seeds give alike (not the seconds they took)."""
    kept = ("rewards", "prompts", "samples", "examples", "mean_length", "settings", "tools")
    return {k: result[k] for k in kept if k in result}


def _untimed(preflight: dict) -> dict:
    """A pre-flight's statistics and findings without the time its rewards took."""
    rewards = {name: {k: v for k, v in r.items() if k != "seconds_per_call"} for name, r in preflight["rewards"].items()}
    return {"rewards": rewards, "total": preflight["total"], "cut": preflight["cut"], "findings": preflight["findings"]}


def _trained(path: Path, processes: int) -> tuple[dict, str]:
    """(summary.json, the terminal's lines) of a training of the recipe at ``path`` on one process or two."""
    if processes == 2:
        proc = launch("-m", "grpo_ext.train", str(path), timeout=600)
    else:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "grpo_ext.train", str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = Path(yaml.safe_load(path.read_text())["output_dir"])
    return json.loads((run / "summary.json").read_text()), proc.stderr


def _write(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**doc, "output_dir": str(tmp_path / name)}))
    return path


def test_greedy_eval_on_two_processes_equals_one(tiny_model, digit_doc, tmp_path, no_hub):
    doc = resumable_doc(digit_doc, tiny_model, tmp_path / "unused", max_steps=1, num_generations=4)
    doc["training"].update(save_strategy="no", max_completion_length=4)
    # 5 prompts, 2 a batch: 3 batches, the second process samples one fewer, and the last batch is short
    doc["eval"] = {"enabled": True, "samples": 1, "temperature": 0.0, "max_prompts": 5, "batch_size": 2}
    doc["health"] = {"preflight_prompts": 3}  # 3 prompts x 4 samples, one prompt a batch: 2 batches and 1
    two, err = _trained(_write(tmp_path, "two", doc), 2)
    one, _ = _trained(_write(tmp_path, "one", doc), 1)
    assert "eval before: 5 prompts sampled by 2 processes, each its share" in err
    assert "eval after: 5 prompts sampled by 2 processes, each its share" in err
    assert "pre-flight: 3 prompts sampled by 2 processes, each its share" in err
    assert two["processes"] == 2 and two["eval_before"]["samples"] == 5
    assert _scores(two["eval_before"]) == _scores(one["eval_before"])  # greedy: the same answers
    # the pre-flight samples at training's temperature: each batch seeded by its place, as on one process
    pre_one, pre_two = (_untimed(s["health"]["preflight"]) for s in (one, two))
    assert pre_two == pre_one
    # the eval after (of the weights two processes trained) equals one process's eval of the saved weights
    again = tmp_path / "again"
    assert cli.main(["eval", str(tmp_path / "two.yaml"), "--model", str(tmp_path / "two"), "--out", str(again)]) == 0
    scored = json.loads((again / "eval.json").read_text())["models"][str(tmp_path / "two")]
    assert _scores(scored) == _scores(two["eval_after"])


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


@pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")
def test_tool_eval_and_preflight_play_on_two_processes(chatml_model, tmp_path, no_hub):
    rows = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in [(3, 4), (5, 2), (6, 6), (1, 8)]]
    held = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in [(12, 30), (8, 9), (2, 2)]]
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held))
    doc = {
        "model": {"name": str(chatml_model)},
        "data": {"file": str(tmp_path / "sums.jsonl"), "eval_file": str(tmp_path / "held.jsonl")},
        "tools": ["calculator"],
        "rewards": ["math_accuracy", {"name": "tool_success", "weight": 0.2}],
        "training": {
            "max_steps": 1,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": 24,
            "max_tool_calling_iterations": 1,
            "save_strategy": "no",
        },
        "save_final": False,
        # 3 prompts, 2 a batch: the second process's batch is its one prompt twice, the second's copy dropped
        "eval": {"samples": 2, "max_prompts": 3, "temperature": 0.0, "batch_size": 4},
        "health": {"preflight_prompts": 2},  # one batch: the second process plays it too, in step, and drops it
    }
    two, err = _trained(_write(tmp_path, "two", doc), 2)
    assert "skipped: with tools" not in err  # what one process only used to say
    assert "eval before: 3 prompts sampled by 2 processes, each its share" in err
    assert "pre-flight: 2 prompts sampled by 2 processes, each its share" in err
    assert two["eval_before"]["samples"] == two["eval_after"]["samples"] == 6
    assert two["eval_before"]["tools"]["samples"] == 6
    assert two["health"]["preflight"]["tools"]["samples"] == 4
    one, _ = _trained(_write(tmp_path, "one", doc), 1)
    assert _scores(two["eval_before"]) == _scores(one["eval_before"])  # greedy: the same conversations
