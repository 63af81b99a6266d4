"""Every verb that writes files refuses, in one line and before any model loads, to replace what is there: a file is
replaced only with `--force`, and the line names every file the verb writes (filter's histogram beside its rows,
eval's two files). A folder where a file goes, or a file where a folder goes, is refused even with `--force`."""

import json
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import refuse_to_replace
from grpo_ext.run import models
from grpo_ext.verbs import evaluate

MINE = "the user's own text\n"


class Loaded(Exception):
    """Raised where a model would load: the verb got past every check."""


@pytest.fixture
def where(tmp_path, digit_doc, monkeypatch):
    """A folder holding the digit recipe on a data file (rows.jsonl, prompt in `question`), a LoRA run directory
    (runs/lora: recipe.yaml and final/adapter_config.json) and a run directory without checkpoints (runs/plain);
    every model loader raises Loaded."""
    monkeypatch.chdir(tmp_path)
    for name in ("load", "load_adapter", "merge"):
        monkeypatch.setattr(models, name, lambda *a, **k: (_ for _ in ()).throw(Loaded()))
    monkeypatch.setattr(evaluate, "load_model", lambda *a, **k: (_ for _ in ()).throw(Loaded()))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"question": f"Say {i}.", "n": i}) + "\n" for i in range(4)))
    digit_doc["data"] = {"file": "rows.jsonl", "prompt_column": "question", "eval_prompts": ["Say 5."]}
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(digit_doc))
    lora = tmp_path / "runs" / "lora"
    (lora / "final").mkdir(parents=True)
    (lora / "final" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "smollm2-135m-instruct"}))
    (lora / "rows.jsonl").write_text((tmp_path / "rows.jsonl").read_text())
    (lora / "recipe.yaml").write_text(yaml.safe_dump(digit_doc))
    (tmp_path / "runs" / "plain").mkdir()
    return tmp_path


FILTER = ["filter", "recipe.yaml"]
EVAL = ["eval", "recipe.yaml", "--model", "smollm2-135m-instruct"]
SWEEP = ["eval", "recipe.yaml", "--model", "runs/plain", "--checkpoints"]

REFUSED = [
    # (command line, files there before it (given a user's text), what the one error line says)
    # rows.jsonl and rows.png of the user's were both replaced, the .png never named
    ([*FILTER, "--out", "mine.jsonl"], ["mine.jsonl", "mine.png"], "mine.jsonl and mine.png exist (filter writes"),
    # only the histogram's name is taken: the line still names both files filter writes
    ([*FILTER, "--out", "kept.jsonl"], ["kept.png"], "kept.png exists (filter writes kept.jsonl and kept.png)"),
    # the default output beside the data file, from an earlier filter
    (FILTER, ["rows.filtered.jsonl"], "rows.filtered.jsonl exists (filter writes rows.filtered.jsonl and rows"),
    # the user's notes were replaced by the schema
    (["schema", "--out", "notes.txt"], ["notes.txt"], "--out: notes.txt exists; pass --force to replace it"),
    # a file where eval makes its folder: FileExistsError after the model had loaded
    ([*EVAL, "--out", "report"], ["report"], "--out: report is a file, not a folder; eval writes report/eval.json"),
    # an eval.md of the user's beside no eval.json was replaced
    ([*EVAL, "--out", "out"], ["out/eval.md"], "out/eval.md exists (eval writes out/eval.json and out/eval.md)"),
    # the checkpoint sweep's three files in the run directory
    (SWEEP, ["runs/plain/eval_curve.png"], "eval_curve.png exists (eval --checkpoints writes runs/plain/eval_curve.json"),
    # a file where merge makes its folder: NotADirectoryError
    (["merge", "runs/lora", "--out", "notes.txt"], ["notes.txt"], "--out: notes.txt is a file; merge writes a folder there"),
    # a folder with something in it
    (["merge", "runs/lora", "--out", "old"], ["old/config.json"], "--out: old is not empty (config.json); merge writes into"),
    # cp, whose rule the others now share
    (["cp", "digit", "my.yaml"], ["my.yaml"], "my.yaml exists; pass --force to replace it"),
]


