"""The run directory's life: one run at a time, no finished run overwritten by accident, resume after a crash.

- A lock (``fcntl`` on ``output_dir/.lock``) is held for the whole run: a second run into the same
  directory stops with exit status 2 before it writes anything.
- A directory that holds a run is refused unless ``--overwrite`` (start again) or ``--resume``
  (continue an unfinished run; also ``resume: auto`` in the recipe).
- Every checkpoint TRL saves gets a manifest (``grpo_ext_complete.json``: each file and its size),
  written after the save finished. Resume picks the newest checkpoint whose manifest matches its
  files, so a checkpoint cut short by a kill is never picked; incomplete ones are removed.
- grpo_ext applies ``save_total_limit`` itself, after the new checkpoint is marked complete.
- On resume, ``metrics.jsonl`` keeps only the lines up to the checkpoint's step (and drops a line cut
  short), so the steps after it are logged once, not twice.
"""

import fcntl
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from grpo_ext.base import write_atomic
from grpo_ext.errors import RecipeError

LOCK = ".lock"
MANIFEST = "grpo_ext_complete.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_held: dict[Path, int] = {}  # run directory → locked file descriptor, kept open for the process's life


@dataclass
class Prepared:
    path: Path
    resume_from: Path | None = None  # the checkpoint to continue from
    previous: dict | None = None  # summary.json of the run being continued
    created: bool = False  # the directory did not exist before this run
    changes: list[str] | None = None  # recipe keys a resume changed (accepted with accept_changes)


def lock(run_dir: Path) -> None:
    """Hold an exclusive lock on ``run_dir`` until the process ends; RecipeError if another run holds it."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        return
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RecipeError(
            f"output_dir: {run_dir} is in use by another run (pid {holder}); wait for it to finish, "
            f"or choose another: output_dir=runs/new"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _held[run_dir] = fd


def release(run_dir: Path, remove: bool = False) -> None:
    """Let go of the lock; ``remove`` deletes the lock file too (while still held), as a finished run does."""
    fd = _held.pop(run_dir.resolve(), None)
    if fd is not None:
        if remove:
            (run_dir / LOCK).unlink(missing_ok=True)
        os.close(fd)


def discard_if_empty(prepared: Prepared) -> None:
    """Remove a run directory this run created when nothing but the lock was written to it."""
    release(prepared.path, remove=True)
    if prepared.created and prepared.path.is_dir() and not any(prepared.path.iterdir()):
        prepared.path.rmdir()


def holds_run(run_dir: Path) -> bool:
    return run_dir.is_dir() and any(p.name != LOCK for p in run_dir.iterdir())


def read_summary(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def prepare(output_dir: str, *, overwrite: bool, resume: bool) -> Prepared:
    """Lock the run directory and decide: a fresh run, a replaced one, or a continued one."""
    run_dir = Path(output_dir).expanduser()
    if run_dir.exists() and not run_dir.is_dir():
        raise RecipeError(f"output_dir: {run_dir} is a file; give a directory path")
    if overwrite and resume:
        raise RecipeError("--overwrite and --resume contradict each other; pass one")
    existed = run_dir.is_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock(run_dir)
    except RecipeError:
        if not existed:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if not holds_run(run_dir):
        return Prepared(run_dir, created=not existed)
    if overwrite:
        for child in run_dir.iterdir():
            if child.name != LOCK:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        return Prepared(run_dir)
    summary = read_summary(run_dir)
    if summary.get("status") == "completed" and resume:
        release(run_dir)
        steps = f" ({summary['steps']} steps)" if summary.get("steps") else ""
        raise RecipeError(
            f"output_dir: {run_dir} holds a finished run{steps}; there is nothing to resume; pass --overwrite to train "
            f"it again, or choose another: output_dir=runs/new"
        )
    if summary.get("status") == "completed" or not resume:
        release(run_dir)
        last = last_complete_checkpoint(run_dir)
        how = (
            ""
            if summary.get("status") == "completed"
            else (f", --resume to continue it (it stopped; last complete checkpoint: {last.name if last else 'none'})")
        )
        raise RecipeError(
            f"output_dir: {run_dir} already holds a run; pass --overwrite to replace it{how}, "
            f"or choose another: output_dir=runs/new"
        )
    checkpoint = last_complete_checkpoint(run_dir)
    for stale in checkpoints(run_dir):
        if not is_complete(stale):
            shutil.rmtree(stale)
    truncate_metrics(run_dir / "metrics.jsonl", step_of(checkpoint) if checkpoint else 0)
    return Prepared(run_dir, checkpoint, summary)


def step_of(checkpoint: Path) -> int:
    return int(_CHECKPOINT.fullmatch(checkpoint.name).group(1))


def checkpoints(run_dir: Path) -> list[Path]:
    """``checkpoint-N`` directories, lowest step first."""
    found = [p for p in run_dir.glob("checkpoint-*") if p.is_dir() and _CHECKPOINT.fullmatch(p.name)]
    return sorted(found, key=step_of)


def write_manifest(checkpoint: Path) -> None:
    """Record every file of a just-saved checkpoint and its size; written last, atomically."""
    files = {
        str(p.relative_to(checkpoint)): p.stat().st_size
        for p in sorted(checkpoint.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    write_atomic(checkpoint / MANIFEST, json.dumps({"files": files}))


def is_complete(checkpoint: Path) -> bool:
    """True when the manifest exists and every file it lists is there with its recorded size."""
    try:
        files = json.loads((checkpoint / MANIFEST).read_text(encoding="utf-8"))["files"]
        return "trainer_state.json" in files and all((checkpoint / name).stat().st_size == size for name, size in files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def last_complete_checkpoint(run_dir: Path) -> Path | None:
    complete = [c for c in checkpoints(run_dir) if is_complete(c)]
    return complete[-1] if complete else None


def read_metrics(path: Path) -> list[dict]:
    """The step records of ``metrics.jsonl``, skipping a line cut short."""
    records = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                records.append(record)
    return records


def truncate_metrics(path: Path, step: int) -> None:
    """Keep the lines of ``metrics.jsonl`` up to ``step``; drop later ones and any line cut short."""
    if not path.exists():
        return
    kept = [json.dumps(r) + "\n" for r in read_metrics(path) if r["step"] <= step]
    write_atomic(path, "".join(kept))


def marker_callback(is_main: bool, keep: int | None):
    """A TrainerCallback that writes a checkpoint's manifest once TRL has finished saving it, then keeps the
    newest ``keep`` complete checkpoints (``save_total_limit``). TRL's own rotation is off: it could delete the
    last complete checkpoint before the new one is marked complete."""
    from transformers import TrainerCallback

    class _Marker(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            run_dir = Path(args.output_dir)
            checkpoint = run_dir / f"checkpoint-{state.global_step}"
            if not is_main or not checkpoint.is_dir():
                return
            write_manifest(checkpoint)
            if keep and keep > 0:
                for old in [c for c in checkpoints(run_dir) if is_complete(c)][:-keep]:
                    shutil.rmtree(old, ignore_errors=True)

    return _Marker()
