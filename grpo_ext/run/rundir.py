"""The run directory's life: one run at a time, nothing of the user's touched, resume after a crash.

- grpo_ext writes into a folder only when it is missing, empty or provably a run's own (``output_dir.ownership``:
  its marker ``.grpo_ext_run`` names this folder and the id that the run's summary.json carries); any other
  folder holding files is refused before anything is written, whatever its entries are named.
- The marker lists the run's own entries, each recorded (``record``) before it is created: by the run (the marker,
  the lock, recipe.yaml, summary.json, metrics.jsonl, completions.jsonl, checkpoint-N/ and TRL's README.md before
  each save, runs/ for TensorBoard, final/, report.md, curves.png) and by the verbs that write beside it
  (eval_curve.* of ``eval --checkpoints``, merged/ of ``merge``). A kill mid-write leaves nothing unrecorded.
  Deleting (``--overwrite``, a checkpoint cut short, ``save_total_limit``) touches only entries listed there and
  their temporary files, never follows a symbolic link, and an entry a run writes that the marker does not list
  (a user's README.md, final/ or runs/, a symlinked checkpoint-N) stops a run before anything is changed.
- A run from before run ids (a marker without one) is never deleted; it is resumed from a complete checkpoint
  only, deleting nothing, and from then on its marker lists what it continues and writes.
- A lock (``fcntl`` on ``output_dir/.lock``) is held for the whole run: a second run into the same directory stops
  with exit status 2. A process that loses the lock removes and rewrites nothing.
- ``prepare`` decides (a fresh run, a replaced one, a continued one) and changes nothing; ``commit`` then acts:
  so a resume refused for any reason (a changed recipe, a damaged summary or checkpoint) has lost nothing.
- A directory that holds a run is refused unless ``--overwrite`` (start again: only what the run recorded is
  deleted) or ``--resume`` (continue an unfinished run; ``resume: auto`` in the recipe also starts one).
- Every checkpoint TRL saves gets a manifest (``grpo_ext_complete.json``: each file's size and SHA-256), written
  after the save finished. Resume continues from the newest checkpoint whose files match their manifest. One
  without a manifest (its save was cut short) is removed; one whose files changed after they were recorded is
  damaged, and a resume stops and names it rather than delete it or silently start again.
- grpo_ext applies ``save_total_limit`` itself, after the new checkpoint is marked complete; a checkpoint
  loses its manifest before it is deleted, so a kill during the deletion leaves one that is merely incomplete.
- On resume, ``metrics.jsonl`` keeps only the lines up to the checkpoint's step (and drops a line cut
  short), so the steps after it are logged once, not twice.
"""

import fcntl
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import os_problem, user_path, write_atomic
from grpo_ext.settings.output_dir import (
    LOCK,
    MARKER,
    MOVED,
    NONE,
    OLDER,
    OURS,
    RUN_ID,
    Owner,
    ownership,
    read_marker,
    temporary_of,
    training_name,
)

MANIFEST = "grpo_ext_complete.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_NEW = "choose another: output_dir=runs/new"


@dataclass
class _Held:
    fd: int
    created: bool  # this process made the lock file (so a refusal removes it again)
    claimed: bool = False  # the run went ahead: the file names this process


_held: dict[Path, _Held] = {}  # run directory → its lock, kept open for the process's life


@dataclass
class Prepared:
    """What ``prepare`` decided; ``commit`` carries it out."""

    path: Path
    resume_from: Path | None = None  # the checkpoint to continue from
    previous: dict | None = None  # summary.json of the run being continued
    created: bool = False  # the directory did not exist before this run
    parents: list[Path] = field(default_factory=list)  # folders above it that this run made, innermost first
    changes: list[str] | None = None  # recipe keys a resume changed (accepted with accept_changes)
    replace: bool = False  # delete the previous run's entries first (--overwrite, or resume: auto without a checkpoint)
    stale: list[Path] = field(default_factory=list)  # checkpoints whose save was cut short, removed by commit
    notes: list[str] = field(default_factory=list)  # what commit did or kept, to be shown
    owner: Owner = field(default_factory=lambda: Owner(NONE))  # whose the folder was when decided
    marker: dict = field(default_factory=dict)  # the marker commit writes: this run's id and entries

    @property
    def run_id(self) -> str:
        return self.marker["id"]