@pytest.mark.parametrize("argv,there,said", REFUSED, ids=[" ".join(a[:1] + a[2:]) for a, _, _ in REFUSED])
def test_a_verb_refuses_to_replace_what_is_there(argv, there, said, where, capsys):
    for name in there:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(MINE)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and said in err, err
    assert all((where / name).read_text() == MINE for name in there)  # nothing replaced


FORCED = [
    # (command line with --force, files there before it, what stops it: a model loading, or the line that never gives way)
    ([*FILTER, "--out", "mine.jsonl", "--force"], ["mine.jsonl", "mine.png"], Loaded),
    ([*EVAL, "--out", "out", "--force"], ["out/eval.json", "out/eval.md"], Loaded),
    ([*EVAL, "--out", "out", "--overwrite"], ["out/eval.json"], Loaded),  # the older name of the option
    (["merge", "runs/lora", "--out", "old", "--force"], ["old/config.json"], Loaded),
    ([*EVAL, "--out", "report", "--force"], ["report"], "report is a file, not a folder"),  # never a file for a folder
    (["merge", "runs/lora", "--out", "notes.txt", "--force"], ["notes.txt"], "notes.txt is a file; merge writes a folder"),
    ([*FILTER, "--out", "out.jsonl", "--force"], ["out.png/x"], "out.png is a folder; filter writes a file there"),
]


@pytest.mark.parametrize("argv,there,stop", FORCED, ids=[" ".join(a[:1] + a[2:]) for a, _, _ in FORCED])
def test_force_replaces_files_only(argv, there, stop, where, capsys):
    for name in there:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(MINE)
    if stop is Loaded:
        with pytest.raises(Loaded):
            cli.main(argv)
        return
    assert cli.main(argv) == 2
    assert stop in capsys.readouterr().err


def test_schema_force_replaces_the_file(where, capsys):
    (where / "s.json").write_text(MINE)
    assert cli.main(["schema", "--out", "s.json", "--force"]) == 0
    assert json.loads((where / "s.json").read_text())["title"].startswith("grpo_ext")


@pytest.mark.parametrize(
    "verb,names",
    [
        ("filter", [".png", "--force"]),  # the histogram written beside the rows
        ("eval", ["eval.json", "eval.md", "eval_curve.png", "--force"]),
        ("merge", ["--force"]),
        ("schema", ["--force"]),
    ],
)
def test_help_names_every_file_and_force(verb, names, capsys):
    with pytest.raises(SystemExit):
        cli.main([verb, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in names), text


@pytest.mark.parametrize(
    "paths,there,folder,said",
    [
        # (paths written, what is there, paths are folders, the line or None)
        (["a.txt"], [], False, None),  # nothing there
        (["a.txt"], ["a.txt"], False, "--out: {}/a.txt exists; pass --force to replace it"),
        (["a.txt", "a.png"], ["a.png"], False, "a.png exists (x writes {0}/a.txt and {0}/a.png); pass --force to replace it"),
        (["d/a.txt"], ["d"], False, "--out: {}/d is a file, not a folder; x writes"),  # a file above
        (["d"], ["d/e"], True, "--out: {}/d is not empty (e); x writes into it"),
        (["d"], [], True, None),  # a folder to make
    ],
)
def test_refuse_to_replace(paths, there, folder, said, tmp_path):
    for name in there:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(MINE)
    targets = [tmp_path / p for p in paths]
    if said is None:
        refuse_to_replace(targets, False, command="x", folder=folder)
        return
    with pytest.raises(RecipeError) as caught:
        refuse_to_replace(targets, False, command="x", folder=folder)
    assert said.format(tmp_path) in str(caught.value)
    if "--force" in str(caught.value):
        refuse_to_replace(targets, True, command="x", folder=folder)  # what --force lets through


def test_an_empty_folder_is_free(tmp_path):
    (tmp_path / "d").mkdir()
    refuse_to_replace([Path(tmp_path / "d")], False, command="merge", folder=True)
