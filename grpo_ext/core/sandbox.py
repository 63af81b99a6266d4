"""Run a program a model wrote, on this machine, within limits: one process per run, in an empty folder.

What holds on every POSIX system: a fresh empty working folder, removed afterwards; a clean environment (no
variable of the training process, so no API key or token reaches the program); Python's isolated mode; limits
on CPU seconds, address space, the size of any file written, open files and core dumps; a wall-clock timeout
after which the whole process group is killed, children included; output kept to a bounded size.

What holds where the kernel allows it (Linux, as root; ``isolation()`` says what applied): a network
namespace with no interface but loopback, so no connection leaves; a PID namespace, so that every process the
program starts dies with it; a mount namespace in which every file system is read-only but the run's folder, with
empty /dev/shm, /root and /home of its own (the interpreter is mounted into the run's folder); and the program
runs as a user id of its own (no account, no privileges, one per run: ``user``), so it reads only what any user
may read and starts at most ``processes`` processes. The training process never forks: it spawns the harness
(``sandbox_harness.py``), which sets all of this up. Without namespaces the program runs as the training user:
the number of processes is limited only for a user other than root (the kernel does not apply ``RLIMIT_NPROC``
to root), it can read and write what that user can, and it can reach the network.

This is defence in depth for code from a model being trained, not a security boundary against a determined
attacker: the kernel is shared, and files any user may read stay readable. For untrusted code from people, use a
remote sandbox (E2B, Piston, Sandbox Fusion) or a virtual machine.
"""

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HARNESS = Path(__file__).with_name("sandbox_harness.py")
PYTHON = ".python"  # where an isolated run sees the interpreter (``sys.base_prefix``), inside its folder
# The harness's exit status when this machine refused a namespace or limit: the run is not made without them.
SETUP_FAILED = 125
FIRST_UID = 1 << 28  # far above the ids of accounts (login.defs stops at 60000, systemd's dynamic users at 65519)
OUTPUT_LIMIT = 1 << 20  # bytes of stdout and stderr read back; more is cut


@dataclass(frozen=True)
class Limits:
    """What one run may use. ``wall_seconds`` ends it whatever it does; the rest are the kernel's limits."""

    wall_seconds: float = 10.0
    cpu_seconds: int = 10
    memory_mb: int = 1024
    file_mb: int = 10
    processes: int = 64
    open_files: int = 64


@dataclass(frozen=True)
class Result:
    """How a run ended: ``passed`` (it reached the end of its script), ``failed`` (it exited early or with an
    error), ``timeout`` (killed at the wall limit), ``killed`` (stopped by a kernel limit) or ``error`` (the machine
    refused the sandbox a namespace or limit, so the program never ran)."""

    status: str
    stdout: str
    stderr: str
    seconds: float


@cache
def isolation() -> tuple[str, ...]:
    """What this machine lets a run have beyond the limits: ``("net", "pid", "mount", "user")``, or ``()``;
    found once by running a program that must be able to write in its folder and nowhere else."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return ()
    full = ("net", "pid", "mount", "user")
    outside = "import os\ntry:\n    open('/w', 'w')\nexcept OSError:\n    pass\nelse:\n    os._exit(3)"
    ran = _run("open('mine', 'w').write('x')", outside, None, Limits(wall_seconds=20), full)
    return full if ran.status == "passed" else ()


def _own_user() -> int:
    """A user id no account has, one per run: the kernel's process limit counts processes per user, so a run that
    forks without end uses up its own allowance, never that of the runs beside it."""
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


def run(program: str, tests: str = "", stdin: str | None = None, limits: Limits = Limits()) -> Result:
    """Run ``program`` then ``tests`` (Python source) as one script in a fresh sandbox, ``stdin`` as its input.
    ``passed`` only when the script ran to its end: a program that exits early, even with status 0, has not
    passed its tests."""
    return _run(program, tests, stdin, limits, isolation())


def base_folder() -> Path:
    """Where runs get their folders: the temporary folder, if every folder above it lets other users through
    (the run's own user must reach its folder), else /tmp."""
    here = Path(tempfile.gettempdir()).resolve()
    open_to_all = all(folder.stat().st_mode & 0o001 for folder in (here, *here.parents))
    return here if open_to_all else Path("/tmp")


def _run(program: str, tests: str, stdin: str | None, limits: Limits, isolated: tuple[str, ...]) -> Result:
    uid = gid = _own_user()
    folder = Path(tempfile.mkdtemp(prefix="grpo_ext_sandbox_", dir=base_folder() if "user" in isolated else None))
    read_end, write_end = os.pipe()
    try:
        for name, text in (("program.py", program), ("tests.py", tests), ("stdin.txt", stdin or "")):
            (folder / name).write_text(text, encoding="utf-8")
        shutil.copyfile(HARNESS, folder / "harness.py")  # readable where the package's folder is hidden
        if "mount" in isolated:
            (folder / PYTHON).mkdir()
        if "user" in isolated:
            for path in (folder, *folder.iterdir()):
                os.chown(path, uid, gid)
        home = Path(sys.base_prefix).resolve()
        settings = {
            "folder": str(folder),
            "isolated": bool(isolated),
            "python_home": str(home),
            "python_mount": str(folder / PYTHON),
            "python_in_home": str(Path(os.path.realpath(sys.executable)).relative_to(home)) if isolated else "",
            "uid": uid,
            "gid": gid,
            "fd": write_end,
            "token": secrets.token_hex(16),
            **{k: getattr(limits, k) for k in ("cpu_seconds", "memory_mb", "file_mb", "processes", "open_files")},
        }
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8"}
        started = time.monotonic()
        with open(folder / "stdin.txt", "rb") as given, open(folder / ".out", "wb") as out, open(folder / ".err", "wb") as err:
            # no preexec_fn: the child is spawned (vfork), not forked, so a trainer of many GB starts it in
            # milliseconds; the harness makes the namespaces and limits itself
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "harness.py", "setup", json.dumps(settings)],
                stdin=given,
                stdout=out,
                stderr=err,
                cwd=folder,
                env=env,
                pass_fds=(write_end,),
                start_new_session=True,  # its own process group, killed as one
            )
        os.close(write_end)
        write_end = -1
        reported = b""
        status = None
        deadline = started + limits.wall_seconds
        while status is None:
            left = deadline - time.monotonic()
            if left <= 0:
                status = "timeout"
                break
            ready, _, _ = select.select([read_end], [], [], min(left, 0.05))
            if ready:
                chunk = os.read(read_end, 64)
                if not chunk:  # every writer closed it: the program and all it started have ended
                    break
                reported += chunk
        if status == "timeout":
            _signal_group(proc.pid)
        try:  # the harness ends just after the program's last writer closed the pipe
            code = proc.wait(timeout=max(0.5, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            status = "timeout"
            _signal_group(proc.pid)
            code = proc.wait()
        _kill_group(proc.pid)  # whatever of its group is left, once the harness is reaped
        seconds = time.monotonic() - started
        if status is None:
            if code == SETUP_FAILED and "sandbox setup failed" in _read(folder / ".err"):
                status = "error"  # the machine refused a namespace or limit: the program did not run
            elif reported.decode("ascii", "replace") == settings["token"] and code == 0:
                status = "passed"
            elif code < 0 or code > 128:  # a signal: the CPU or file-size limit, or the kernel out of memory
                status = "killed"
            else:
                status = "failed"
        return Result(status, _read(folder / ".out"), _read(folder / ".err"), seconds)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
        shutil.rmtree(folder, ignore_errors=True)
