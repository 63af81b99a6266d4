"""--quick (recipe/quick.py): what it changes and what it leaves to the key=value overrides typed with it, as the dry
run shows it; the pre-flight's and the eval's prompts of a tool recipe scaled to its steps; and a run without
final/ (save_final: false, or weights that stayed the base model's) named in one line by summary, report, push,
merge and eval."""

import json
import re

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.recipe import Training, changed_keys, quick, validate
from grpo_ext.results import report
from grpo_ext.run import rundir
from tests.helpers import ROOT

ARITH_TOOLS = ROOT / "recipes" / "arith-tools.yaml"


def arith_tools() -> dict:
    return yaml.safe_load(ARITH_TOOLS.read_text())


def shaped(doc: dict, **sections) -> dict:
    for key, value in sections.items():
        if isinstance(value, dict):
            doc.setdefault(key, {}).update(value)
        else:
            doc[key] = value
    return doc


ALL = [
    ("training.max_steps", 2, 20),
    ("eval.max_prompts", 2, None),
    ("eval.samples", 2, 8),
    ("save_final", False, True),
    ("output_dir", "runs/arith-tools-quick", "runs/arith-tools"),
]


@pytest.mark.parametrize(
    "sections, overrides, changed, kept",
    [
        # the shipped tool recipe as it is: every count lowered, no final/, a directory of its own
        ({}, [], ALL, []),
        # an explicit key=value wins and is named as kept
        (
            {},
            ["training.max_steps=5", "eval.samples=4"],
            [c for c in ALL if c[0] not in ("training.max_steps", "eval.samples")],
            ["training.max_steps", "eval.samples"],
        ),
        # a whole section typed wins over each quick key in it
        (
            {},
            ["eval={samples: 3}"],
            [c for c in ALL if not c[0].startswith("eval.")],
            ["eval.max_prompts", "eval.samples", "eval.pass_at"],
        ),
        # a count the recipe already sets lower stays: --quick never makes a run bigger
        (
            {"training": {"max_steps": 1}, "eval": {"samples": 1, "max_prompts": 1}},
            [],
            [c for c in ALL if c[0] not in ("training.max_steps", "eval.samples", "eval.max_prompts")],
            [],
        ),
        # no eval, no pre-flight: their keys are left alone
        (
            {"eval": {"enabled": False}, "health": {"preflight": "off"}},
            [],
            [c for c in ALL if not c[0].startswith(("eval.", "health."))],
            [],
        ),
        # a pre-flight that would stop the run warns instead (one group's verdicts are noisy)
        ({"health": {"preflight": "fail"}}, [], [ALL[0], ("health.preflight", "warn", "fail"), *ALL[1:]], []),
        # pass@k past the two samples would be refused: back to pass@1 and pass@2
        ({"eval": {"pass_at": [1, 8]}}, [], [*ALL[:3], ("eval.pass_at", None, [1, 8]), *ALL[3:]], []),
        # a trailing slash is not doubled
        ({"output_dir": "runs/x/"}, [], [*ALL[:4], ("output_dir", "runs/x-quick", "runs/x/")], []),
    ],
)
def test_quick_changes(sections, overrides, changed, kept):
    got, kept_got = quick.changes(shaped(arith_tools(), **sections), overrides)
    assert [(c.key, c.value, c.before) for c in got] == changed
    assert kept_got == kept


def test_explicit_overrides_win_in_the_recipe_run(tmp_path):
    recipe = quick.with_quick(arith_tools(), ARITH_TOOLS, ["training.max_steps=3", "save_final=true"])
    assert recipe.training.settings["max_steps"] == 3 and recipe.save_final is True
    assert recipe.eval.samples == 2 and recipe.health.preflight_prompts is None  # scaled to the 3 steps
    assert recipe.output_dir == "runs/arith-tools-quick"
    assert "max_steps" not in recipe.origins  # the user's, not --quick's
    assert recipe.notes[0].startswith("quick: eval.max_prompts=2 (was null)")
    assert "yours kept: training.max_steps, save_final" in recipe.notes[0]


