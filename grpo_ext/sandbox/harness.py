"""The process ``local.run`` starts: ``python -I -S harness.py SETTINGS_JSON``, with the tests on stdin.

The harness sets the sandbox up (namespaces and mounts, where asked) and forks:

- **the program's process**, which lets go of stdin first (the tests never reach it), becomes the run's own user,
  takes the kernel's limits, moves into its folder and runs ``program.py``; with tests, it then answers the judge's
  calls into what the program defined (``calls``);
- **the judge**, only with tests: it reads them from stdin, becomes a second user of its own (without namespaces it
  is made unreadable to the program instead: not dumpable, so no ``/proc`` file or ``ptrace`` reaches its memory),
  and runs them against the program's names. It exits 0 only when they ran to their end.

The harness waits for them within the wall limit, kills what is left, and exits with the verdict, which nothing in
the program can write: 0 passed, 1 failed, 124 past the wall limit, 125 the machine refused the sandbox a namespace
or limit (nothing ran), 128+N the program was killed by signal N (a CPU, file-size or memory limit). Without tests
it passes when the program ran to its end. The settings carry no secret: there is none to keep.

Standard library only, and nothing of grpo_ext but ``calls.py`` beside it, imported by its file name.
"""

import builtins
import collections
import ctypes
import json
import linecache
import os
import resource
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder off the path
import calls  # noqa: E402

PASSED, FAILED, TIMEOUT, SETUP_FAILED = 0, 1, 124, 125
WORK = "work"  # the program's own folder inside the run's folder: where it may write (a bounded tmpfs in namespaces)
_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWPID, _CLONE_NEWIPC = 0x00020000, 0x40000000, 0x20000000, 0x08000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000, 0x40000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
# The folders of "/" a program keeps seeing (read-only): the system's programs, libraries and settings. Every other
# one (/home, /root, /tmp, /work, /srv, /opt, ...) is covered by an empty file system, so no data set, recipe or
# user's file is in sight; the interpreter, wherever it lives, is put back in its place.
_KEPT = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/dev", "/proc", "/sys")
_libc = ctypes.CDLL(None, use_errno=True)


# What ``local.run`` hands the harness, as JSON in its one argument: the run's folder (program.py, stdin.txt and
# the program's own WORK folder), whether to make new namespaces and users of their own, the interpreter's prefix
# (put back in sight inside the namespaces), the user ids, whether tests come on stdin, and the limits. A namedtuple,
# not typing's: the harness starts for every program, and typing's import would add to each start.
Settings = collections.namedtuple(
    "Settings",
    "folder namespaces own_user python_home uid gid judge_uid tests "
    "wall_seconds cpu_seconds memory_mb file_mb disk_mb processes open_files",
)


def _mount(source, target, kind, flags, data, what) -> None:
    def b(v):
        return os.fsencode(v) if isinstance(v, str) else v

    if _libc.mount(b(source), b(target), b(kind), flags, b(data)) != 0:
        raise OSError(ctypes.get_errno(), what)


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return sorted({line.split()[4].replace("\\040", " ") for line in fh}, key=len)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def namespaces(s: Settings) -> None:
    """New mount, network, PID and IPC namespaces: every file system read-only, every folder of "/" but the
    system's covered by an empty one, the interpreter put back, and the program's folder a tmpfs of ``disk_mb``
    at its own path; /dev/shm a small empty tmpfs."""
    if _libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE, None, "mount --make-rprivate /")  # nothing leaks out
    home, work = s.python_home, os.path.join(s.folder, WORK)
    interpreter = os.open(home, os.O_PATH | os.O_DIRECTORY)  # reachable through /proc/self/fd once covered
    for point in _mount_points():
        if point.startswith(("/proc", "/sys", "/dev")):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
        if _libc.mount(None, os.fsencode(point), None, flags, None) != 0 and point == "/":
            raise OSError(ctypes.get_errno(), "mount -o remount,ro /")
    for name in sorted(os.listdir("/")):
        top = "/" + name
        if top in _KEPT or os.path.islink(top):
            continue
        if os.path.isdir(top):
            _mount("tmpfs", top, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755", f"mount tmpfs {top}")
        elif os.path.isfile(top):
            _mount("/dev/null", top, None, _MS_BIND, None, f"mount --bind /dev/null {top}")
    if not any(_under(home, kept) for kept in _KEPT):
        os.makedirs(home, exist_ok=True)
        _mount(f"/proc/self/fd/{interpreter}", home, None, _MS_BIND | _MS_REC, None, "mount --bind PYTHON")
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
        _mount(None, home, None, flags, None, "mount -o remount,ro PYTHON")
    os.close(interpreter)
    os.makedirs(work, exist_ok=True)
    size = f"size={int(s.disk_mb)}m,mode=0755,uid={s.uid},gid={s.gid}"
    _mount("tmpfs", work, "tmpfs", _MS_NOSUID | _MS_NODEV, size, "mount tmpfs WORK")
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "size=16m,mode=1777", "mount tmpfs /dev/shm")


