"""Where a run may write: the folders ``output_dir`` may never be, and the names a run writes inside its own.

A run directory carries a marker (``.grpo_ext_run``), written before anything else when a run starts. grpo_ext
writes into or deletes from a folder only when it is missing, empty, or carries the marker, and ``--overwrite``
deletes only the entries named here: a user's own files in a folder are never touched. The folders that hold
the user's other work (the root, the home directory, the working directory and the recipe's own folder, or any
folder above them) are refused while the recipe is checked, before anything is created.
"""

import json
import re
from pathlib import Path

MARKER = ".grpo_ext_run"
LOCK = ".lock"
# Everything a run, and the verbs that write beside it (eval --checkpoints, merge), put in a run directory.
# TensorBoard's event files go to runs/ (transformers' logging_dir under output_dir); README.md is TRL's model card.
RUN_FILES = (
    MARKER,
    LOCK,
    "recipe.yaml",
    "summary.json",
    "metrics.jsonl",
    "completions.jsonl",
    "report.md",
    "curves.png",
    "README.md",
    "eval_curve.png",
    "eval_curve.json",
    "eval_curve.md",
    "final",
    "merged",
    "runs",
)
_CHECKPOINT = re.compile(r"checkpoint-\d+")


def written_by_run(name: str) -> bool:
    """True for a name a run directory's own entries have, and for the temporary file of one that a kill left behind
    (``base.write_atomic`` writes ``.NAME.PID.HEX`` beside ``NAME``).

    >>> names = ("checkpoint-12", "final", ".summary.json.4242.0a1b2c3d", "notes.txt", "checkpoint-x", ".notes.txt.1.2")
    >>> [written_by_run(n) for n in names]
    [True, True, True, False, False, False]
    """
    if name in RUN_FILES or _CHECKPOINT.fullmatch(name) is not None:
        return True
    return any(name.startswith(f".{own}.") for own in RUN_FILES if not own.startswith("."))


def is_run_dir(path: Path) -> bool:
    """True when ``path`` carries the marker, or holds a run recorded before the marker existed (its recipe.yaml
    beside a summary.json that records a run's status)."""
    if (path / MARKER).is_file():
        return True
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "status" in summary and "recipe" in summary and (path / "recipe.yaml").is_file()


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check(value: str, recipe_path: Path | None = None) -> str | None:
    """The one-line problem with ``output_dir`` (relative to the working directory), or None when a run may use it.

    >>> check("")
    'output_dir: is empty; give a folder for the run, e.g. output_dir=runs/NAME'
    >>> check("/")
    "output_dir: '/' is the root directory; a run needs a folder of its own, e.g. output_dir=runs/NAME"
    >>> check("runs/digit") is None
    True
    """
    if not value.strip():
        return "output_dir: is empty; give a folder for the run, e.g. output_dir=runs/NAME"
    target = Path(value).expanduser().resolve()
    own = "a run needs a folder of its own, e.g. output_dir=runs/NAME"
    if target == Path(target.anchor):
        return f"output_dir: {value!r} is the root directory; {own}"
    places = [(Path.cwd().resolve(), "the working directory")]
    try:
        places.insert(0, (Path.home().resolve(), "your home directory"))
    except RuntimeError:  # no HOME and no password entry: there is no home directory to protect
        pass
    for place, name in places:
        if _within(place, target):
            what = name if target == place else f"a folder above {name} ({place})"
            return f"output_dir: {value!r} is {what}; {own}"
    if recipe_path is not None:
        recipe_path = recipe_path.resolve()
        folder = recipe_path.parent
        # A run's own record (RUN/recipe.yaml) names its run directory: merge and resume read it from there.
        own_record = target == folder and recipe_path.name == "recipe.yaml" and is_run_dir(folder)
        if _within(folder, target) and not own_record:
            what = "the recipe's folder" if target == folder else f"a folder above the recipe ({folder})"
            return f"output_dir: {value!r} is {what}; {own}"
    return None
