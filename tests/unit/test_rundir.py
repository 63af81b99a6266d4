"""The run directory: nothing of the user's touched, finished runs kept, a resume decided before anything is
changed, only complete checkpoints resumed, clean metrics (one run at a time, with real processes:
tests/integration/test_rundir_processes.py)."""

import doctest
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core import files
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import validate
from grpo_ext.run import rundir
from grpo_ext.settings import output_dir


def fake_checkpoint(run: Path, step: int, *, complete: bool = True) -> Path:
    ckpt = run / f"checkpoint-{step}"
    rundir.record(run, ckpt.name)  # as a run does, before TRL saves it
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"w" * 100)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if complete:
        rundir.write_manifest(ckpt)
    return ckpt


def write_summary(run: Path, **fields) -> None:
    """summary.json as a run writes it: recorded in the marker first, carrying the marker's run id."""
    rundir.record(run, "summary.json")
    marker = json.loads((run / output_dir.MARKER).read_text())
    (run / "summary.json").write_text(json.dumps({"recipe": "r.yaml", **fields, "run_id": marker["id"]}))


def fake_run(run: Path, status: str, *steps: int) -> Path:
    """A run directory as a run leaves it, each entry written as a run writes it (recorded in the marker first):
    the marker, summary.json, metrics.jsonl and complete checkpoints."""
    rundir.commit(rundir.prepare(str(run), overwrite=False, resume=False))
    rundir.release(run, remove=True)
    write_summary(run, status=status)
    rundir.record(run, "metrics.jsonl")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward": 0.1}) + "\n" for s in range(1, 7)))
    for step in steps:
        fake_checkpoint(run, step)
    return run


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` with its bytes (None for a folder): equal snapshots mean nothing changed."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


@pytest.fixture
def run(tmp_path):
    yield tmp_path / "run"
    rundir.release(tmp_path / "run")


@pytest.mark.parametrize(
    "damage,complete",
    [
        (None, True),  # manifest written after the save: complete
        ("no manifest", False),  # killed before the save finished
        ("file shorter", False),  # a file cut short after the manifest was written
        ("file missing", False),  # a deletion cut short
        ("manifest garbled", False),  # the manifest itself cut short
    ],
)
def test_checkpoint_completeness(damage, complete, run):
    ckpt = fake_checkpoint(run, 4)
    if damage == "no manifest":
        (ckpt / rundir.MANIFEST).unlink()
    elif damage == "file shorter":
        (ckpt / "model.safetensors").write_bytes(b"w" * 10)
    elif damage == "file missing":
        (ckpt / "trainer_state.json").unlink()
    elif damage == "manifest garbled":
        (ckpt / rundir.MANIFEST).write_text('{"files": {"trainer_st')
    assert rundir.is_complete(ckpt) is complete


def test_resume_picks_last_complete_and_truncates_metrics(run):
    fake_run(run, "running", 2, 4)
    fake_checkpoint(run, 6, complete=False)  # cut short by a kill
    lines = [json.dumps({"step": s, "reward": s / 10}) for s in range(1, 8)]
    (run / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 8, "rew')  # last line cut short
    write_summary(run, status="running", eval_before={"x": 1})
    before = snapshot(run)
    prepared = rundir.prepare(str(run), overwrite=False, resume=True)
    assert prepared.resume_from == run / "checkpoint-4"
    assert prepared.previous["eval_before"] == {"x": 1}
    assert {k: v for k, v in snapshot(run).items() if k != rundir.LOCK} == before  # deciding changed nothing
    rundir.commit(prepared)
    assert not (run / "checkpoint-6").exists()  # the incomplete checkpoint is removed
    assert [r["step"] for r in rundir.read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]


def _damage_only_checkpoint(run: Path) -> None:
    fake_run(run, "running", 4)
    (run / "checkpoint-4" / "trainer_state.json").write_text('{"global_st')  # truncated after the save


def _damage_content(run: Path) -> None:
    fake_run(run, "running", 2, 4)
    (run / "checkpoint-4" / "model.safetensors").write_bytes(b"x" * 100)  # same size, other bytes


@pytest.mark.parametrize(
    "state,overwrite,resume,expected",
    [
        # (what the directory holds, --overwrite, resume, error text or the checkpoint resumed from)
        ("missing", False, False, None),  # fresh run
        ("missing", False, "auto", None),  # resume: auto with nothing to resume starts one
        ("missing", False, True, "--resume: output_dir .* does not exist, so there is nothing to resume"),
        ("empty", False, True, "--resume: output_dir .* holds no run, so there is nothing to resume"),
        ("finished", False, False, "already holds a run; pass --overwrite to replace it, or choose another"),
        ("finished", False, True, "holds a finished run; there is nothing to resume; pass --overwrite"),
        ("finished", True, False, None),  # replaced
        ("unfinished", False, False, r"--resume to continue it \(it stopped; last complete checkpoint: checkpoint-2\)"),
        ("unfinished", False, True, "checkpoint-2"),
        ("unfinished", True, True, "--overwrite and --resume contradict each other"),
        ("no checkpoint", False, True, "has no complete checkpoint .*; pass --overwrite to start it again"),
        ("no checkpoint", False, "auto", None),  # resume: auto starts again, and says so
        ("truncated state", False, True, "checkpoint-4 was complete when saved, but trainer_state.json is 11 bytes"),
        ("changed weights", False, "auto", "checkpoint-4 was complete when saved, but model.safetensors has changed"),
        # a damaged summary.json cannot show the marker's run id: the folder is not provably a run's
        ("damaged summary", False, True, "summary.json is damaged: a JSON list, not a run's summary, so its run id"),
        ("user files", False, False, "is not empty and holds no grpo_ext run, so nothing is written there"),
        ("user files", True, False, "is not empty and holds no grpo_ext run"),  # --overwrite deletes none of them
        ("user files", False, True, "holds no grpo_ext run"),  # nor does --resume write over them
    ],
)
def test_prepare_decides_and_changes_nothing(state, overwrite, resume, expected, run):
    if state == "empty":
        run.mkdir()
    elif state in ("finished", "unfinished", "damaged summary"):
        fake_run(run, "completed" if state == "finished" else "running", 2)
        if state == "damaged summary":
            (run / "summary.json").write_text("[]")
    elif state == "no checkpoint":
        fake_run(run, "running")
        fake_checkpoint(run, 2, complete=False)
    elif state == "truncated state":
        _damage_only_checkpoint(run)
    elif state == "changed weights":
        _damage_content(run)
    elif state == "user files":
        run.mkdir()
        (run / "summary.json").write_text('{"mine": true}')  # a user's own file of a run's name
        (run / "notes.md").write_text("keep me")
    before = snapshot(run) if run.exists() else None
    if expected and not expected.startswith("checkpoint-2"):
        with pytest.raises(RecipeError, match=expected):
            rundir.prepare(str(run), overwrite=overwrite, resume=resume)
        assert (snapshot(run) if run.exists() else None) == before  # nothing changed, no lock file left
        return
    prepared = rundir.prepare(str(run), overwrite=overwrite, resume=resume)
    assert (prepared.resume_from.name if prepared.resume_from else None) == expected
    rundir.commit(prepared)
    if prepared.replace:
        assert sorted(p.name for p in run.iterdir()) == sorted([rundir.LOCK, output_dir.MARKER])


def test_overwrite_deletes_only_what_the_run_wrote(run, capsys):
    fake_run(run, "completed", 2)
    rundir.record(run, "final")
    (run / "final").mkdir()
    (run / "notes.md").write_text("mine")  # put there by the user
    (run / "merged").mkdir()  # the user's, named like merge's output: not recorded, so kept
    files.temporary_beside(run / "summary.json").write_text("{")  # what write_atomic leaves when killed mid-write
    old_id = json.loads((run / output_dir.MARKER).read_text())["id"]
    prepared = rundir.prepare(str(run), overwrite=True, resume=False)
    rundir.commit(prepared)
    assert sorted(p.name for p in run.iterdir()) == sorted([rundir.LOCK, output_dir.MARKER, "merged", "notes.md"])
    assert prepared.notes == ["--overwrite: kept 2 entries this run did not write: merged, notes.md"]
    marker = json.loads((run / output_dir.MARKER).read_text())  # a new run: a new id, nothing of the old one listed
    assert marker["id"] == prepared.run_id != old_id and marker["entries"] == [output_dir.MARKER, rundir.LOCK]


def user_files(folder: Path) -> dict[str, bytes | None]:
    """A folder of a user's work: dotfiles, a project, a file named like one a run writes."""
    (folder / ".ssh").mkdir(parents=True)
    (folder / ".ssh" / "id_ed25519").write_text("secret")
    (folder / ".bashrc").write_text("alias ll='ls -l'")
    (folder / "project").mkdir()
    (folder / "project" / "README.md").write_text("my project")
    (folder / "summary.json").write_text("{}")
    return snapshot(folder)


@pytest.mark.parametrize(
    "where,expected",
    [
        ("folder", "is not empty and holds no grpo_ext run"),  # a folder of user files
        ("home", "is your home directory"),  # HOME points at a fake home
        ("above home", "is a folder above your home directory"),
        ("cwd", "is the working directory"),
        ("empty string", "output_dir: is empty"),  # output_dir: "" was the working directory
        ("recipe folder", "is the recipe's folder"),
    ],
)
def test_overwrite_never_empties_a_users_folder(where, expected, tmp_path, monkeypatch, digit_doc, capsys):
    home, work = tmp_path / "home" / "me", tmp_path / "work"
    before = {"home": user_files(home), "work": user_files(work)}
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    recipe = work / "project" / "recipe.yaml"
    target = {
        "folder": str(work),
        "home": "~",
        "above home": str(home.parent),
        "cwd": ".",
        "empty string": "",
        "recipe folder": str(recipe.parent),
    }[where]
    commands = [["validate"], ["train", "--dry-run"], ["train", "--overwrite"]]  # refused while the recipe is checked
    if where == "folder":  # a folder's contents are looked at when a run starts
        monkeypatch.chdir(tmp_path)
        recipe = tmp_path / "recipe.yaml"
        commands = [["train", "--overwrite"], ["train", "--resume"], ["train"]]
    digit_doc["output_dir"] = target
    recipe.write_text(yaml.safe_dump(digit_doc))
    before["work"] = snapshot(work)
    for verb, *flags in commands:
        argv = [verb, str(recipe), *flags]
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1, err
    assert {"home": snapshot(home), "work": snapshot(work)} == before


def test_root_is_refused_and_its_deletion_is_never_planned():
    """``/`` is refused while the recipe is checked; and the run directory, asked directly, refuses it before it
    creates anything (a dry run of the deletion: ``prepare`` only decides)."""
    assert output_dir.check("/").startswith("output_dir: '/' is the root directory")
    lock_there = Path("/", rundir.LOCK).exists()
    with pytest.raises(RecipeError, match="is not empty and holds no grpo_ext run"):
        rundir.prepare("/", overwrite=True, resume=False)
    assert Path("/", rundir.LOCK).exists() == lock_there and not Path("/", output_dir.MARKER).exists()


def test_a_runs_own_recipe_may_name_its_run_directory(tmp_path, digit_doc, monkeypatch):
    """RUN/recipe.yaml names RUN as its output_dir: merge and resume read it from there."""
    monkeypatch.chdir(tmp_path)
    run = fake_run(tmp_path / "runs" / "x", "running", 2)
    digit_doc["output_dir"] = "runs/x"
    (run / "recipe.yaml").write_text(validate(digit_doc).to_yaml())
    assert output_dir.check("runs/x", run / "recipe.yaml") is None
    assert "the recipe's folder" in output_dir.check("runs/x", run / "other.yaml")


def _recorded_run(run: Path, digit_doc: dict, write_recipe, learning_rate: float) -> Path:
    """An interrupted run of the digit recipe (recorded with ``learning_rate``) and a recipe file for it."""
    digit_doc["output_dir"] = str(run)
    fake_run(run, "running", 2)
    fake_checkpoint(run, 4, complete=False)  # its save cut short
    recorded = dict(digit_doc, training={**digit_doc["training"], "learning_rate": learning_rate})
    rundir.record(run, "recipe.yaml")
    (run / "recipe.yaml").write_text(validate(recorded).to_yaml())
    return write_recipe(digit_doc)


@pytest.mark.parametrize(
    "case,argv,expected",
    [
        ("recipe changed", ["--resume"], "--resume: this recipe differs from the run's in training.learning_rate"),
        ("recipe changed", ["resume=auto"], "--resume: this recipe differs from the run's in training.learning_rate"),
        ("recipe damaged", ["--resume"], "recipe.yaml is missing or damaged"),
        ("finished", ["--resume"], "holds a finished run; there is nothing to resume"),
        ("finished", [], "already holds a run"),
    ],
)
def test_a_refused_train_leaves_the_run_as_it_was(case, argv, expected, run, digit_doc, write_recipe, capsys):
    """Checkpoints, metrics, summary and the lock file of a killed run (its pid) are untouched by a refused train."""
    path = _recorded_run(run, digit_doc, write_recipe, learning_rate=digit_doc["training"]["learning_rate"] * 2)
    if case == "recipe damaged":
        (run / "recipe.yaml").write_text("model: {name: x")
    if case == "finished":
        write_summary(run, status="completed")
    (run / rundir.LOCK).write_text("4242\n")  # left by a killed run
    before = snapshot(run)
    assert cli.main(["train", str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert snapshot(run) == before


def test_a_refusal_leaves_no_lock_file(run, digit_doc, write_recipe, capsys):
    path = _recorded_run(run, digit_doc, write_recipe, learning_rate=1.0)
    before = snapshot(run)
    assert cli.main(["train", str(path), "--resume"]) == 2
    assert snapshot(run) == before and not (run / rundir.LOCK).exists()


def test_resume_from_another_directory_names_the_path(tmp_path, digit_doc, write_recipe, monkeypatch, capsys):
    """output_dir is relative to the working directory: a --resume typed elsewhere finds nothing and says where it looked."""
    digit_doc["output_dir"] = "runs/x"
    path = write_recipe(digit_doc)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert cli.main(["train", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"--resume: output_dir {elsewhere / 'runs' / 'x'} does not exist, so there is nothing to resume" in err
    assert list(elsewhere.iterdir()) == []


def test_a_run_that_wrote_nothing_leaves_no_folders(tmp_path):
    """A run that stops before it writes anything (a model that fails to load) removes the run directory and the
    folders above it that it made, and keeps a folder that was there before."""
    (tmp_path / "mine").mkdir()
    prepared = rundir.prepare(str(tmp_path / "mine" / "runs" / "a" / "run"), overwrite=False, resume=False)
    rundir.commit(prepared)
    rundir.discard_if_empty(prepared)
    assert [p.name for p in tmp_path.rglob("*")] == ["mine"]


@pytest.mark.parametrize("text", ["model: {name: x", "[1, 2]", "a: &a [*a]"])  # cut short, not a mapping, a loop
def test_merge_on_a_damaged_run_recipe_says_one_line(text, run, capsys):
    fake_run(run, "completed")
    (run / "final").mkdir()
    (run / "final" / "adapter_config.json").write_text('{"base_model_name_or_path": "x"}')
    (run / "final" / "adapter_model.safetensors").write_bytes(b"0")
    (run / "recipe.yaml").write_text(text)
    assert cli.main(["merge", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err


# --- whose a folder is: only a marker that names its own folder, with the run's id, makes a run directory ----------


def project(folder: Path) -> None:
    """A user's project, its entries named like ones a run writes (TensorBoard's runs/, final/, TRL's README.md)."""
    (folder / "runs" / "exp1").mkdir(parents=True)
    (folder / "runs" / "exp1" / "data.csv").write_text("a,b\n1,2\n")
    (folder / "final").mkdir()
    (folder / "final" / "thesis.tex").write_text("\\documentclass{article}\n")
    (folder / "README.md").write_text("# my project\n")


def _copied_marker(folder: Path, other: Path) -> None:
    project(folder)
    (folder / output_dir.MARKER).write_bytes((fake_run(other, "running") / output_dir.MARKER).read_bytes())


def _copied_summary(folder: Path, other: Path) -> None:
    project(folder)
    fake_run(other, "running")
    (other / "recipe.yaml").write_text("model: {name: x}\n")
    for name in ("summary.json", "recipe.yaml"):  # copied for analysis
        (folder / name).write_bytes((other / name).read_bytes())


def _in_a_run(folder: Path, other: Path, *steps: int) -> None:
    fake_run(folder, "running", *steps)
    project(folder)  # the user's README.md, final/ and runs/ inside a real run directory that did not write them


OWNERSHIP = {
    "empty marker": lambda folder, other: (project(folder), (folder / output_dir.MARKER).write_text("")),
    "not JSON": lambda folder, other: (project(folder), (folder / output_dir.MARKER).write_text("run\n")),
    "copied marker": _copied_marker,
    "copied summary": _copied_summary,
    "user entries": lambda folder, other: _in_a_run(folder, other, 2),  # would resume from checkpoint-2
    "user entries, no checkpoint": lambda folder, other: _in_a_run(folder, other),  # resume: auto would start again
}


@pytest.mark.parametrize(
    "case,expected",
    [
        # (what the folder holds, the refusal's words)
        ("empty marker", "is not provably a grpo_ext run directory (its .grpo_ext_run is empty)"),
        ("not JSON", "is not provably a grpo_ext run directory (its .grpo_ext_run is not JSON)"),
        ("copied marker", "holds a run recorded at "),  # a marker names its own folder only: this one names another
        ("copied summary", "summary.json and recipe.yaml but no .grpo_ext_run"),
        ("user entries", "holds README.md, final, runs, which this run did not write"),
        ("user entries, no checkpoint", "holds README.md, final, runs, which this run did not write"),
    ],
)
@pytest.mark.parametrize("overwrite,resume", [(True, False), (False, "auto"), (False, True)], ids=["overwrite", "auto", "resume"])
def test_a_folder_not_provably_the_runs_loses_nothing(case, expected, overwrite, resume, tmp_path):
    """A marker proves a run directory only when it names that folder and the run's summary carries its id; even
    then only the entries the run recorded are its own. The user's files stay byte for byte, and no lock is left."""
    folder = tmp_path / "proj"
    folder.mkdir()
    OWNERSHIP[case](folder, tmp_path / "runs" / "digit")
    before = snapshot(folder)
    try:
        with pytest.raises(RecipeError, match=re.escape(expected)) as info:
            rundir.commit(rundir.prepare(str(folder), overwrite=overwrite, resume=resume))
    finally:
        rundir.release(folder)
    assert "\n" not in str(info.value)
    assert snapshot(folder) == before


def test_a_moved_run_is_neither_replaced_nor_continued(tmp_path):
    """A run directory moved since (its marker names where it was) is not provably the run's where it is now."""
    old, new = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    fake_run(old, "running", 2)
    old.rename(new)
    before = snapshot(new)
    for overwrite, resume in [(True, False), (False, True), (False, "auto"), (False, False)]:
        with pytest.raises(RecipeError) as info:
            rundir.prepare(str(new), overwrite=overwrite, resume=resume)
        assert info.value.problems == [
            f"output_dir: {new} holds a run recorded at {old.resolve()} (moved or copied here since), so nothing in it "
            f"is deleted or continued; move it back to {old.resolve()} to resume or overwrite it there, or choose "
            "another: output_dir=runs/new"
        ]
    assert snapshot(new) == before


def older_run(run: Path, *, marker: bool = True) -> Path:
    """A run directory as grpo_ext left it before run ids: a marker without one (or none at all), a summary without
    one, a complete checkpoint-2 and checkpoint-4 cut short."""
    run.mkdir(parents=True)
    if marker:
        (run / output_dir.MARKER).write_text('{"grpo_ext": "run directory"}\n')
    (run / "summary.json").write_text(json.dumps({"status": "running", "recipe": "r.yaml"}))
    (run / "recipe.yaml").write_text("model: {name: x}\n")
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward": 0.1}) + "\n" for s in range(1, 5)))
    for step in (2, 4):
        fake_checkpoint(run, step, complete=step == 2)
    return run


@pytest.mark.parametrize("marker", [True, False], ids=["marker without id", "no marker"])
def test_an_older_run_is_never_deleted_and_resumes_deleting_nothing(marker, run):
    older_run(run, marker=marker)
    before = snapshot(run)
    for overwrite, resume in [(True, False), (False, False)]:
        with pytest.raises(RecipeError, match="records no list of its own files") as info:
            rundir.prepare(str(run), overwrite=overwrite, resume=resume)
        assert "delete the folder yourself to start again" in str(info.value)
    assert snapshot(run) == before
    prepared = rundir.prepare(str(run), overwrite=False, resume="auto")
    assert prepared.resume_from == run / "checkpoint-2"
    rundir.commit(prepared)
    assert (run / "checkpoint-4").is_dir()  # cut short, but not provably the run's: kept, and said
    assert prepared.notes == [
        f"resume: kept checkpoint-4 (cut short): {run} is a run of an older grpo_ext, which records no list of its own "
        "files, so nothing in it is deleted; delete it yourself"
    ]
    marker = json.loads((run / output_dir.MARKER).read_text())  # from now on the run's own, with what it continues
    assert marker["path"] == str(run.resolve()) and marker["id"] == prepared.run_id
    assert set(marker["entries"]) == {
        output_dir.MARKER,
        rundir.LOCK,
        "checkpoint-2",
        "summary.json",
        "metrics.jsonl",
        "recipe.yaml",
    }
    assert json.loads((run / "summary.json").read_text())["run_id"] == prepared.run_id
    assert output_dir.ownership(run).state == output_dir.OURS


def test_an_older_run_without_a_complete_checkpoint_is_not_started_again(run):
    older_run(run)
    shutil.rmtree(run / "checkpoint-2")
    before = snapshot(run)
    for resume in ("auto", True):
        with pytest.raises(
            RecipeError, match="which records no list of its own files, and no complete checkpoint to continue from"
        ):
            rundir.prepare(str(run), overwrite=False, resume=resume)
    assert snapshot(run) == before


@pytest.mark.parametrize("kind", ["new", "older"])
def test_a_symlinked_checkpoint_is_never_followed(kind, tmp_path, run):
    """A checkpoint-N that is a symbolic link is not one the run wrote: --resume refuses in one line, deletes
    nothing there or where it points, and leaves no lock file."""
    if kind == "new":
        fake_run(run, "running", 2)
    else:
        older_run(run)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (run / "checkpoint-5").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(run), snapshot(elsewhere)
    for overwrite, resume in [(False, True), (False, "auto"), (True, False)]:
        if kind == "older" and overwrite:
            continue  # refused for being older, as above
        with pytest.raises(RecipeError, match=r"holds checkpoint-5 \(a symbolic link\), which this run did not write"):
            rundir.prepare(str(run), overwrite=overwrite, resume=resume)
        assert (snapshot(run), snapshot(elsewhere)) == before and not (run / rundir.LOCK).exists()
    assert rundir.checkpoints(run) == sorted(p for p in run.iterdir() if p.name in ("checkpoint-2", "checkpoint-4"))


def test_entries_are_recorded_once_and_only_in_the_runs_own_folder(tmp_path, run):
    fake_run(run, "running")
    rundir.record(run, "final", "runs", "final")
    entries = json.loads((run / output_dir.MARKER).read_text())["entries"]
    assert entries == [output_dir.MARKER, rundir.LOCK, "summary.json", "metrics.jsonl", "final", "runs"]
    moved = tmp_path / "moved"
    run.rename(moved)
    before = snapshot(moved)
    rundir.record(moved, "merged")  # not this folder's marker: nothing recorded
    rundir.record(tmp_path / "nowhere", "merged")  # no marker: nothing happens
    assert snapshot(moved) == before and not (tmp_path / "nowhere").exists()


def test_resume_with_a_symlinked_checkpoint_says_one_line(run, tmp_path, digit_doc, write_recipe, capsys):
    """``--resume`` used to delete a checkpoint-N it took for one cut short with rmtree, which refuses a symbolic link:
    a traceback, and a lock file left. Now: exit 2, one line, nothing deleted there or where the link points."""
    path = _recorded_run(run, digit_doc, write_recipe, learning_rate=digit_doc["training"]["learning_rate"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (run / "checkpoint-5").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(run), snapshot(elsewhere)
    assert cli.main(["train", str(path), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: output_dir: {run} holds checkpoint-5 (a symbolic link), which this run did not write and a run writes "
        f"entries of that name; nothing was deleted: move them out of {run}, or choose another: output_dir=runs/new\n"
    )
    assert (snapshot(run), snapshot(elsewhere)) == before and not (run / rundir.LOCK).exists()


@pytest.mark.parametrize(
    "failure,expected",
    [
        # (what the system refuses, the line)
        (PermissionError(13, "Permission denied"), "Permission denied (EACCES)"),  # a folder of mode 0555
        (OSError(30, "Read-only file system"), "Read-only file system (EROFS)"),  # a read-only mount
    ],
)
def test_an_output_dir_that_cannot_be_made_is_one_line(failure, expected, tmp_path, digit_doc, write_recipe, monkeypatch, capsys):
    digit_doc["output_dir"] = str(tmp_path / "locked" / "runs" / "x")
    path = write_recipe(digit_doc)

    def refuse(self, *args, **kwargs):
        failure.filename = str(self)
        raise failure

    monkeypatch.setattr(Path, "mkdir", refuse)
    assert cli.main(["train", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"error: output_dir: cannot write to {tmp_path / 'locked' / 'runs' / 'x'}: {expected}: {tmp_path / 'locked' / 'runs'}; "
        "choose a folder you can write to: output_dir=runs/new\n"
    )
    monkeypatch.undo()
    assert not (tmp_path / "locked").exists()


def test_a_deletion_the_system_refuses_is_one_line(run, digit_doc, write_recipe, monkeypatch, capsys):
    """--overwrite meets a folder it may not delete from: exit 1, one line, the lock let go, the marker as it was."""
    digit_doc["output_dir"] = str(run)
    path = write_recipe(digit_doc)
    fake_run(run, "completed", 2)
    marker = (run / output_dir.MARKER).read_bytes()

    def refuse(entry, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(entry))

    monkeypatch.setattr(rundir.shutil, "rmtree", refuse)
    assert cli.main(["train", str(path), "--overwrite"]) == 1
    assert capsys.readouterr().err == (
        f"error: output_dir: {run} could not be prepared: Permission denied (EACCES): {run / 'checkpoint-2'}; "
        "free space there (or fix its permissions), then run again\n"
    )
    assert (run / output_dir.MARKER).read_bytes() == marker and not (run / rundir.LOCK).exists()


@pytest.mark.parametrize("module", [output_dir, files])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