def lock(run_dir: Path) -> None:
    """Hold an exclusive lock on ``run_dir`` until the process ends; RecipeError if another run holds it.

    The lock file is created if missing; a lock file left by a killed run keeps what it says until this run goes
    ahead (``claim``). A process that fails to take the lock leaves the file as it found it."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        return
    path = run_dir / LOCK
    while True:
        try:
            fd, created = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
        except FileExistsError:
            try:
                fd, created = os.open(path, os.O_RDWR), False
            except FileNotFoundError:
                continue  # its holder removed it between the two opens
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RecipeError(
                f"output_dir: {run_dir} is in use by another run (pid {holder}); wait for it to finish, or {_NEW}"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the file was removed (by a run that let go of it) after this process opened it: take the new one
    _held[run_dir] = _Held(fd, created)
    if created:
        _write_pid(fd)


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def claim(run_dir: Path) -> None:
    """The run goes ahead: the lock file now names this process."""
    held = _held[run_dir.resolve()]
    _write_pid(held.fd)
    held.claimed = True


def release(run_dir: Path, remove: bool = False) -> None:
    """Let go of the lock. The lock file is removed (while still held) with ``remove``, as a finished run does, and
    when this process made it for a run that did not go ahead; otherwise it stays as it was."""
    held = _held.pop(run_dir.resolve(), None)
    if held is None:
        return
    if remove or (held.created and not held.claimed):
        (run_dir / LOCK).unlink(missing_ok=True)
    os.close(held.fd)


def discard_if_empty(prepared: Prepared) -> None:
    """Let go of the lock; a directory that got nothing but the marker loses it, and is removed if this run made it."""
    release(prepared.path, remove=True)
    if not prepared.path.is_dir() or any(p.name != MARKER for p in prepared.path.iterdir()):
        return
    (prepared.path / MARKER).unlink(missing_ok=True)
    if not prepared.created:
        return
    prepared.path.rmdir()
    for parent in prepared.parents:  # runs/ made for this run alone goes with it; one another run uses stays
        try:
            parent.rmdir()
        except OSError:
            return


def holds_run(run_dir: Path) -> bool:
    return run_dir.is_dir() and any(p.name not in (LOCK, MARKER) for p in run_dir.iterdir())


def read_summary(run_dir: Path) -> dict:
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def unsaved_final(run_dir: Path) -> str | None:
    """Why a run that completed wrote no ``final/`` (its summary's ``final.why``: ``save_final: false``), or None."""
    final = read_summary(run_dir).get("final")
    if isinstance(final, dict) and final.get("saved") is False and not (run_dir / "final").exists():
        return str(final.get("why") or "the run saved none")
    return None


def _summary_problem(run_dir: Path) -> str | None:
    """Why summary.json cannot be continued from (cut short, or not a run's summary), or None."""
    path = run_dir / "summary.json"
    if not path.exists():
        return None
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{path} is damaged (not JSON)"
    if not isinstance(summary, dict):
        return f"{path} is damaged (a JSON {type(summary).__name__}, not a run's summary)"
    return None


def _make_dir(run_dir: Path) -> tuple[bool, list[Path]]:
    """Create ``run_dir`` and its parents: (whether this call made it, the parents it made, innermost first).
    A location that cannot be written (a read-only folder or file system) is a RecipeError in one line, and
    the parents made before the failure are removed again."""
    missing = [p for p in run_dir.absolute().parents if not p.exists()]
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            run_dir.mkdir()
        except FileExistsError:
            return False, []
    except OSError as exc:
        for parent in missing:
            try:
                parent.rmdir()
            except OSError:
                break
        raise RecipeError(_unwritable(run_dir, exc)) from None
    return True, missing


def _unwritable(run_dir: Path, exc: OSError) -> str:
    return f"output_dir: cannot write to {run_dir.absolute()}: {os_problem(exc)}; choose a folder you can write to: {_NEW_DIR}"


_NEW_DIR = "output_dir=runs/new"
_OLDER = "a run of an older grpo_ext (or files copied there), which records no list of its own files"


def _refusal(run_dir: Path, owner: Owner) -> str:
    """Why a folder that holds entries, and is not provably a run's own, is left alone."""
    if owner.state == MOVED:
        at = owner.marker["path"]
        return (
            f"output_dir: {run_dir} holds a run recorded at {at} (moved or copied here since), so nothing in it is "
            f"deleted or continued; move it back to {at} to resume or overwrite it there, or {_NEW}"
        )
    if owner.state == NONE:
        return (
            f"output_dir: {run_dir} is not empty and holds no grpo_ext run, so nothing is written there; "
            f"give an empty or new folder: {_NEW_DIR}"
        )
    return (
        f"output_dir: {run_dir} is not empty and is not provably a grpo_ext run directory ({owner.why}), so nothing "
        f"there is deleted or written; give an empty or new folder: {_NEW_DIR}"
    )


def prepare(output_dir: str, *, overwrite: bool, resume: bool | str) -> Prepared:
    """Lock the run directory and decide: a fresh run, a replaced one, or a continued one. Nothing in the directory
    is changed (``commit`` does that); on a refusal the lock is let go and the directory is as it was.

    ``resume``: True (``--resume``: continue, and say so when there is nothing to continue), ``"auto"`` (continue
    an unfinished run, else start one) or False."""
    run_dir = user_path(output_dir)
    if overwrite and resume is True:
        raise RecipeError("--overwrite and --resume contradict each other; pass one")
    if run_dir.exists() and not run_dir.is_dir():
        raise RecipeError(f"output_dir: {run_dir} is a file; give a directory path")
    if resume is True and not holds_run(run_dir):
        what = "does not exist" if not run_dir.exists() else "holds no run"
        raise RecipeError(
            f"--resume: output_dir {run_dir.resolve()} {what}, so there is nothing to resume (output_dir is relative to "
            f"the working directory, {Path.cwd()}); check the path, or drop --resume to start a new run"
        )
    if holds_run(run_dir):  # refused before a lock file is made in a folder that is not provably a run's
        owner = ownership(run_dir)
        if owner.state not in (OURS, OLDER):
            raise RecipeError(_refusal(run_dir, owner))
    created, parents = _make_dir(run_dir)
    try:
        lock(run_dir)
    except OSError as exc:
        raise RecipeError(_unwritable(run_dir, exc)) from None
    try:
        prepared = _decide(run_dir, created, overwrite, resume)
        prepared.parents = parents
        return prepared
    except RecipeError:
        release(run_dir)
        raise


def _new_marker(run_dir: Path, entries: list[str] = ()) -> dict:
    """A marker for a run starting in ``run_dir``: its absolute path, a new random id, the entries it holds so far."""
    import secrets  # imported where a run starts (with hashlib below: OpenSSL's library), not by a refused recipe

    own = [MARKER, LOCK, *(e for e in entries if e not in (MARKER, LOCK))]
    return {"grpo_ext": "run directory", "path": str(run_dir.resolve()), "id": secrets.token_hex(16), "entries": own}


def _not_written(run_dir: Path, owner: Owner) -> list[str]:
    """Entries named as a training run names its own that this run did not write: not recorded in its marker (a
    run from before run ids recorded nothing, so only a symbolic link counts there), or a symbolic link. A run
    would write over them, or into them."""
    found = []
    for child in sorted(run_dir.iterdir()):
        if not training_name(child.name) or child.name in (MARKER, LOCK):
            continue
        if child.is_symlink():
            found.append(f"{child.name} (a symbolic link)")
        elif owner.state == OURS and child.name not in owner.entries:
            found.append(child.name)
    return found


def _fresh_start(owner: Owner, replace: str = "replace it") -> str:
    """How to start again in a directory that holds a run: --overwrite, or by hand for a run that lists nothing."""
    if owner.state == OURS:
        return f"pass --overwrite to {replace}"
    return f"it holds {owner.why}: {_OLDER}, so --overwrite deletes nothing in it; delete the folder yourself to start again"


def _decide(run_dir: Path, created: bool, overwrite: bool, resume: bool | str) -> Prepared:
    if not holds_run(run_dir):
        return Prepared(run_dir, created=created, marker=_new_marker(run_dir))
    owner = ownership(run_dir)  # again, under the lock
    if owner.state not in (OURS, OLDER):
        raise RecipeError(_refusal(run_dir, owner))
    older = owner.state == OLDER
    if overwrite and older:
        raise RecipeError(
            f"output_dir: {run_dir} holds {owner.why}: {_OLDER}, so --overwrite deletes nothing in it; delete the folder "
            f"yourself to start again, or {_NEW}"
        )
    summary = read_summary(run_dir)
    finished = summary.get("status") == "completed"
    if not overwrite and finished and resume is True:
        steps = f" ({summary['steps']} steps)" if summary.get("steps") else ""
        raise RecipeError(
            f"output_dir: {run_dir} holds a finished run{steps}; there is nothing to resume; "
            f"{_fresh_start(owner, 'train it again')}, or {_NEW}"
        )
    if not overwrite and (finished or not resume):
        last = last_complete_checkpoint(run_dir)
        how = (
            ""
            if finished
            else f", --resume to continue it (it stopped; last complete checkpoint: {last.name if last else 'none'})"
        )
        raise RecipeError(f"output_dir: {run_dir} already holds a run; {_fresh_start(owner)}{how}, or {_NEW}")
    foreign = _not_written(run_dir, owner)
    if foreign:
        raise RecipeError(
            f"output_dir: {run_dir} holds {', '.join(foreign)}, which this run did not write and a run writes entries of "
            f"that name; nothing was deleted: move them out of {run_dir}, or {_NEW}"
        )
    if overwrite:
        return Prepared(run_dir, replace=True, owner=owner, marker=_new_marker(run_dir))
    problem = _summary_problem(run_dir)
    if problem:
        fix = "delete the folder yourself to start again" if older else "pass --overwrite to start the run again"
        raise RecipeError(f"--resume: {problem}; restore it, or {fix}")
    found = checkpoints(run_dir)
    complete = [c for c in found if _has_manifest(c) and not _damage(c, hashes=False)]
    chosen = complete[-1] if complete else None
    damaged = [c for c in found if _has_manifest(c) and c not in complete and (chosen is None or step_of(c) > step_of(chosen))]
    if chosen is not None and not damaged:
        damage = _damage(chosen, hashes=True)
        damaged = [chosen] if damage else []
    if damaged:
        newest = damaged[-1]
        restart = "delete the folder yourself to start again" if older else "pass --overwrite"
        raise RecipeError(
            f"--resume: {newest.name} was complete when saved, but {_damage(newest, hashes=True)} since; nothing was "
            f"deleted: restore it, move it out of {run_dir} to resume from an earlier checkpoint, or {restart}"
        )
    if chosen is None and older:
        raise RecipeError(
            f"--resume: {run_dir} holds {owner.why}: {_OLDER}, and no complete checkpoint to continue from; nothing in "
            f"it is deleted: delete the folder yourself to start again, or {_NEW}"
        )
    if chosen is None:
        if resume is True:
            raise RecipeError(
                f"--resume: {run_dir} has no complete checkpoint (the run stopped before its first save; "
                f"training.save_steps sets how often it saves); pass --overwrite to start it again"
            )
        note = f"resume: auto: {run_dir} has no complete checkpoint; starting again"
        return Prepared(run_dir, replace=True, notes=[note], owner=owner, marker=_new_marker(run_dir))
    stale = [c for c in found if c != chosen and c not in complete]  # cut short, or left by a deletion that was cut short
    if older:  # nothing of a run that lists no entries is deleted; from now on it records what it continues and writes
        continued = [n for n in ("summary.json", "recipe.yaml", "metrics.jsonl") if (run_dir / n).exists()]
        adopted = [c.name for c in complete] + continued
        notes = [
            f"resume: kept {c.name} (cut short): {run_dir} is a run of an older grpo_ext, which records no list of its "
            f"own files, so nothing in it is deleted; delete it yourself"
            for c in stale
        ]
        return Prepared(run_dir, chosen, summary, notes=notes, owner=owner, marker=_new_marker(run_dir, adopted))
    return Prepared(run_dir, chosen, summary, stale=stale, owner=owner, marker=owner.marker)


def _remove(entry: Path) -> None:
    """Delete one entry of the run directory; a symbolic link is removed itself, never followed."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink(missing_ok=True)


def commit(prepared: Prepared) -> None:
    """Carry out what ``prepare`` decided: delete the previous run's recorded entries (``replace``), write this run's
    marker, claim the lock, remove the recorded checkpoints cut short, and trim ``metrics.jsonl`` to the checkpoint's
    step. An OSError (a full disk, a read-only folder) goes up to the caller, which lets go of the directory."""
    run_dir = prepared.path
    if prepared.replace:  # under the previous marker: a kill part-way leaves a marker that lists what is left
        own, kept = prepared.owner.entries, []
        for child in sorted(run_dir.iterdir()):
            if child.name in (MARKER, LOCK):
                continue
            if child.name in own or temporary_of(child.name) in own:
                _remove(child)
            else:
                kept.append(child.name)
        if kept:
            entries = f"{len(kept)} {'entry' if len(kept) == 1 else 'entries'}"
            prepared.notes.append(f"--overwrite: kept {entries} this run did not write: {', '.join(kept)[:200]}")
    _write_marker(run_dir, prepared.marker)
    if prepared.owner.state == OLDER and prepared.previous is not None:  # the summary it continues carries its id now
        summary = {**prepared.previous, RUN_ID: prepared.run_id}
        write_atomic(run_dir / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    claim(run_dir)
    for stale in prepared.stale:
        if stale.name in prepared.owner.entries and not stale.is_symlink():
            _remove(stale)
    if prepared.resume_from is not None:
        truncate_metrics(run_dir / "metrics.jsonl", step_of(prepared.resume_from))


def _write_marker(run_dir: Path, marker: dict) -> None:
    write_atomic(run_dir / MARKER, json.dumps(marker) + "\n")


def record(run_dir: Path, *names: str) -> None:
    """Add ``names`` (entries directly in ``run_dir``) to the run's own in its marker, before they are created, so
    that a kill mid-write leaves nothing of the run's unrecorded. Nothing happens where ``run_dir`` has no marker
    naming it (a folder that is not a run directory, or a run moved since). Serialized by a lock on the folder, as
    other verbs (eval --checkpoints, merge) record beside a run that may be training."""
    path = Path(run_dir)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        marker = read_marker(path)
        if isinstance(marker, str) or marker.get("path") != str(path.resolve()):
            return
        missing = [n for n in dict.fromkeys(names) if n not in marker["entries"]]
        if missing:
            _write_marker(path, {**marker, "entries": [*marker["entries"], *missing]})
    finally:
        os.close(fd)  # lets go of the lock


def recorded(run_dir: Path) -> set[str]:
    """The entries of ``run_dir`` that its run recorded as its own (none unless the folder is provably the run's)."""
    return ownership(Path(run_dir)).entries


def step_of(checkpoint: Path) -> int:
    return int(_CHECKPOINT.fullmatch(checkpoint.name).group(1))


def checkpoints(run_dir: Path) -> list[Path]:
    """``checkpoint-N`` directories, lowest step first; a symbolic link of that name is none (a run never makes one)."""
    found = [p for p in run_dir.glob("checkpoint-*") if p.is_dir() and not p.is_symlink() and _CHECKPOINT.fullmatch(p.name)]
    return sorted(found, key=step_of)


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(checkpoint: Path) -> None:
    """Record every file of a just-saved checkpoint, its size and its SHA-256; written last, atomically."""
    files = {
        str(p.relative_to(checkpoint)): {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(checkpoint.rglob("*"))
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(f".{MANIFEST}.")
    }
    write_atomic(checkpoint / MANIFEST, json.dumps({"files": files}))


def _has_manifest(checkpoint: Path) -> bool:
    return (checkpoint / MANIFEST).is_file()


def _damage(checkpoint: Path, *, hashes: bool) -> str | None:
    """How a checkpoint's files differ from its manifest ("model.safetensors is 10 bytes, recorded 100"), or None.
    Sizes always; with ``hashes`` the content too."""
    try:
        files = json.loads((checkpoint / MANIFEST).read_text(encoding="utf-8"))["files"]
        files = {name: entry if isinstance(entry, dict) else {"size": entry} for name, entry in files.items()}
        if "trainer_state.json" not in files:
            return "its manifest lists no trainer_state.json"
        for name, entry in files.items():
            path = checkpoint / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != entry["size"]:
                return f"{name} is {path.stat().st_size} bytes, recorded {entry['size']}"
            if hashes and "sha256" in entry and _sha256(path) != entry["sha256"]:
                return f"{name} has changed (its SHA-256 differs from the one recorded)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return f"its manifest {MANIFEST} is unreadable"
    return None


def is_complete(checkpoint: Path) -> bool:
    """True when the manifest exists and every file it lists is there with its recorded size."""
    return _has_manifest(checkpoint) and _damage(checkpoint, hashes=False) is None


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


def remove_checkpoint(checkpoint: Path) -> None:
    """Delete a checkpoint the run recorded as its own (any other is left), its manifest first: a kill part-way leaves
    one that is incomplete, not one that looks damaged."""
    if checkpoint.is_symlink() or checkpoint.name not in recorded(checkpoint.parent):
        return
    (checkpoint / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(checkpoint, ignore_errors=True)


def marker_callback(is_main: bool, keep: int | None):
    """A TrainerCallback that records each checkpoint (and TRL's README.md, which it writes with each) in the run's
    marker before TRL saves it, writes the checkpoint's manifest once TRL has finished saving it, then keeps the
    newest ``keep`` complete checkpoints (``save_total_limit``). TRL's own rotation is off: it could delete the
    last complete checkpoint before the new one is marked complete."""
    from transformers import TrainerCallback

    def before_save(args, state, control) -> None:  # transformers saves right after on_step_end and on_epoch_end
        if is_main and control.should_save:
            record(Path(args.output_dir), f"checkpoint-{state.global_step}", "README.md")

    class _Marker(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            before_save(args, state, control)

        def on_epoch_end(self, args, state, control, **kwargs):
            before_save(args, state, control)

        def on_save(self, args, state, control, **kwargs):
            run_dir = Path(args.output_dir)
            checkpoint = run_dir / f"checkpoint-{state.global_step}"
            if not is_main or not checkpoint.is_dir():
                return
            record(run_dir, checkpoint.name, "README.md")  # recorded already unless a save came another way
            write_manifest(checkpoint)
            if keep and keep > 0:
                for old in [c for c in checkpoints(run_dir) if is_complete(c)][:-keep]:
                    remove_checkpoint(old)

    return _Marker()
