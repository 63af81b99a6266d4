"""Short runs on the tiny model: ``python -m grpo_ext.train RECIPE --quick`` runs every phase small, in a directory of
its own, says first what it changed and saves no final/; ``save_final: false`` keeps the eval after and saves no
final/; a run whose every row had zero advantage says that its weights are the base model's (its final/ shows
it); and a tool recipe's pre-flight and eval play no more prompts than its steps train on."""

import json
import subprocess
import sys

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.settings import compat
from grpo_ext.verbs import train
from tests.helpers import tiny_doc
from tests.integration.test_tool_eval import scripted, tool_recipe


def test_quick_runs_every_phase_small(tiny_model, digit_doc, tmp_path, no_hub):
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", health={"preflight": "fail"})
    doc["training"]["max_steps"] = 4
    doc["data"]["eval_prompts"] = digit_doc["data"]["eval_prompts"][:4]
    doc["eval"]["samples"] = 3
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "grpo_ext.train", str(path), "--quick", "training.save_steps=2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = proc.stderr.splitlines()[0]
    assert first == (
        "grpo_ext: quick: training.max_steps=2 (was 4), health.preflight=warn (was fail), eval.max_prompts=2 (was null), "
        "eval.samples=2 (was 3), save_final=false (was true), "
        f"output_dir={tmp_path / 'run'}-quick (was {tmp_path / 'run'}); an explicit key=value wins; drop --quick for the "
        "full run"
    )
    run = tmp_path / "run-quick"
    assert not (tmp_path / "run").exists() and not (run / "final").exists()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 2
    assert summary["health"]["preflight"]["total"]["samples"] == 32  # 8 prompts x 4: no tools, the pre-flight as it was
    assert (summary["eval_before"]["prompts"], summary["eval_after"]["samples"]) == (2, 4)  # 2 prompts x 2 samples
    assert summary["final"]["saved"] is False and summary["final"]["why"] == train.NOT_SAVED
    assert "final/ not saved: save_final was false" in proc.stderr
    assert "- **Model saved:** none, save_final was false" in (run / "report.md").read_text()
    assert (run / "checkpoint-2").is_dir()  # what the user's key=value asked for: checkpoints are not final/


def test_save_final_false_keeps_the_eval_after(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_doc(digit_doc, tiny_model, tmp_path / "run", save_final=False)))
    assert cli.main(["train", str(path)]) == 0
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert not (run / "final").exists() and summary["final"]["saved"] is False
    assert summary["eval_after"]["rewards"]["digit_exact"]["judged"] == 4  # the trained model, scored in memory
    assert yaml.safe_load((run / "recipe.yaml").read_text())["save_final"] is False
    capsys.readouterr()
    assert cli.main(["eval", str(path), "--model", str(run)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"error: --model {run}: the run saved no final/: save_final was false")


FLAT = "def zero(completions, **kwargs):\n    return [0.0] * len(completions)\n"
UNCHANGED = "every row of every step had zero advantage and was left out of the loss"


@pytest.mark.parametrize(
    "skip, said",
    [
        # every row left out of the loss: the gradients were zero, and the run says its weights are the base model's
        (True, UNCHANGED),
        # every row in the loss: grpo_ext does not tell that nothing moved, and says nothing
        (False, None),
    ],
)
def test_a_run_that_learned_nothing_says_so(skip, said, tiny_model, digit_doc, tmp_path, no_hub, capsys):
    from safetensors.torch import load_file

    (tmp_path / "flat.py").write_text(FLAT)
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", groups={"skip_zero_advantage": skip})
    doc["rewards"] = ["flat.py:zero"]
    doc["eval"]["enabled"] = False
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final"] == {"saved": True, "why": None, "unchanged": said}  # final/ as every completed run has
    base, last = load_file(tiny_model / "model.safetensors"), load_file(run / "final" / "model.safetensors")
    assert all(last[name].equal(base[name]) for name in last)  # both ways, nothing moved
    err, report = capsys.readouterr().err, (run / "report.md").read_text()
    assert (f"trained weights: the base model's, unchanged ({UNCHANGED})" in err) is skip
    assert ("the weights are the base model's, unchanged" in report) is skip


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)  # as test_tool_eval's


@pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")
def test_a_tool_recipe_plays_no_more_prompts_than_its_steps_train(tmp_path, tool_model, no_hub, scripted_model, capsys):
    scripted_model(scripted(True))
    doc = tool_recipe(tmp_path, tool_model)
    del doc["health"], doc["eval"]["max_prompts"]  # unset: scaled to the run, 1 step of 1 prompt (a group of 2)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    err = capsys.readouterr().err
    rule = "unset: a recipe with tools plays no more prompts than it trains on in 1 step"
    assert f"pre-flight: playing 1 prompt x 2 conversations with the tool loop (health.preflight_prompts {rule})" in err
    assert f"eval: the first 1 of 2 eval prompts (eval.max_prompts {rule})" in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["eval_before"]["prompts"] == summary["eval_after"]["prompts"] == 1
    assert summary["health"]["preflight"]["total"]["samples"] == 2
    # the scripted policy solves every prompt: no group has spread, and the run says its weights never moved
    assert summary["final"] == {"saved": True, "why": None, "unchanged": UNCHANGED}
