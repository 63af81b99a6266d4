"""The run directory: one run at a time, finished runs kept, only complete checkpoints resumed, clean metrics."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_ext import rundir
from grpo_ext.errors import RecipeError

ROOT = Path(__file__).resolve().parents[1]


def fake_checkpoint(run: Path, step: int, *, complete: bool = True) -> Path:
    ckpt = run / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"w" * 100)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if complete:
        rundir.write_manifest(ckpt)
    return ckpt


@pytest.fixture
def run(tmp_path):
    yield tmp_path / "run"
    rundir.release(tmp_path / "run")


@pytest.mark.parametrize(
    "damage,complete",
    [
        (None, True),  # manifest written after the save: complete
        ("no manifest", False),  # killed before the save finished
        ("file shorter", False),  # a file cut short after the manifest was written (killed during rotation)
        ("file missing", False),  # rotation deleted part of it
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
    fake_checkpoint(run, 2)
    fake_checkpoint(run, 4)
    fake_checkpoint(run, 6, complete=False)  # cut short by a kill
    lines = [json.dumps({"step": s, "reward": s / 10}) for s in range(1, 8)]
    (run / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 8, "rew')  # last line cut short
    (run / "summary.json").write_text(json.dumps({"status": "running", "eval_before": {"x": 1}}))
    prepared = rundir.prepare(str(run), overwrite=False, resume=True)
    assert prepared.resume_from == run / "checkpoint-4"
    assert prepared.previous["eval_before"] == {"x": 1}
    assert not (run / "checkpoint-6").exists()  # the incomplete checkpoint is removed
    assert [r["step"] for r in rundir.read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "state,overwrite,resume,expected",
    [
        # (what the directory holds, --overwrite, --resume, error text or the checkpoint resumed from)
        ("empty", False, False, None),  # fresh run
        ("empty", False, True, None),  # --resume with nothing to resume starts fresh
        ("finished", False, False, "already holds a run; pass --overwrite to replace it, or choose another"),
        ("finished", False, True, "holds a finished run; there is nothing to resume; pass --overwrite"),  # --resume
        ("finished", True, False, None),  # replaced
        (
            "unfinished",
            False,
            False,
            "pass --overwrite to replace it, --resume to continue it (it stopped; last complete checkpoint: checkpoint-2)",
        ),
        ("unfinished", False, True, "checkpoint-2"),
        ("unfinished", True, True, "--overwrite and --resume contradict each other"),
    ],
)
def test_prepare_decides(state, overwrite, resume, expected, run):
    if state != "empty":
        fake_checkpoint(run, 2)
        (run / "summary.json").write_text(json.dumps({"status": "completed" if state == "finished" else "running"}))
    before = sorted(p.name for p in run.rglob("*")) if run.exists() else []
    if expected and not expected.startswith("checkpoint"):
        with pytest.raises(RecipeError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            rundir.prepare(str(run), overwrite=overwrite, resume=resume)
        assert sorted(p.name for p in run.rglob("*")) in (before, sorted([*before, rundir.LOCK]))  # nothing else touched
        return
    prepared = rundir.prepare(str(run), overwrite=overwrite, resume=resume)
    assert (prepared.resume_from.name if prepared.resume_from else None) == expected
    if overwrite:
        assert [p.name for p in run.iterdir()] == [rundir.LOCK]


def test_second_run_into_locked_directory_exits_2(run, tmp_path, digit_doc, write_recipe):
    """While one process holds the run directory, a second `train` exits 2 and leaves the directory alone."""
    run.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from grpo_ext import rundir; "
            "rundir.lock(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)",
            str(run),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        digit_doc["output_dir"] = str(run)
        proc = subprocess.run(
            [sys.executable, "-m", "grpo_ext.train", str(write_recipe(digit_doc))],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2
        assert (
            proc.stderr == f"error: output_dir: {run.resolve()} is in use by another run (pid {holder.pid}); wait for it "
            f"to finish, or choose another: output_dir=runs/new\n"
        )
        assert [p.name for p in run.iterdir()] == [rundir.LOCK]
    finally:
        holder.kill()
        holder.wait()
    t0 = time.monotonic()
    rundir.lock(run)  # a killed holder's lock is gone with it
    assert time.monotonic() - t0 < 1
