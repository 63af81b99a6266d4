"""Paths relative to a recipe, and files written whole or not at all."""

import os
import secrets
from pathlib import Path


def resolve_path(text: str, base_dir: Path) -> Path:
    """A path as a recipe means it: ``~`` expanded, a relative path taken from the recipe's folder."""
    path = Path(text).expanduser()
    return path if path.is_absolute() else base_dir / path


def exists(path: Path, kind: str = "any") -> bool:
    """Whether ``path`` is there (``kind``: any, file or dir); a name no file system takes (too long) is not."""
    try:
        return {"any": path.exists, "file": path.is_file, "dir": path.is_dir}[kind]()
    except OSError:
        return False


def temporary_beside(path: Path) -> Path:
    """A fresh name for a temporary file beside ``path``: ``.NAME.PID.HEX`` (hidden, and named after its file, so
    that a leftover from a kill is known for what it is)."""
    return path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a kill leaves the old file or the new one.
    The file's mode is what ``open`` gives a new file (0644 under umask 022), not mkstemp's private 0600."""
    tmp = temporary_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies; O_EXCL: never another's file
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
