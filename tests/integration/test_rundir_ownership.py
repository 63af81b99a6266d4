"""Whose a folder is, with real runs of the tiny model (``prepare`` and ``commit`` alone: tests/unit/test_rundir.py):
a copied or forged marker never lets ``train`` delete or replace a user's files, a run's marker lists every entry it
and ``eval --checkpoints`` wrote, and a disk that fills up mid-run is one line, not a traceback."""

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import rundir
from grpo_ext.settings import output_dir
from tests.helpers import ROOT, tiny_doc

USER_FILES = {"runs/exp1/data.csv": "a,b\n1,2\n", "final/thesis.tex": "\\documentclass{article}\n", "README.md": "# mine\n"}


def digit() -> dict:
    return yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())


def tiny_recipe(path, model, run, *, tensorboard: bool = True, **sections) -> str:
    """A tiny digit recipe writing to ``run``, by default with TensorBoard's event files (runs/) among what it writes."""
    doc = tiny_doc(digit(), model, run, **sections)
    doc["training"]["report_to"] = ["tensorboard"] if tensorboard else "none"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(scope="module")
def finished(tiny_model, tmp_path_factory):
    """A finished tiny run (2 steps, a checkpoint kept, eval on, TensorBoard on) and its recipe."""
    root = tmp_path_factory.mktemp("owned")
    recipe = tiny_recipe(root / "r.yaml", tiny_model, root / "runs" / "digit")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        assert cli.main(["train", recipe]) == 0
    rundir.release(root / "runs" / "digit")
    return recipe, root / "runs" / "digit"


