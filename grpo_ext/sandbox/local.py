"""Run a program a model wrote, on this machine, within limits: one process per run, in an empty folder.

What holds on every POSIX system: a fresh empty working folder, removed afterwards; a clean environment (no
variable of the training process, so no API key or token reaches the program); Python's isolated mode; limits
on CPU seconds, address space, the size of any file written, open files and core dumps; a wall-clock timeout
after which the whole process group is killed, children included; output kept to a bounded size.

Tests never run in the program's process: a judge process of their own calls into what the program defined and
compares what comes back (``calls.py``), and the verdict is the harness's exit status, which nothing in the
program can write (``harness.py``). No secret is handed to the program, so there is none to steal; a value
that claims to equal everything is not a value the tests accept.

What holds where the kernel allows it (Linux, as root; ``isolation()`` says what applied): a network
namespace with no interface but loopback, so no connection leaves; a PID namespace with a /proc of its own, so
every process the program starts dies with it and no process of the machine is in sight; a mount namespace in
which every file system is read-only, every folder of "/" but the system's (/usr, /lib, /bin, /etc, ...) is
covered by an empty one (no data set, recipe or home folder in sight), and the program writes only into its own
folder, a tmpfs of ``disk_mb``; and the program runs as a user id of its own (no account, no privileges, one per
run: ``user``), the judge as another, so the program can neither signal nor read it, and starts at most
``processes`` processes. The training process never forks: it spawns the harness, which sets all of this up.
Without namespaces, a harness that is root still runs the program and the judge under user ids of their own
(``isolation()`` gives ``("user",)``, where the interpreter is readable by any user): the program reads and writes
what any user may (its own folder, /tmp; ``disk_mb`` does not apply, each file is bounded by ``file_mb``),
signals none of the machine's processes, and can reach the network. A harness that is not root runs the program
as the training user: ``processes`` counts every process of that user (so such a program can seldom start one),
it can read and write what that user can (the data set with the tests included), and it can reach the network.

This is defence in depth for code from a model being trained, not a security boundary against a determined
attacker: the kernel is shared. For untrusted code from people, use a remote sandbox (E2B, Piston, Sandbox
Fusion) or a virtual machine: a provider of its own beside this one (``grpo_ext/sandbox/__init__.py``).

The local provider: this module is one, with ``run`` and ``isolation`` (``contract.Provider``).
"""

import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
import time
from functools import cache
from pathlib import Path

from grpo_ext.sandbox.contract import DEFAULT_LIMITS, Limits, Result

HARNESS = Path(__file__).with_name("harness.py")  # run as a script; it imports calls.py beside it by that name
# The harness's exit statuses (harness.py): the verdict, which nothing in the program can write.
PASSED, TIMEOUT, SETUP_FAILED = 0, 124, 125
WORK = "work"  # the program's folder inside the run's folder
HARNESS_GRACE = 2.0  # seconds past the wall limit before the harness itself is killed (it kills the program at the limit)
FIRST_UID = 1 << 28  # far above the ids of accounts (login.defs stops at 60000, systemd's dynamic users at 65519)
JUDGE_UIDS = 1 << 26  # the judge's user id is the program's plus this: another id no account has
OUTPUT_LIMIT = 1 << 20  # bytes of stdout and stderr read back; more is cut


