"""completions.jsonl on the tiny model: what a run writes per sampled completion, the cap, a resume that appends,
and ``doctor --samples`` reading it back (a damaged file read by hand: tests/unit/test_completions_read.py)."""

import json
import math
import re

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import completions, rundir
from tests.helpers import ROOT, resumable_doc, tiny_doc

STEPS, GROUP = 2, 4  # tiny_doc: 2 steps of 4 completions, one prompt's group a step
REWARDS = {"digit_exact", "digit_shaped"}


def records(run) -> list[dict]:
    """Every line of the run's completions.jsonl, failing on one that is not JSON."""
    return [json.loads(line) for line in (run / completions.FILE).read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory):
    """A tiny run of 2 steps (no eval: these tests read the training samples), its recipe and its directory."""
    root = tmp_path_factory.mktemp("completions")
    doc = tiny_doc(yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text()), tiny_model, root / "run")
    doc["eval"]["enabled"] = False
    recipe = root / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(doc))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        assert cli.main(["train", str(recipe)]) == 0
    rundir.release(root / "run")
    return doc, recipe, root / "run"


def test_every_sampled_completion_is_a_line(trained):
    doc, _, run = trained
    lines = records(run)
    assert [line["step"] for line in lines] == [1] * GROUP + [2] * GROUP  # logging_steps: 1, so every step
    metrics = rundir.read_metrics(run / "metrics.jsonl")
    for step, group in zip(range(1, STEPS + 1), (lines[i : i + GROUP] for i in range(0, len(lines), GROUP)), strict=True):
        assert all(set(line) == {"step", "prompt", "completion", "rewards", "advantage"} for line in group)
        assert all(isinstance(line["completion"], str) for line in group)
        # one prompt of the recipe per group: the text itself (TRL 1.15 on) or inside its chat template (older TRL)
        assert len({line["prompt"] for line in group}) == 1
        assert any(prompt in group[0]["prompt"] for prompt in doc["data"]["prompts"]), group[0]["prompt"]
        assert all(set(line["rewards"]) == REWARDS for line in group)  # by metric name, as metrics.jsonl names them
        for name in REWARDS:  # the scores are the ones the step's metrics line averages
            mean = sum(line["rewards"][name] for line in group) / GROUP
            assert math.isclose(mean, metrics[step - 1][f"rewards/{name}/mean"], abs_tol=1e-5), (name, step)
        # scale_rewards: group: each advantage is the total reward less its group's mean, over the group's spread;
        # so within a group they sum to zero, and a completion above the mean has a positive one
        totals = [sum(line["rewards"].values()) for line in group]
        assert abs(sum(line["advantage"] for line in group)) < 1e-4
        for total, line in zip(totals, group, strict=True):
            above = total - sum(totals) / GROUP
            assert abs(above) < 1e-6 or (above > 0) == (line["advantage"] > 0), (totals, line["advantage"])


def test_doctor_samples_prints_the_last_completions(trained, capsys):
    _, _, run = trained
    plain = cli.main(["doctor", str(run)])
    capsys.readouterr()
    assert cli.main(["doctor", str(run), "--samples", "3"]) == plain == 0  # a healthy run; the samples change nothing
    out, err = capsys.readouterr()
    assert err == "" and "verdict: healthy" in out
    assert f"completions: the last 3 of {STEPS * GROUP} logged (step 2), from {run / completions.FILE}" in out
    shown = re.findall(r"step (\d+), advantage (\S+)", out)
    assert shown == [(str(line["step"]), f"{line['advantage']:+.3f}") for line in records(run)[-3:]]
    for line in records(run)[-3:]:  # each reward by name, in the recipe's order
        assert "   ".join(f"{name} {score:.3f}" for name, score in line["rewards"].items()) in out


def test_a_cap_stops_the_file_and_says_so(trained, tmp_path, capsys):
    """Every 2nd step, a cap of 600 bytes: the lines of step 2 that fit, then the closing line, and one notice."""
    _, recipe, _ = trained
    run = tmp_path / "run"
    overrides = [f"output_dir={run}", "logging.completions_steps=2", "logging.completions_max_mb=0.0006"]
    assert cli.main(["train", str(recipe), *overrides]) == 0
    rundir.release(run)
    *lines, closing = records(run)
    assert 1 <= len(lines) < GROUP and {line["step"] for line in lines} == {2}
    assert closing == {"capped": True, "step": 2, "max_mb": 0.0006}
    assert sum(len(json.dumps(line, ensure_ascii=False)) + 1 for line in lines) <= 600
    notices = [line for line in capsys.readouterr().err.splitlines() if "completions.jsonl reached" in line]
    assert notices == [
        "grpo_ext: completions: completions.jsonl reached logging.completions_max_mb (0.0006 MB) at step 2; later "
        "completions are not logged (raise it, or log less often with logging.completions_steps)"
    ]
    assert cli.main(["doctor", str(run), "--samples"]) == 0
    assert "note: completions.jsonl stopped at logging.completions_max_mb (0.0006 MB) at step 2" in capsys.readouterr().out


def test_a_resumed_run_appends(tiny_model, digit_doc, tmp_path, no_hub):
    """A run made to look killed at step 3, its last completion line cut short: the resume keeps every line written,
    and logs step 3 again after them, from a line of its own."""
    run = tmp_path / "run"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(resumable_doc(digit_doc, tiny_model, run)))
    assert cli.main(["train", str(path)]) == 0
    rundir.release(run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    (run / "checkpoint-3" / rundir.MANIFEST).unlink()
    before = (run / completions.FILE).read_bytes() + b'{"step": 3, "prompt": "Rep'
    (run / completions.FILE).write_bytes(before)
    assert cli.main(["train", str(path), "--resume"]) == 0
    rundir.release(run)
    after = (run / completions.FILE).read_bytes()
    assert after.startswith(before + b"\n")
    resumed = [json.loads(line) for line in after[len(before) + 1 :].decode().splitlines()]
    assert [line["step"] for line in resumed] == [3] * GROUP
    assert completions.read(run / completions.FILE).count == 4 * GROUP  # steps 1, 2, 3, then 3 again


def test_a_batch_trained_on_over_two_steps_is_written_once(trained, tmp_path):
    """steps_per_generation: 2 samples 2 prompts' groups at steps 1 and 3 and trains on half of them a step: logged
    every step, each batch is written once, under the step that sampled it."""
    _, recipe, _ = trained
    run = tmp_path / "run"
    overrides = [f"output_dir={run}", "training.max_steps=4", "training.steps_per_generation=2", "logging.completions_steps=1"]
    assert cli.main(["train", str(recipe), *overrides]) == 0
    rundir.release(run)
    assert [line["step"] for line in records(run)] == [1] * 2 * GROUP + [3] * 2 * GROUP
