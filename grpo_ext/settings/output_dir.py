"""Where a run may write: the folders ``output_dir`` may never be, the names a run writes inside its own, and
whether a folder is provably a run's own.

A run directory carries a marker (``.grpo_ext_run``), written before anything else when a run starts. It records
the run directory's absolute path, a random run id (which the run's ``summary.json`` repeats as ``run_id``) and
the entries the run itself put in the folder, each recorded before it is created (``rundir.record``). A folder is
the run's own (``ownership``: ``OURS``) only when its marker names this very folder and its summary, if any,
carries the same id: a marker that is empty, not grpo_ext's, copied from elsewhere or moved with its folder proves
nothing, and such a folder is refused when it holds anything else. ``--overwrite`` deletes only the entries the
marker lists, so a file of the user's is never touched, even one named like a run's (README.md, final/, runs/).
A run from before run ids (``OLDER``: a marker without an id, or summary.json and recipe.yaml without a marker)
records no list of its files: it is never deleted, and only resumed from a complete checkpoint.

The folders that hold the user's other work (the root, the home directory, the working directory and the
recipe's own folder, or any folder above them) are refused while the recipe is checked, before anything is created.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from grpo_ext.core.files import user_path

MARKER = ".grpo_ext_run"
LOCK = ".lock"
RUN_ID = "run_id"  # the key of summary.json that repeats the marker's id
# What a training run puts in its run directory. TensorBoard's event files go to runs/ (transformers' logging_dir
# under output_dir); README.md is TRL's model card, written with each checkpoint. The verbs that write beside a run
# (eval --checkpoints: eval_curve.*; merge: merged/) record their entries in its marker too, but a training run
# never writes those names, so an entry of the user's named so does not stop one.
TRAINING_FILES = (
    MARKER,
    LOCK,
    "recipe.yaml",
    "summary.json",
    "metrics.jsonl",
    "completions.jsonl",
    "report.md",
    "curves.png",
    "README.md",
    "final",
    "runs",
)
_CHECKPOINT = re.compile(r"checkpoint-\d+")
_TEMPORARY = re.compile(r"\.(.+)\.\d+\.[0-9a-f]+")  # core.files.write_atomic's .NAME.PID.HEX beside NAME

OURS, OLDER, MOVED, FOREIGN, NONE = "ours", "older", "moved", "foreign", "none"


def training_name(name: str) -> bool:
    """True for a name a training run writes (and so would write over, or into, were the entry someone else's); the
    name alone says nothing of who wrote an entry.

    >>> [training_name(n) for n in ("checkpoint-12", "final", "README.md", "merged", "notes.txt", "checkpoint-x")]
    [True, True, True, False, False, False]
    """
    return name in TRAINING_FILES or _CHECKPOINT.fullmatch(name) is not None


def temporary_of(name: str) -> str | None:
    """The entry a temporary file is written for, for the one a kill left behind (``.NAME.PID.HEX``); else None.

    >>> [temporary_of(n) for n in (".summary.json.4242.0a1b2c3d", "summary.json", ".notes")]
    ['summary.json', None, None]
    """
    found = _TEMPORARY.fullmatch(name)
    return found.group(1) if found else None


@dataclass
class Owner:
    """Whose a folder is: ``state`` (OURS, OLDER, MOVED, FOREIGN or NONE), ``why`` in words for a refusal, and
    the marker's content when it is a run's."""

    state: str
    why: str = ""
    marker: dict | None = None

    @property
    def entries(self) -> set[str]:
        return set(self.marker["entries"]) if self.state == OURS and self.marker else set()


def read_marker(path: Path) -> dict | str:
    """The marker of the folder ``path`` as a mapping with ``path``, ``id`` and ``entries`` (or the older
    ``{"grpo_ext": "run directory"}``); else a few words on what is wrong with it."""
    marker = path / MARKER
    if marker.is_symlink():
        return f"its {MARKER} is a symbolic link"
    try:
        text = marker.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"its {MARKER} cannot be read"
    if not text.strip():
        return f"its {MARKER} is empty"
    try:
        data = json.loads(text)
    except ValueError:
        return f"its {MARKER} is not JSON"
    if not isinstance(data, dict) or data.get("grpo_ext") != "run directory":
        return f"its {MARKER} is not one grpo_ext wrote"
    if set(data) == {"grpo_ext"}:
        return data
    fields = (data.get("path"), data.get("id"), data.get("entries"))
    if not (isinstance(fields[0], str) and isinstance(fields[1], str) and fields[1]):
        return f"its {MARKER} is damaged"
    if not isinstance(fields[2], list) or not all(isinstance(e, str) for e in fields[2]):
        return f"its {MARKER} is damaged"
    return data


def _legacy_run(path: Path) -> bool:
    """A run recorded before the marker existed: its recipe.yaml beside a summary.json that records a run's status."""
    summary = _summary(path)
    return isinstance(summary, dict) and "status" in summary and "recipe" in summary and (path / "recipe.yaml").is_file()


def _summary(path: Path) -> dict | str | None:
    """summary.json's content; None when there is none; a string saying how it is damaged."""
    file = path / "summary.json"
    if not file.exists() and not file.is_symlink():
        return None
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return "summary.json is damaged: not JSON"
    if not isinstance(summary, dict):
        return f"summary.json is damaged: a JSON {type(summary).__name__}, not a run's summary"
    return summary


def ownership(path: Path) -> Owner:
    """Whose the folder ``path`` is (``Owner``): OURS only when its marker names this folder (absolute path) and
    its summary.json, if there is one, carries the marker's id; OLDER for a run from before run ids; MOVED for a
    run's marker that names another folder; FOREIGN for a marker that proves nothing; NONE without a marker."""
    if not (path / MARKER).exists() and not (path / MARKER).is_symlink():
        if _legacy_run(path):
            return Owner(OLDER, f"summary.json and recipe.yaml but no {MARKER}")
        return Owner(NONE)
    marker = read_marker(path)
    if isinstance(marker, str):
        return Owner(FOREIGN, marker)
    if "id" not in marker:
        return Owner(OLDER, f"a {MARKER} without a run id")
    if marker["path"] != str(path.resolve()):
        return Owner(MOVED, f"its {MARKER} records the run at {marker['path']}", marker)
    summary = _summary(path)
    if isinstance(summary, str):
        return Owner(FOREIGN, f"{summary}, so its run id cannot be checked")
    if summary is not None and summary.get(RUN_ID) != marker["id"]:
        return Owner(FOREIGN, f"its summary.json is another run's: its run id is not the one in {MARKER}")
    return Owner(OURS, marker=marker)


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds a run that is provably its own (``OURS``) or one from before run ids (``OLDER``)."""
    return ownership(path).state in (OURS, OLDER)


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
    target = user_path(value).resolve()
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