@cache
def isolation() -> tuple[str, ...]:
    """What this machine lets a run have beyond the limits: ``("net", "pid", "mount", "user")``, ``("user",)`` (root,
    but no namespaces: a user id of its own all the same) or ``()``; found once by running a program that must be
    able to write in its folder and nowhere else."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return ()
    # it must write its folder and not "/", and read the standard library (not imported yet) as its own user
    probe = "import fractions\nopen('mine', 'w').write('x')\ntry:\n    open('/w', 'w')\nexcept OSError:\n    pass\n"
    probe += "else:\n    raise SystemExit(3)"
    for kinds in (("net", "pid", "mount", "user"), ("user",)):
        if _run(probe, "", None, Limits(wall_seconds=20), kinds).status == "passed":
            return kinds
    return ()


def _own_user() -> int:
    """A user id no account has, one per run: the kernel's process limit counts processes per user, so a run that
    forks without end uses up its own allowance, never that of the runs beside it."""
    import secrets  # here: it loads OpenSSL, which a command that runs no program need not wait for

    return FIRST_UID + secrets.randbelow(1 << 24)


def _signal_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group until none of it is left (a fork bomb forks while it is being killed)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(OUTPUT_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""


def run(program: str, tests: str = "", stdin: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Result:
    """Run ``program`` (Python source) in a fresh sandbox, ``stdin`` as its input; then, if given, ``tests``
    against what it defined, in a judge process of their own (``calls.py``). ``passed`` only when the
    program ran to its end and so did every test: a program that exits early, even with status 0, has not
    passed, and nothing it does can write the verdict."""
    return _run(program, tests, stdin, limits, isolation())


def base_folder() -> Path:
    """Where runs get their folders: the temporary folder, if every folder above it lets other users through
    (the run's own user must reach its folder), else /tmp."""
    import tempfile  # here, as subprocess in _run: a command that runs no program does not wait for them

    here = Path(tempfile.gettempdir()).resolve()
    open_to_all = all(folder.stat().st_mode & 0o001 for folder in (here, *here.parents))
    return here if open_to_all else Path("/tmp")


def _feed(pipe, data: bytes) -> None:
    """Write the tests to the harness's stdin and close it; a harness that ended first (a refused setup) is no error."""
    try:
        pipe.write(data)
    except OSError:
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _run(program: str, tests: str, stdin: str | None, limits: Limits, isolated: tuple[str, ...]) -> Result:
    import subprocess
    import tempfile

    uid = _own_user()
    own_user, spaces = "user" in isolated, "mount" in isolated
    folder = Path(tempfile.mkdtemp(prefix="grpo_ext_sandbox_", dir=base_folder() if own_user else None))
    try:
        for name, text in (("program.py", program), ("stdin.txt", stdin or "")):
            (folder / name).write_text(text, encoding="utf-8")
        (folder / WORK).mkdir()
        if own_user:
            folder.chmod(0o711)  # its users pass through to their folder; what the harness reads stays the harness's
            if not spaces:  # no tmpfs of its own: the program's user owns its folder on the disk
                os.chown(folder / WORK, uid, uid)
        settings = {
            "folder": str(folder),
            "namespaces": spaces,
            "own_user": own_user,
            "python_home": str(Path(sys.base_prefix).resolve()),
            "uid": uid,
            "gid": uid,
            "judge_uid": uid + JUDGE_UIDS,
            "tests": bool(tests.strip()),
            **dataclasses.asdict(limits),
        }  # harness.Settings: the harness refuses a key it does not declare
        work = str(folder / WORK)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8"}
        started = time.monotonic()
        with open(folder / ".out", "wb") as out, open(folder / ".err", "wb") as err:
            # no preexec_fn: the child is spawned (vfork), not forked, so a trainer of many GB starts it in
            # milliseconds; the harness makes the namespaces and limits itself
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(HARNESS), json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                cwd=folder,
                env=env,
                start_new_session=True,  # its own process group, killed as one
            )
        # the tests go to the judge alone, through a pipe: never into the program's folder, argv or environment
        threading.Thread(target=_feed, args=(proc.stdin, tests.encode("utf-8")), daemon=True).start()
        try:  # the harness keeps the wall limit itself; this is for a harness that cannot
            code = proc.wait(timeout=limits.wall_seconds + HARNESS_GRACE)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid)
            code = proc.wait()
        _kill_group(proc.pid)  # whatever of its group is left
        seconds = time.monotonic() - started
        status = {PASSED: "passed", TIMEOUT: "timeout", SETUP_FAILED: "error"}.get(code)
        if code < 0 and seconds >= limits.wall_seconds:
            status = "timeout"
        return Result(
            status or ("killed" if code < 0 or code > 128 else "failed"), _read(folder / ".out"), _read(folder / ".err"), seconds
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
