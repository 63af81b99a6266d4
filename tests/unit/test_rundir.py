"""The run directory: nothing of the user's touched, finished runs kept, a resume decided before anything is
changed, only complete checkpoints resumed, clean metrics (one run at a time, with real processes:
tests/integration/test_rundir_processes.py)."""

import json
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
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"w" * 100)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if complete:
        rundir.write_manifest(ckpt)
    return ckpt


def fake_run(run: Path, status: str, *steps: int) -> Path:
    """A run directory as a run leaves it: the marker, summary.json, metrics.jsonl and complete checkpoints."""
    run.mkdir(parents=True, exist_ok=True)
    (run / output_dir.MARKER).write_text("{}\n")
    (run / "summary.json").write_text(json.dumps({"status": status, "recipe": "r.yaml"}))
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
    (run / "summary.json").write_text(json.dumps({"status": "running", "eval_before": {"x": 1}}))
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
        ("damaged summary", False, True, r"summary.json is damaged \(a JSON list"),
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


def test_overwrite_deletes_only_what_a_run_writes(run, capsys):
    fake_run(run, "completed", 2)
    (run / "final").mkdir()
    (run / "notes.md").write_text("mine")  # put there by the user
    files.temporary_beside(run / "summary.json").write_text("{")  # what write_atomic leaves when killed mid-write
    prepared = rundir.prepare(str(run), overwrite=True, resume=False)
    rundir.commit(prepared)
    assert sorted(p.name for p in run.iterdir()) == sorted([rundir.LOCK, output_dir.MARKER, "notes.md"])
    assert prepared.notes == ["--overwrite: kept 1 entry a run does not write: notes.md"]


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
        (run / "summary.json").write_text(json.dumps({"status": "completed", "recipe": "r.yaml"}))
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
