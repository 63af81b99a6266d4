"""Paths relative to a recipe, what a path is before it is opened, files written whole or not at all, and the one rule
for writing where something is already (refused without ``--force``)."""

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from grpo_ext.core.errors import RecipeError


def user_path(text: str | Path) -> Path:
    """A path as a person typed it, ``~`` and ``~user`` expanded as a shell does: a user this machine does not know
    (``~0``) leaves the text as it is, a name like any other, rather than an error."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # pathlib: "Could not determine home directory"
        return Path(text)


def resolve_path(text: str, base_dir: Path) -> Path:
    """A path as a recipe means it: ``~`` expanded (``user_path``), a relative path taken from the recipe's folder."""
    path = user_path(text)
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
    # os.urandom(4).hex() is what secrets.token_hex(4) returns; importing secrets loads OpenSSL at every command's start
    return path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a kill leaves the old file or the new one.
    The file's mode is what ``open`` gives a new file (0644 under umask 022), not mkstemp's private 0600. The
    OSError of a write that failed (a full disk) names ``path``, which the system leaves out."""
    tmp = temporary_beside(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies; O_EXCL: never another's file
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)
        raise


def os_problem(exc: OSError) -> str:
    """A failed file operation in a few words: what the system said, its error name, and the path.

    >>> os_problem(OSError(errno.ENOSPC, "No space left on device", "runs/x/summary.json"))
    'No space left on device (ENOSPC): runs/x/summary.json'
    """
    name = errno.errorcode.get(exc.errno or 0)
    what = exc.strerror or str(exc) or type(exc).__name__
    return what + (f" ({name})" if name else "") + (f": {exc.filename}" if exc.filename else "")


def special(path: Path) -> str | None:
    """What ``path`` is when it is there but not a regular file (``a named pipe``, ``a character device``, ``a block
    device``, ``a socket``, ``a folder``), else None: a regular file, or nothing there. Asked of the file system
    (``os.stat``, a link followed) without opening the path: opening a named pipe waits for a writer, and a device
    such as /dev/zero reads forever.

    >>> special(Path("/dev/null")), special(Path("/")), special(Path("/no/such/file"))
    ('a character device', 'a folder', None)
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # not there, a name too long, a NUL in it: the caller's own check says which
        return None
    kinds = [
        (stat.S_ISREG, None),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for is_kind, name in kinds if is_kind(mode)), "not a regular file")


def _file_above(path: Path) -> Path | None:
    """The nearest thing there above ``path`` when it is not a folder (a file where a folder should be), else None."""
    for parent in path.parents:
        if os.path.lexists(parent):
            return None if parent.is_dir() else parent
    return None


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def refuse_to_replace(
    paths: Sequence[Path], force: bool, *, option: str = "--out", command: str = "this command", folder: bool = False
) -> None:
    """Stop a command before it does any work when writing ``paths`` (every file it writes; with ``folder``, the one
    folder it fills) would replace what is there: RecipeError, one line, naming every path it writes. A file (a
    link, a named pipe) where a file goes, or a folder with something in it where a folder goes, is replaced only
    with ``force``; a folder where a file goes, or a file where a folder goes (or above one), never.

    >>> refuse_to_replace([Path("/no/such/rows.jsonl"), Path("/no/such/rows.png")], force=False)
    """
    named = _and([str(p) for p in paths])
    for path in paths:
        above = _file_above(path)
        if above is not None:
            raise RecipeError(f"{option}: {above} is a file, not a folder; {command} writes {named}; give another {option}")
        if os.path.lexists(path) and path.is_dir() != folder:
            kind, needed = ("a file", "a folder") if folder else ("a folder", "a file")
            raise RecipeError(f"{option}: {path} is {kind}; {command} writes {needed} there; give another {option}")
    if force:
        return
    if folder:
        for path in paths:
            held = sorted(entry.name for entry in path.iterdir()) if path.is_dir() else []
            if held:
                some = _and(held[:3] + ([f"{len(held) - 3} more"] if len(held) > 3 else []))
                raise RecipeError(
                    f"{option}: {path} is not empty ({some}); {command} writes into it: pass --force to write over "
                    f"what it holds, or give another {option}"
                )
        return
    there = [p for p in paths if os.path.lexists(p)]
    if there:
        exist, them = ("exists", "it") if len(there) == 1 else ("exist", "them")
        writes = f" ({command} writes {named})" if len(paths) > 1 else ""
        raise RecipeError(
            f"{option}: {_and([str(p) for p in there])} {exist}{writes}; pass --force to replace {them}, or give another {option}"
        )