def test_quick_dry_run_says_what_it_changed_first(capsys):
    assert cli.main(["train", str(ARITH_TOOLS), "--quick", "--dry-run", "eval.samples=4"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first == (
        "quick: training.max_steps=2 (was 20), eval.max_prompts=2 (was null), "
        "save_final=false (was true), output_dir=runs/arith-tools-quick (was runs/arith-tools); yours kept: "
        "eval.samples; an explicit key=value wins; drop --quick for the full run"
    )
    assert re.search(r"^  max_steps +2 +--quick$", out, re.MULTILINE)
    # the pre-flight a 2-step run has: one group's verdicts would be noise
    rule = "unset: a recipe with tools plays no more prompts than it trains on in 2 steps"
    assert f"pre-flight: 4 training prompts x 8 completions (health.preflight_prompts {rule})" in out
    assert "eval: at most 2 eval prompts x 4 samples (eval.max_prompts)" in out
    assert "final/: not saved (save_final: false)" in out
    assert "output_dir: runs/arith-tools-quick" in out


def test_quick_is_a_train_flag():
    opts = cli.parse_args(["train", "digit", "seed=1", "--quick", "training.max_steps=3"])
    assert opts.quick and opts.overrides == ["seed=1", "training.max_steps=3"]
    assert not cli.parse_args(["train", "digit"]).quick


def test_a_bad_override_with_quick_is_one_error_line(capsys):
    assert cli.main(["train", str(ARITH_TOOLS), "--quick", "--dry-run", "eval.samples=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {ARITH_TOOLS}: eval.samples: must be at least 1, got 0"]


@pytest.mark.parametrize(
    "training, prompts",
    [
        ({"max_steps": 2, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 4, "num_generations": 8}, 4),
        ({"max_steps": 20, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 4, "num_generations": 8}, 40),
        # a step of fewer completions than a group still trains on a prompt
        ({"max_steps": 3, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, "num_generations": 4}, 3),
        # epochs: as many as the data holds, no bound
        ({"per_device_train_batch_size": 4, "num_generations": 4}, None),
    ],
)
def test_trained_prompts(training, prompts):
    assert quick.trained_prompts(Training(training)) == prompts


@pytest.mark.parametrize(
    "overrides, preflight, evaluated",
    [
        # the shipped tool recipe, 2 steps of 2 prompts: 4 prompts each (was 8 and all 32)
        (["training.max_steps=2"], 4, 4),
        # its full run trains on 40 prompts: 8 and every one of the 32, as before
        ([], 8, 40),
        # one step: one step's prompts
        (["training.max_steps=1"], 2, 2),
        # set, they are the recipe's
        (["training.max_steps=2", "health.preflight_prompts=8", "eval.max_prompts=32"], 8, 32),
        # without tools nothing is scaled: a batched reply costs little beside a step
        (["training.max_steps=2", "tools=[]", "data.examples=null"], 8, None),
    ],
)
def test_tool_recipes_scale_preflight_and_eval(overrides, preflight, evaluated):
    from grpo_ext.recipe import apply_overrides

    recipe = validate(apply_overrides(arith_tools(), overrides), ARITH_TOOLS)
    assert (quick.preflight_prompts(recipe), quick.eval_prompts(recipe)) == (preflight, evaluated)


def test_dry_run_of_a_short_tool_run_shows_the_scaled_sizes(capsys):
    assert cli.main(["train", str(ARITH_TOOLS), "--dry-run", "training.max_steps=2"]) == 0
    out = capsys.readouterr().out
    rule = "unset: a recipe with tools plays no more prompts than it trains on in 2 steps"
    assert f"pre-flight: 4 training prompts x 8 completions (health.preflight_prompts {rule})" in out
    assert f"eval: at most 4 eval prompts x 8 samples (eval.max_prompts {rule})" in out
    assert "final/" not in out


def test_save_final_may_change_on_resume():
    assert changed_keys({"save_final": True, "seed": 0}, {"save_final": False, "seed": 0}) == []
    assert changed_keys({"seed": 0}, {"save_final": True, "seed": 0}) == []  # recorded before the key existed


# --- a run without final/ --------------------------------------------------------------------------------------

WHY = "save_final was false (the eval after scored the trained model in memory)"


def run_without_final(tmp_path, why: str = WHY):
    run = tmp_path / "run"
    run.mkdir()
    doc = {"model": {"name": "smollm2-135m-instruct"}, "rewards": ["digit_exact"], "output_dir": str(run)}
    (run / "recipe.yaml").write_text(yaml.safe_dump(doc))
    summary = {"status": "completed", "recipe": "r.yaml", "model": "m", "final": {"saved": False, "why": why}}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


@pytest.mark.parametrize(
    "argv, said",
    [
        (["push", "{run}", "me/model", "--dry-run"], "error: {run}: no final/ to push: " + WHY + "; train with save_final: true"),
        (["merge", "{run}"], "error: {run}: no final/ to merge: " + WHY + "; train with save_final: true"),
        (["eval", "digit", "--model", "{run}"], "error: --model {run}: the run saved no final/: " + WHY + "; score one of"),
    ],
)
def test_verbs_that_read_final_say_there_is_none(argv, said, tmp_path, capsys):
    run = run_without_final(tmp_path)
    assert cli.main([a.format(run=run) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(said.format(run=run)), err


@pytest.mark.parametrize(
    "final, there, said",
    [
        ({"saved": False, "why": WHY}, False, WHY),
        ({"saved": True, "why": None}, False, None),  # deleted by hand: the verbs' own lines say so
        ({"saved": False, "why": WHY}, True, None),  # made since (a later run into the directory)
        (None, False, None),  # a run recorded before the key, or one that stopped
    ],
)
def test_unsaved_final(final, there, said, tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"status": "completed", "final": final}))
    if there:
        (tmp_path / "final").mkdir()
    assert rundir.unsaved_final(tmp_path) == said


@pytest.mark.parametrize(
    "final, line",
    [
        ({"saved": False, "why": WHY}, f"- **Model saved:** none, {WHY}"),
        ({"saved": True, "why": None}, "- **Model saved:** [final/](final)"),
        # weights that never moved: saved, and said so
        (
            {"saved": True, "why": None, "unchanged": "every row of every step had zero advantage"},
            "- **Model saved:** [final/](final); the weights are the base model's, unchanged (every row of every step had "
            "zero advantage)",
        ),
        (None, None),
    ],
)
def test_report_says_where_the_model_is(final, line, tmp_path):
    summary = {"status": "completed", "recipe": "r.yaml", "model": "m", "steps": 2, "train_seconds": 1.0}
    if final is not None:
        summary["final"] = final
    md = report.report_markdown(tmp_path, summary, {}, [])
    assert (line in md.splitlines()) if line else "Model saved" not in md


def test_schema_and_reference_name_the_keys():
    from grpo_ext.recipe.schema import SCHEMA, TOP_LEVEL

    assert TOP_LEVEL["save_final"].default is True and SCHEMA["eval"]["max_prompts"].default is None
    assert SCHEMA["health"]["preflight_prompts"].default is None
    keys = (ROOT / "docs" / "reference" / "keys.md").read_text()
    assert "| `save_final` |" in keys and "| `eval.max_prompts` |" in keys
