"""A task of one's own: a CSV of reviews with a ``label`` column, a ``prompt_template``, a reward in a ``.py`` file
in another folder, LoRA on the tiny model; then what a user does next (eval, merge, Ctrl-C and resume) and the
mistakes they make on the way."""

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from tests.helpers import recorded_round_trip, tiny_doc

REWARD = '''def label_match(completions, label, **kwargs):
    """1.0 when the completion names the row's label."""
    return [1.0 if want in (c if isinstance(c, str) else c[-1]["content"]).lower() else 0.0
            for c, want in zip(completions, label)]
'''


@pytest.fixture
def task(tmp_path) -> Path:
    """A folder with reviews.csv (40 rows: review, label), and a reward file in a sibling folder ``lib``."""
    folder = tmp_path / "task"
    folder.mkdir()
    with open(folder / "reviews.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["review", "label"])
        for i in range(40):
            writer.writerow([f"review number {i}\nsecond line", "positive" if i % 2 else "negative"])
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "sentiment.py").write_text(REWARD)
    return folder


def own_doc(model: str, output_dir: Path, **data) -> dict:
    """A recipe for the reviews task: the CSV through a template, the file reward, LoRA, 2 steps of 4 completions."""
    return {
        "model": {"name": model, "lora": True},
        "data": {"file": "reviews.csv", "prompt_template": "Review: {review}\nSentiment:", "eval_size": 4, **data},
        "rewards": ["../lib/sentiment.py:label_match"],
        "training": {
            "max_steps": 2,
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 4,
            "save_steps": 1,
        },
        "eval": {"samples": 2},
        "health": {"preflight": "off"},
        "output_dir": str(output_dir),
    }


def write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    return path


DATA_FORMS = [
    # inline prompts with inline eval prompts
    {
        "prompts": ["2+2?", "3+3?"],
        "eval_prompts": ["4+4?"],
        "file": None,
        "prompt_template": None,
        "eval_size": None,
        "rewards": ["digit_exact"],
    },
    # a file through its prompt column (the template left out), with rows held out by number
    {"file": "prompts.csv", "prompt_column": "question", "prompt_template": None},
    # a file through a template, held out by number
    {},
    # a file through a template, held out by share
    {"eval_size": None, "eval_fraction": 0.25},
    # a file through a template, eval rows from another file
    {"eval_size": None, "eval_file": "reviews.csv"},
    # a file through a template and the default column named as well (what a run directory recorded before)
    {"prompt_column": "prompt"},
    # the built-in generator, with its own held-out rows
    {"source": "arith", "file": None, "prompt_template": None, "eval_size": None, "rewards": ["math_accuracy"]},
]