@pytest.fixture(scope="module")
def failed(tiny_model, tmp_path_factory):
    """A run that failed at its first step: no checkpoint, so no README.md, final/ or runs/ of its own."""
    root = tmp_path_factory.mktemp("failed")
    (root / "broken.py").write_text("def broken(completions, **kwargs):\n    raise ValueError('no')\n")
    recipe = tiny_recipe(
        root / "r.yaml", tiny_model, root / "run", tensorboard=False, rewards=["./broken.py:broken"], eval={"enabled": False}
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        assert cli.main(["train", recipe]) == 1
    rundir.release(root / "run")
    assert {"README.md", "final", "runs"}.isdisjoint(p.name for p in (root / "run").iterdir())
    return recipe, root / "run"


def test_the_marker_lists_every_entry_the_run_and_eval_wrote(finished, capsys, no_hub):
    recipe, run = finished
    marker = json.loads((run / output_dir.MARKER).read_text())
    assert marker["path"] == str(run.resolve()) and json.loads((run / "summary.json").read_text())["run_id"] == marker["id"]
    written = {p.name for p in run.iterdir()}
    assert {"README.md", "final", "runs", "checkpoint-2", "completions.jsonl", "curves.png"} <= written
    assert set(marker["entries"]) - written == {rundir.LOCK, "checkpoint-1"}  # the lock went at the end; checkpoint-1
    assert written <= set(marker["entries"])  # was deleted by save_total_limit: 1
    assert cli.main(["eval", recipe, "--model", str(run), "--checkpoints"]) == 0
    capsys.readouterr()
    entries = json.loads((run / output_dir.MARKER).read_text())["entries"]
    assert {"eval_curve.json", "eval_curve.md", "eval_curve.png"} <= set(entries)
    assert {p.name for p in run.iterdir()} <= set(entries)


def _project(folder, finished, failed, case):
    """The folder ``case`` names, holding the user's files."""
    _, run = failed if case == "user files in a run" else finished
    if case == "user files in a run":  # the failed run's own directory: it wrote no README.md, final/ or runs/
        folder = run
    else:
        folder.mkdir()
    for name, text in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    if case == "empty marker":
        (folder / output_dir.MARKER).write_text("")
    elif case == "copied marker":  # cp runs/digit/.grpo_ext_run proj/
        shutil.copy(run / output_dir.MARKER, folder)
    elif case == "copied summary":  # summary.json and recipe.yaml copied for analysis
        for name in ("summary.json", "recipe.yaml"):
            shutil.copy(run / name, folder)
    return folder


@pytest.mark.parametrize(
    "case,expected",
    [
        # (the folder, the refusal's words)
        ("empty marker", "is not provably a grpo_ext run directory (its .grpo_ext_run is empty)"),
        ("copied marker", "holds a run recorded at "),  # the marker names the run's own folder, not this one
        ("copied summary", "holds summary.json and recipe.yaml but no .grpo_ext_run: a run of an older grpo_ext"),
        ("user files in a run", "holds README.md, final, runs, which this run did not write"),
    ],
)
@pytest.mark.parametrize("flag", ["--overwrite", "resume=auto"])
def test_a_copied_or_forged_marker_never_costs_a_user_file(case, expected, flag, finished, failed, tmp_path, capsys, no_hub):
    """The user's README.md, final/ and runs/ stay byte for byte: train exits 2 with one line, before any model loads."""
    folder = _project(tmp_path / "proj", finished, failed, case)
    recipe = finished[0] if case != "user files in a run" else failed[0]
    try:
        assert cli.main(["train", recipe, f"output_dir={folder}", flag]) == 2
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1 and err.startswith("error: output_dir: "), err
        assert {name: (folder / name).read_text() for name in USER_FILES} == USER_FILES
        assert not (folder / rundir.LOCK).exists()
    finally:
        rundir.release(folder)
        if case == "user files in a run":  # the shared failed run as it was
            for name in ("README.md", "final", "runs"):
                shutil.rmtree(folder / name) if (folder / name).is_dir() else (folder / name).unlink(missing_ok=True)


def _tmpfs(where, options: str):
    """A small tmpfs mounted at ``where`` (root only), or skip."""
    where.mkdir()
    if sys.platform != "linux" or subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("mounting a tmpfs needs root on Linux")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    """A 400 KiB file system: a tiny run's first checkpoint (about 490 KB) does not fit."""
    _tmpfs(tmp_path / "disk", "size=400k")
    yield tmp_path / "disk"
    subprocess.run(["umount", str(tmp_path / "disk")], check=True)


@pytest.fixture
def read_only(tmp_path):
    _tmpfs(tmp_path / "ro", "ro,size=64k")
    yield tmp_path / "ro"
    subprocess.run(["umount", str(tmp_path / "ro")], check=True)


def test_a_full_disk_mid_run_is_one_line(small_disk, tiny_model, tmp_path, no_hub):
    """The checkpoint's save fills the disk; recording the failure in summary.json fails as well: still one line,
    exit 1, naming ENOSPC and the run directory, and no lock or temporary file left behind."""
    run = small_disk / "run"
    recipe = tiny_recipe(tmp_path / "r.yaml", tiny_model, run, eval={"enabled": False})
    proc = subprocess.run([sys.executable, "-m", "grpo_ext.train", recipe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("grpo_ext: ")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-3000:]
    assert errors[0].startswith(f"error: training failed: the disk is full (No space left on device, ENOSPC) at {run}")
    assert "--resume" in errors[0]
    left = sorted(p.name for p in run.iterdir())
    assert rundir.LOCK not in left and not [n for n in left if output_dir.temporary_of(n)], left
    assert output_dir.ownership(run).state == output_dir.OURS


def test_a_read_only_location_is_one_line(read_only, tiny_model, tmp_path, capsys, no_hub):
    recipe = tiny_recipe(tmp_path / "r.yaml", tiny_model, read_only / "runs" / "x")
    assert cli.main(["train", recipe]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: output_dir: cannot write to {read_only / 'runs' / 'x'}: Read-only file system (EROFS): "
        f"{read_only / 'runs'}; choose a folder you can write to: output_dir=runs/new\n"
    )
