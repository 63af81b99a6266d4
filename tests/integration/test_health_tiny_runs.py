"""Training health on tiny runs: the pre-flight and the watchdog stop a run, training's generation_kwargs reach the
pre-flight, and a run where no sample scores is named unhealthy."""

import json

import pytest

from grpo_ext.core.errors import RunError
from grpo_ext.verbs import doctor
from tests.helpers import tiny_doc


def test_tiny_run_stopped_by_preflight_and_by_watchdog(digit_doc, tiny_model, write_recipe, tmp_path, no_hub, capsys):
    """A random tiny model never writes one lone digit: digit_exact alone gives no gradient. ``preflight: fail``
    stops before step 1; ``on_problem: stop`` stops at step 1 with a complete checkpoint."""
    import grpo_ext

    strict = {"rewards": ["digit_exact"], "eval": {"enabled": False}}
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "pre", health={"preflight": "fail", "preflight_prompts": 2}, **strict)
    with pytest.raises(RunError, match="digit_exact scored 0 on all 8 samples"):
        grpo_ext.train(write_recipe(doc, "pre.yaml"))
    summary = json.loads((tmp_path / "pre" / "summary.json").read_text())
    assert summary["status"] == "stopped_unhealthy" and summary["health"]["status"] == "unhealthy"
    assert summary["health"]["preflight"]["rewards"]["digit_exact"]["zero_spread_groups"] == 1.0
    assert "## Health" in (tmp_path / "pre" / "report.md").read_text()
    capsys.readouterr()

    cfg = {"preflight": "off", "on_problem": "stop", "no_signal_steps": 1}
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "stop", health=cfg, **strict)
    with pytest.raises(RunError, match="health.on_problem: stop"):
        grpo_ext.train(write_recipe(doc, "stop.yaml"))
    run = tmp_path / "stop"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "stopped_unhealthy" and summary["steps"] == 1
    assert (run / "checkpoint-1" / "grpo_ext_complete.json").is_file()
    assert [f["rule"] for f in summary["health"]["findings"]] == ["no_signal"]
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["health"][0]["rule"] == "no_signal"
    printed = [line.removeprefix("grpo_ext: ") for line in capsys.readouterr().err.splitlines() if "health: warning at" in line]
    lines, healthy = doctor.diagnose(run)
    assert not healthy and printed == [
        line for line in lines if line.startswith("health: ")
    ]  # the doctor names what the run printed


def test_tiny_run_preflight_with_generation_kwargs(digit_doc, tiny_model, write_recipe, tmp_path, no_hub):
    """Training's generation_kwargs reach the pre-flight's sampling, even one that names a setting the
    pre-flight also sets (max_new_tokens, which they override as they do in TRL): the run trains."""
    import grpo_ext

    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", health={"preflight": "warn", "preflight_prompts": 2})
    doc["training"]["generation_kwargs"] = {"max_new_tokens": 1, "exponential_decay_length_penalty": [0, 1.3]}
    doc["explore"]["end_boost"] = None  # the same setting, on every step here
    doc["eval"]["enabled"] = False
    grpo_ext.train(write_recipe(doc))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 2
    assert summary["health"]["preflight"]["rewards"]["digit_exact"]["samples"] == 8
    assert summary["health"]["watchdog_seconds"] >= 0.0


@pytest.mark.parametrize(
    ("on_problem", "status", "steps"),
    [
        ("warn", "completed", 4),  # the finding is printed and recorded; the run goes on, not healthy
        ("stop", "stopped_unhealthy", 3),  # stopped at the third unscored step, exit 1
    ],
)
def test_tiny_run_where_no_sample_scores(on_problem, status, steps, digit_doc, tiny_model, write_recipe, tmp_path, no_hub):
    from grpo_ext import cli

    (tmp_path / "judge.py").write_text("def judge(completions, **kwargs):\n    raise ValueError('cannot parse')\n")
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", health={"on_problem": on_problem}, eval={"enabled": False})
    doc["rewards"] = [{"name": "./judge.py:judge", "on_error": "skip"}]
    doc["training"]["max_steps"] = 4
    assert cli.main(["train", str(write_recipe(doc))]) == (0 if on_problem == "warn" else 1)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["status"], summary["steps"], summary["health"]["status"]) == (status, steps, "unhealthy")
    # the random tiny model never ends a reply within its 4 tokens: the length rule names that at step 3 too
    warnings = [(f["rule"], f["step"]) for f in summary["health"]["findings"] if f["severity"] == "warning"]
    assert warnings == [("unscored", 3), ("length_pinned", 3)]
    assert doctor.diagnose(tmp_path / "run")[1] is False