@pytest.mark.parametrize("form", DATA_FORMS)
def test_each_data_form_recorded_in_a_run_directory_validates_as_it_is(form, task, tiny_model, tmp_path):
    with open(task / "prompts.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["question", "label"], *[[f"q{i}", "positive"] for i in range(12)]])
    form = dict(form)
    doc = own_doc(str(tiny_model), tmp_path / "runs" / "x")
    if "rewards" in form:
        doc["rewards"] = form.pop("rewards")
    doc["data"] = {key: value for key, value in {**doc["data"], **form}.items() if value is not None}
    first, again = recorded_round_trip(write(task / "recipe.yaml", doc), tmp_path / "elsewhere" / "run")
    assert again == first


def step_one(run_dir: Path) -> dict:
    """The first metrics line, without what measures time (which differs from run to run)."""
    first = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    return {key: value for key, value in first.items() if "time" not in key and "seconds" not in key}


@pytest.mark.parametrize(
    "one, other",
    [
        ({"eval": {"samples": 2}}, {"eval": {"samples": 8}}),  # the eval before draws 4 times as many samples
        # the pre-flight samples, or not (no eval after it, whose own seeding would hide what it left)
        (
            {"health": {"preflight": "off"}, "eval": {"enabled": False}},
            {"health": {"preflight": "warn"}, "eval": {"enabled": False}},
        ),
    ],
)
def test_evals_and_preflight_leave_training_random_stream_alone(one, other, digit_doc, tiny_model, tmp_path, no_hub):
    import copy

    import grpo_ext

    seen = []
    for i, sections in enumerate((one, other)):
        doc = tiny_doc(copy.deepcopy(digit_doc), tiny_model, tmp_path / f"run{i}", **sections)
        doc["training"].update(max_steps=1, save_strategy="no", max_completion_length=8)
        grpo_ext.train(write(tmp_path / f"r{i}.yaml", doc))
        seen.append(step_one(tmp_path / f"run{i}"))
    assert seen[0] == seen[1]


INSTEAD = ", or give eval_prompts or eval_file instead"


@pytest.mark.parametrize(
    "change, expected",
    [
        # every row held out: nothing left to train on
        (
            {"eval_size": 40},
            "data.eval_size: holds out 40 of 40 training rows, leaving 0; a step samples 1 prompt (4 completions, 4 per "
            "prompt); hold out at most 39" + INSTEAD,
        ),
        # one row left where a step samples two prompts
        (
            {"eval_size": 39, "batch": 8},
            "data.eval_size: holds out 39 of 40 training rows, leaving 1; a step samples 2 prompts (8 completions, 4 per "
            "prompt); hold out at most 38" + INSTEAD,
        ),
        # a share that rounds to no row at all
        (
            {"eval_size": None, "eval_fraction": 0.01},
            "data.eval_fraction: holds out 0 of 40 training rows; hold out at least one",
        ),
        # a misspelt key says so once, without the missing-column line that only follows from it
        ({"promt_template": "Review: {review}"}, "data.promt_template: unknown key; did you mean 'prompt_template'?"),
    ],
)
def test_a_bad_data_section_is_one_line_before_anything_is_made(change, expected, task, tiny_model, tmp_path, capsys):
    change = dict(change)
    doc = own_doc(str(tiny_model), tmp_path / "runs" / "sentiment")
    doc["training"]["per_device_train_batch_size"] = change.pop("batch", 4)
    if "promt_template" in change:
        del doc["data"]["prompt_template"]
    doc["data"] = {key: value for key, value in {**doc["data"], **change}.items() if value is not None}
    path = write(task / "recipe.yaml", doc)
    for verb in (["validate", str(path)], ["train", str(path), "--dry-run"], ["train", str(path)]):
        assert cli.main(verb) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {path}: {expected}"]
    assert not (tmp_path / "runs").exists()  # train stopped before it made output_dir's parent


def interrupt_after_first_checkpoint():
    """A TrainerCallback that stops the run as Ctrl-C does, once checkpoint-1 is saved (and marked complete)."""
    from transformers import TrainerCallback

    class Interrupt(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            raise KeyboardInterrupt

    return Interrupt()


def test_own_task_interrupted_then_resumed_merged_and_evaluated(task, tiny_model, tmp_path, no_hub, capsys, monkeypatch):
    import grpo_ext

    run = tmp_path / "runs" / "sentiment"
    path = write(task / "recipe.yaml", own_doc(str(tiny_model), run))
    with pytest.raises(KeyboardInterrupt):
        grpo_ext.train(path, callbacks=[interrupt_after_first_checkpoint()])
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
    card = (run / "README.md").read_text()
    assert "[None]" not in card and f"fine-tuned version of local directory {tiny_model}" in card  # item 8
    first = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    capsys.readouterr()

    monkeypatch.chdir(tmp_path)  # the run's own recipe, read from elsewhere, means the same
    assert cli.main(["train", str(run / "recipe.yaml"), "--resume"]) == 0
    err = capsys.readouterr().err
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and records[0] == first[0]
    assert records[1]["train_seconds"] > records[0]["train_seconds"]  # counted on from the time up to checkpoint-1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumed_at"] == [1]
    assert summary["train_seconds"] >= records[1]["train_seconds"]
    shown = re.search(r"step 2/2 .*  ([0-9.]+) s/step", err)
    assert shown and float(shown[1]) == pytest.approx(records[1]["train_seconds"] / 2, abs=0.051)
    report = (run / "report.md").read_text()
    assert f"training time {summary['train_seconds']:.1f} s ({summary['train_seconds'] / 2:.1f} s/step)" in report
    assert "- **Resumed** from the checkpoint of step 1" in report

    assert cli.main(["merge", str(run)]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "model: " in line] == [f"grpo_ext: model: local directory {tiny_model}"]
    assert (run / "merged" / "config.json").is_file()

    assert cli.main(["eval", str(run / "recipe.yaml"), "--model", str(run)]) == 0
    out = capsys.readouterr().out.splitlines()
    prompts = out[out.index(next(line for line in out if line.startswith("samples ("))) + 1 :: 2]
    assert prompts[0].startswith('  "Review: review number') and "\\nsecond line\\nSentiment:" in prompts[0]


@pytest.mark.parametrize(
    "argv, expected",
    [
        # a file reward that reads a column, scored without it: the column named, and how to give it
        (
            ["rewards", "score", "lib/sentiment.py:label_match", "--completion", "positive"],
            "error: rewards score: lib/sentiment.py:label_match reads column 'label' of each row; pass --column label=VALUE",
        ),
        # a registry reward whose column is the answer: --answer gives it
        (
            ["rewards", "score", "math_accuracy", "--completion", "5"],
            "error: rewards score: math_accuracy reads column 'answer' of each row; pass --answer VALUE",
        ),
        # rewards show on a file reward: where it is defined, and the columns it reads
        (["rewards", "show", "lib/sentiment.py:label_match"], "source: {tmp}/lib/sentiment.py, line 1"),
        (["rewards", "show", "lib/sentiment.py:label_match"], "columns: label (each row's values, as keyword arguments)"),
        # --gpu-memory in GB is 10^9 bytes, and the plan says how it read the size
        (["plan", "task/recipe.yaml", "--gpu-memory", "12GB"], "  --gpu-memory 12GB: 12 x 10^9 bytes (GB) = 11.18 GiB"),
        (["plan", "task/recipe.yaml", "--gpu-memory", "12GiB"], "  --gpu-memory 12GiB: 12 x 2^30 bytes (GiB) = 12.00 GiB"),
    ],
)
def test_own_task_command_lines(argv, expected, task, tiny_model, tmp_path, capsys, monkeypatch):
    write(task / "recipe.yaml", own_doc(str(tiny_model), tmp_path / "runs" / "sentiment"))
    monkeypatch.chdir(tmp_path)
    cli.main(argv)
    seen = capsys.readouterr()
    assert expected.format(tmp=tmp_path) in (seen.out + seen.err).splitlines()
