"""End to end on a tiny locally built model: recipe → trainer → eval → run directory, in seconds."""

import json
import os

import pytest
import yaml

from grpo_ext import cli
from tests.helpers import ROOT, tiny_doc


@pytest.fixture
def tiny_recipe(tiny_model, digit_doc, tmp_path):
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_tiny_run_writes_run_directory(tiny_recipe, tmp_path, no_hub, capsys):
    assert cli.main(["train", str(tiny_recipe)]) == 0
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["steps"] == 2
    for key in ("recipe", "model", "versions", "train_seconds", "reward_first", "reward_last", "eval_before", "eval_after"):
        assert summary[key] is not None, key
    assert set(summary["versions"]) >= {"trl", "transformers", "torch"}
    for name in ("digit_exact", "digit_shaped"):
        for when in ("eval_before", "eval_after"):
            scores = summary[when]["rewards"][name]
            assert 0 <= scores["mean"] <= 1 and 0 <= scores["pass_rate"] <= 1
            assert scores["judged"] == 4  # 2 prompts x 2 samples
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all("reward" in line for line in lines)
    assert (run / "final" / "config.json").exists() and (run / "final" / "tokenizer.json").exists()
    assert (run / "checkpoint-2").is_dir()
    assert yaml.safe_load((run / "recipe.yaml").read_text())["training"]["max_steps"] == 2
    err = capsys.readouterr().err
    assert "step 2/2" in err and "eval after" in err and "local directory" in err
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    md = (run / "report.md").read_text()
    assert "| digit_exact |" in md and "](curves.png)" in md and "## Sample completions" in md
    assert summary["memory"]["peak_rss_mib"] > 100
    assert summary["eval_after"]["seconds"] >= 0


def test_tensorboard_event_files(tiny_recipe, tmp_path, no_hub):
    assert (
        cli.main(["train", str(tiny_recipe), "training.max_steps=1", "eval.enabled=false", "training.report_to=[tensorboard]"])
        == 0
    )
    events = list((tmp_path / "run").rglob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0


def test_terminal_shows_only_our_lines(tiny_recipe, tmp_path):
    """Third-party warnings, logs and progress bars stay quiet unless --verbose; stdout ends with the table."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "grpo_ext.train", str(tiny_recipe), "training.max_steps=1"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if not line.startswith("grpo_ext: ")] == []
    table = proc.stdout.splitlines()
    assert table[1].startswith("reward ") and table[-1].startswith("after vs before, pass rate of digit_shaped: ")


def test_finished_run_is_not_overwritten(tiny_recipe, tmp_path, no_hub, capsys):
    run = tmp_path / "run"
    run.mkdir()
    marker = {"grpo_ext": "run directory", "path": str(run.resolve()), "id": "0a1b", "entries": [".grpo_ext_run", "summary.json"]}
    (run / ".grpo_ext_run").write_text(json.dumps(marker))  # a run directory's marker: its folder, its run id
    (run / "summary.json").write_text('{"status": "completed", "run_id": "0a1b"}')
    assert cli.main(["train", str(tiny_recipe)]) == 2
    assert "already holds a run; pass --overwrite" in capsys.readouterr().err
    assert (run / "summary.json").read_text() == '{"status": "completed", "run_id": "0a1b"}'


def test_reward_from_file_trains(tiny_recipe, tmp_path, no_hub):
    (tmp_path / "my_rewards.py").write_text(
        "def brevity(completions, **kwargs):\n    return [1.0 / (1 + len(str(c))) for c in completions]\n"
    )
    doc = yaml.safe_load(tiny_recipe.read_text())
    doc["rewards"] = [{"name": "./my_rewards.py:brevity", "weight": 0.5}, "digit_exact"]
    doc["eval"]["enabled"] = False
    tiny_recipe.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tiny_recipe), "training.max_steps=1"]) == 0
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert "rewards/brevity/mean" in line and "rewards/digit_exact/mean" in line


def test_failing_reward_names_itself(tiny_recipe, tmp_path, no_hub, capsys):
    (tmp_path / "bad_rewards.py").write_text("def boom(completions, **kwargs):\n    raise ValueError('no luck')\n")
    doc = yaml.safe_load(tiny_recipe.read_text())
    doc["rewards"] = ["./bad_rewards.py:boom"]
    doc["eval"]["enabled"] = False
    tiny_recipe.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tiny_recipe)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "reward 'boom' raised ValueError: no luck" in err
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("bf16", [False, True])
def test_eval_of_the_run_repeats_the_runs_own_eval(bf16, tiny_recipe, tmp_path, no_hub, capsys, monkeypatch):
    """`grpo-ext eval RECIPE --model RUN` samples with the arithmetic the run used, so it repeats `eval after`."""
    import torch

    from grpo_ext.run import sampling

    autocast = []  # per sampling call, in training's eval and in grpo-ext eval: was bf16 autocast on?
    sample = sampling.sample

    def spy(*args, **kwargs):
        autocast.append(torch.is_autocast_enabled("cpu"))
        return sample(*args, **kwargs)

    monkeypatch.setattr(sampling, "sample", spy)

    overrides = [f"training.bf16={str(bf16).lower()}", "training.max_steps=1", "training.save_strategy='no'"]
    assert cli.main(["train", str(tiny_recipe), *overrides]) == 0
    run = tmp_path / "run"
    after = json.loads((run / "summary.json").read_text())["eval_after"]
    assert cli.main(["eval", str(tiny_recipe), "--model", str(run), "--out", str(tmp_path / "eval"), *overrides]) == 0
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["bf16"] is bf16 and (", bf16 autocast" in capsys.readouterr().out) is bf16
    assert autocast == [bf16] * 3  # eval before, eval after, grpo-ext eval
    scores = result["models"][str(run)]
    assert scores["examples"] == after["examples"]
    assert scores["rewards"] == after["rewards"]