def _limit(s: Settings, processes: bool) -> None:
    mb = 1 << 20
    limits = [
        (resource.RLIMIT_CPU, s.cpu_seconds),
        (resource.RLIMIT_AS, s.memory_mb * mb),
        (resource.RLIMIT_FSIZE, s.file_mb * mb),
        (resource.RLIMIT_NOFILE, s.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if processes:
        limits.append((resource.RLIMIT_NPROC, s.processes))
    for what, value in limits:
        resource.setrlimit(what, (value, value))


def _become(s: Settings, uid: int) -> None:
    """Drop to ``uid`` (where the harness is root); the process dies with the harness."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
    if s.own_user:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _keep_fds(*keep: int) -> None:
    """Close every descriptor above stderr but ``keep``."""
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def program_process(s: Settings, source: str, stdin: int, ready: int, requests: int, replies: int) -> None:
    """The program's process: never returns. The harness hears ``ready`` once it is set up, before any of the
    program runs; a setup that fails says so on stderr and leaves ``ready`` unwritten."""
    try:
        os.dup2(stdin, 0)  # stdin carried the tests: the program gets its own input instead, before it runs
        _keep_fds(ready, requests, replies)
        if s.namespaces:  # the first process of the new PID namespace: a /proc of its own, host processes unseen
            _libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV, None)
        _limit(s, processes=True)
        _become(s, s.uid)
        os.chdir(os.path.join(s.folder, WORK))
    except OSError as exc:
        print(f"sandbox setup failed: {exc}", file=sys.stderr)
        os._exit(SETUP_FAILED)
    os.write(ready, b"1")
    os.close(ready)
    linecache.cache["program.py"] = (len(source), None, source.splitlines(True), "program.py")
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    sys.argv = ["program.py"]
    try:
        exec(compile(source, "program.py", "exec"), namespace)
        if s.tests:
            calls.serve_forever(calls.Answerer(requests, replies), namespace)
    except SystemExit as exc:  # the program ended itself before its end (or before its tests had their say)
        sys.stdout.flush()  # os._exit drops what is buffered: what it printed before it stopped is kept
        print(f"exited early (status {exc.code!r})", file=sys.stderr)
        os._exit(FAILED)
    except BaseException:
        sys.stdout.flush()
        traceback.print_exc(limit=5)
        os._exit(FAILED)
    sys.stdout.flush()
    os._exit(PASSED)


def judge_process(s: Settings, requests: int, replies: int) -> None:
    """The judge: never returns. Reads the tests, runs them against the program's names, exits 0 if they ran
    to their end."""
    try:
        chunks = []
        while chunk := os.read(0, 1 << 16):
            chunks.append(chunk)
        tests = b"".join(chunks).decode("utf-8")
        _keep_fds(requests, replies)
        _limit(s, processes=s.own_user)  # its own user id: it starts nothing
        _become(s, s.judge_uid)
        _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # after the uid change, which resets it
        os.chdir(os.path.join(s.folder, WORK))  # to read what the program wrote, if a test asks
    except OSError as exc:
        print(f"sandbox setup failed: {exc}", file=sys.stderr)
        os._exit(SETUP_FAILED)
    linecache.cache["tests.py"] = (len(tests), None, tests.splitlines(True), "tests.py")
    judge = calls.Judge(requests, replies)
    try:
        namespace = {**judge.names(), "__name__": "__main__", "__builtins__": builtins}
        exec(compile(tests, "tests.py", "exec"), namespace)
    except calls.ProgramEnded as exc:
        print(f"the program did not answer its tests: {exc}", file=sys.stderr)
        os._exit(FAILED)
    except BaseException as exc:  # a test that failed, or a test that ended the judge (SystemExit): no pass
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "tests.py"]
        where = f"tests.py line {frames[-1].lineno}: {frames[-1].line}: " if frames else ""
        print(f"{where}{type(exc).__name__}: {exc}"[:2000], file=sys.stderr)
        os._exit(FAILED)
    os._exit(PASSED)


def _status(code: int) -> tuple[int, int]:
    """(exit status, signal) of a wait status."""
    return (os.waitstatus_to_exitcode(code), 0) if os.WIFEXITED(code) else (-1, os.WTERMSIG(code))


def harness(s: Settings) -> int:
    """Set up, fork, wait within the wall limit, kill what is left: the verdict."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing of this process is readable through /proc or ptrace
    deadline = time.monotonic() + s.wall_seconds
    with open(os.path.join(s.folder, "program.py"), encoding="utf-8") as fh:
        source = fh.read()
    stdin = os.open(os.path.join(s.folder, "stdin.txt"), os.O_RDONLY)
    try:
        if s.namespaces:
            namespaces(s)
    except OSError as exc:  # a namespace this machine refused: the sandbox reports it, never runs unguarded
        print(f"sandbox setup failed: {exc}", file=sys.stderr)
        return SETUP_FAILED
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])  # kept for _wait; each child unblocks it
    ready_r, ready_w = os.pipe()
    requests = os.pipe() if s.tests else (-1, -1)  # the judge writes, the program reads
    replies = os.pipe() if s.tests else (-1, -1)  # the program writes, the judge reads
    program = os.fork()
    if program == 0:
        program_process(s, source, stdin, ready_w, requests[0], replies[1])
    os.close(ready_w)
    os.close(stdin)
    started = os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    judge = None
    if started and s.tests:
        try:
            judge = os.fork()
        except OSError:  # the program's process, first of its PID namespace, already ended: nothing can join it
            judge = None
        else:
            if judge == 0:
                judge_process(s, requests[1], replies[0])
    for fd in (*requests, *replies):
        if fd >= 0:
            os.close(fd)
    ended: dict[int, tuple[int, int]] = {}
    if not _wait(judge or program, ended, deadline):
        _end(program, judge, ended)
        return TIMEOUT
    if judge and ended[judge][0] != PASSED:  # a failure: was it a limit that killed the program? it ends at once
        _wait(program, ended, min(deadline, time.monotonic() + 0.5))
    killed = _end(program, judge, ended)
    if not started:
        return SETUP_FAILED
    code, sig = ended[program]
    if judge and ended[judge][0] in (PASSED, SETUP_FAILED):
        return ended[judge][0]
    if sig and program not in killed:
        return 128 + sig
    if s.tests:  # with tests, only the judge can pass a run
        return FAILED
    return PASSED if code == PASSED else FAILED


def _wait(pid: int, ended: dict, deadline: float) -> bool:
    """Reap children until ``pid`` has ended (True) or the deadline passed (False); woken by SIGCHLD."""
    while pid not in ended:
        found, code = os.waitpid(-1, os.WNOHANG)
        if found:
            ended[found] = _status(code)
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        signal.sigtimedwait([signal.SIGCHLD], min(left, 0.05))
    return True


def _end(program: int, judge: int | None, ended: dict) -> set[int]:
    """Kill what is left of the two and reap both (the ones killed here are returned). Reaped in whatever order
    they end: the first process of a PID namespace is not reapable before every other process in it is, the judge
    included, and a zombie left to an init that does not reap would keep the process group alive."""
    killed = {pid for pid in (program, judge) if pid and pid not in ended}
    for pid in killed:
        _kill(pid)
    while killed - ended.keys():
        found, code = os.waitpid(-1, 0)
        ended[found] = _status(code)
    return killed


def _kill(pid: int) -> None:
    """SIGKILL ``pid``; the program's process is the first of its PID namespace, so all it started dies with it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    os._exit(harness(Settings(**json.loads(sys.argv[1]))))
