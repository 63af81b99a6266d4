"""Run a program a model wrote, on this machine, within limits: one process per run, in an empty folder.

What holds on every POSIX system: a fresh empty working folder, removed afterwards; a clean environment (no
variable of the training process, so no API key or token reaches the program); Python's isolated mode; limits
on CPU seconds, address space, the size of any file written, open files and core dumps; a wall-clock timeout
after which the whole process group is killed, children included; output kept to a bounded size.

What holds where the kernel allows it (Linux, as root; ``isolation()`` says what applied): a network
namespace with no interface but loopback, so no connection leaves; a PID namespace, so that every process the
program starts dies with it; a mount namespace in which every file system is read-only but the run's folder, with
empty /dev/shm, /root and /home of its own (the interpreter is mounted into the run's folder); and
the program runs as the unprivileged user ``nobody``, so it reads only what any user may read and starts at most
``processes`` processes. Without namespaces the program runs as the training user: the number of processes is
limited only for a user other than root (the kernel does not apply ``RLIMIT_NPROC`` to root), it can read and
write what that user can, and it can reach the network.

This is defence in depth for code from a model being trained, not a security boundary against a determined
attacker: the kernel is shared, and files any user may read stay readable. For untrusted code from people, use a
remote sandbox (E2B, Piston, Sandbox Fusion) or a virtual machine.
"""

import ctypes
import os
import pwd
import resource
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
OUTPUT_LIMIT = 1 << 20  # bytes of stdout and stderr read back; more is cut
_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWPID, _CLONE_NEWIPC = 0x00020000, 0x40000000, 0x20000000, 0x08000000
_MS_RDONLY, _MS_NOSUID, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x2, 0x20, 0x1000, 0x4000, 0x40000


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
    error), ``timeout`` (killed at the wall limit) or ``killed`` (stopped by a kernel limit)."""

    status: str
    stdout: str
    stderr: str
    seconds: float


@cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)


@cache
def isolation() -> tuple[str, ...]:
    """What this machine lets a run have beyond the limits: ``("net", "pid", "mount", "nobody")``, or ``()``;
    found once by running a program that must be able to write in its folder and nowhere else."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return ()
    full = ("net", "pid", "mount", "nobody")
    try:
        outside = "import os\ntry:\n    open('/w', 'w')\nexcept OSError:\n    pass\nelse:\n    os._exit(3)"
        ran = _run("open('mine', 'w').write('x')", outside, None, Limits(wall_seconds=20), full)
    except OSError:
        return ()
    return full if ran.status == "passed" else ()


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        points = [line.split()[4].replace("\\040", " ") for line in fh]
    return sorted(set(points), key=len)


def _namespaces(folder: Path) -> None:
    """In the child, before exec (the working folder already entered): new network, PID, IPC and mount
    namespaces; the interpreter mounted at ``folder/.python``; every mount read-only but ``folder``; /dev/shm,
    /root and /home covered by empty file systems."""
    libc = _libc()

    def mount(source, target, kind, flags, data, what):
        if libc.mount(source, target, kind, flags, data) != 0:
            raise OSError(ctypes.get_errno(), what)

    if libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None, "mount --make-rprivate /")  # nothing leaks out
    keep = os.fsencode(folder)
    mount(keep, keep, None, _MS_BIND, None, "mount --bind FOLDER")  # its own mount, left writable below
    os.chdir(folder)  # onto that mount, which stays writable
    home = os.fsencode(Path(sys.base_prefix).resolve())
    mount(home, os.fsencode(folder / PYTHON), None, _MS_BIND | _MS_REC, None, "mount --bind PYTHON")
    for point in _mount_points():
        if point == str(folder) or point.startswith(("/proc", "/sys", "/dev")):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
        if libc.mount(None, os.fsencode(point), None, flags, None) != 0 and point in ("/", str(folder / PYTHON)):
            raise OSError(ctypes.get_errno(), f"mount -o remount,ro {point}")
    for cover in ("/dev/shm", "/root", "/home"):  # users' files out of sight; the interpreter is seen in folder
        if os.path.isdir(cover) and not folder.is_relative_to(cover):
            mount(b"tmpfs", cover.encode(), b"tmpfs", _MS_NOSUID, b"size=16m,mode=1777", f"mount tmpfs {cover}")


def _child_setup(limits: Limits, folder: Path, isolated: tuple[str, ...], uid: int, gid: int):
    def setup() -> None:
        os.setsid()  # its own process group, killed as one
        if isolated:
            _namespaces(folder)
        mb = 1 << 20
        for what, value in (
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_AS, limits.memory_mb * mb),
            (resource.RLIMIT_FSIZE, limits.file_mb * mb),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NPROC, limits.processes),
        ):
            resource.setrlimit(what, (value, value))
        if "nobody" in isolated:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

    return setup


def _nobody() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


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


def _interpreter(folder: Path, isolated: tuple[str, ...]) -> tuple[str, dict]:
    """The interpreter to start and the variables it needs: this one, or its mount inside the folder."""
    if "mount" not in isolated:
        return sys.executable, {}
    real = Path(os.path.realpath(sys.executable))
    inside = folder / PYTHON / real.relative_to(Path(sys.base_prefix).resolve())
    return str(inside), {"LD_LIBRARY_PATH": str(folder / PYTHON / "lib")}  # a shared libpython, found by path


def base_folder() -> Path:
    """Where runs get their folders: the temporary folder, if every folder above it lets other users through
    (``nobody`` must reach its own folder), else /tmp."""
    here = Path(tempfile.gettempdir()).resolve()
    open_to_all = all(folder.stat().st_mode & 0o001 for folder in (here, *here.parents))
    return here if open_to_all else Path("/tmp")


def _run(program: str, tests: str, stdin: str | None, limits: Limits, isolated: tuple[str, ...]) -> Result:
    uid, gid = _nobody()
    folder = Path(tempfile.mkdtemp(prefix="grpo_ext_sandbox_", dir=base_folder() if "nobody" in isolated else None))
    read_end, write_end = os.pipe()
    try:
        for name, text in (("program.py", program), ("tests.py", tests), ("stdin.txt", stdin or "")):
            (folder / name).write_text(text, encoding="utf-8")
        shutil.copyfile(HARNESS, folder / "harness.py")  # readable where the package's folder is hidden
        if "mount" in isolated:
            (folder / PYTHON).mkdir()
        if "nobody" in isolated:
            for path in (folder, *folder.iterdir()):
                os.chown(path, uid, gid)
        token = secrets.token_hex(16)
        python, extra = _interpreter(folder, isolated)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8", **extra}
        started = time.monotonic()
        with open(folder / "stdin.txt", "rb") as given, open(folder / ".out", "wb") as out, open(folder / ".err", "wb") as err:
            proc = subprocess.Popen(
                [python, "-I", "-S", "harness.py", str(write_end), token],
                stdin=given,
                stdout=out,
                stderr=err,
                cwd=folder,
                env=env,
                pass_fds=(write_end,),
                preexec_fn=_child_setup(limits, folder, isolated, uid, gid),
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
            if reported.decode("ascii", "replace") == token and code == 0:
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
