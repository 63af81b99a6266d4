"""The script ``sandbox.run`` starts in a run's folder: ``python -I -S harness.py STAGE SETTINGS_JSON``.

``setup`` runs first, in a small fresh interpreter (the training process, gigabytes large, never forks: it only
spawns this): where asked, it makes the namespaces and mounts, sets the kernel limits, becomes ``nobody`` and
starts the interpreter again from its mount inside the folder (``run``); without namespaces it goes on to ``run``
itself. ``run`` forks once (in a PID namespace the child is its first process: when it ends, the kernel ends all
the program started), executes ``program.py`` and then ``tests.py`` in one namespace and, only if both ran to
their end, writes the token to the pipe: a program that exits early (``sys.exit(0)``, ``os._exit(0)``) never
reaches that write, so it does not pass. Standard library only: nothing of grpo_ext is importable here.
"""

import ctypes
import json
import os
import resource
import sys
import traceback

_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWPID, _CLONE_NEWIPC = 0x00020000, 0x40000000, 0x20000000, 0x08000000
_MS_RDONLY, _MS_NOSUID, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x2, 0x20, 0x1000, 0x4000, 0x40000


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return sorted({line.split()[4].replace("\\040", " ") for line in fh}, key=len)


def namespaces(folder: str, python_home: str, inside: str) -> None:
    """New network, PID, IPC and mount namespaces; the interpreter mounted at ``inside`` (in ``folder``); every mount
    read-only but ``folder``; /dev/shm, /root and /home covered by empty file systems."""
    libc = ctypes.CDLL(None, use_errno=True)

    def mount(source, target, kind, flags, data, what):
        if libc.mount(source, target, kind, flags, data) != 0:
            raise OSError(ctypes.get_errno(), what)

    if libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None, "mount --make-rprivate /")  # nothing leaks out
    keep = os.fsencode(folder)
    mount(keep, keep, None, _MS_BIND, None, "mount --bind FOLDER")  # its own mount, left writable below
    os.chdir(folder)  # onto that mount
    mount(os.fsencode(python_home), os.fsencode(inside), None, _MS_BIND | _MS_REC, None, "mount --bind PYTHON")
    for point in _mount_points():
        if point == folder or point.startswith(("/proc", "/sys", "/dev")):
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
        if libc.mount(None, os.fsencode(point), None, flags, None) != 0 and point in ("/", inside):
            raise OSError(ctypes.get_errno(), f"mount -o remount,ro {point}")
    for cover in ("/dev/shm", "/root", "/home"):  # users' files out of sight; the interpreter is seen in folder
        if os.path.isdir(cover) and not (folder + "/").startswith(cover + "/"):
            mount(b"tmpfs", cover.encode(), b"tmpfs", _MS_NOSUID, b"size=16m,mode=1777", f"mount tmpfs {cover}")


def setup(s: dict) -> None:
    isolated = s["isolated"]
    if isolated:
        namespaces(s["folder"], s["python_home"], s["python_mount"])
    mb = 1 << 20
    for what, value in (
        (resource.RLIMIT_CPU, s["cpu_seconds"]),
        (resource.RLIMIT_AS, s["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, s["file_mb"] * mb),
        (resource.RLIMIT_NOFILE, s["open_files"]),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, s["processes"]),
    ):
        resource.setrlimit(what, (value, value))
    if not isolated:
        run(s)
        return
    os.setgroups([])
    os.setgid(s["gid"])
    os.setuid(s["uid"])
    python = os.path.join(s["python_mount"], s["python_in_home"])
    env = {**os.environ, "LD_LIBRARY_PATH": os.path.join(s["python_mount"], "lib")}  # a shared libpython, by path
    os.execve(python, [python, "-I", "-S", "harness.py", "run", json.dumps(s)], env)


def program(fd: int, token: str) -> None:
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    with open("program.py", encoding="utf-8") as fh:
        source = fh.read()
    with open("tests.py", encoding="utf-8") as fh:
        tests = fh.read()
    sys.argv = ["program.py"]
    try:
        exec(compile(source, "program.py", "exec"), namespace)
        exec(compile(tests, "tests.py", "exec"), namespace)
    except SystemExit as exc:  # the program ended itself before the tests had their say
        sys.stdout.flush()  # os._exit drops what is buffered: what it printed before it stopped is kept
        print(f"exited early (status {exc.code!r})", file=sys.stderr)
        os._exit(1)
    except BaseException:
        sys.stdout.flush()
        traceback.print_exc(limit=5)
        os._exit(1)
    sys.stdout.flush()
    os.write(fd, token.encode("ascii"))
    os._exit(0)


def run(s: dict) -> None:
    pid = os.fork()  # in a PID namespace the child is its first process; elsewhere a plain child
    if pid == 0:
        program(s["fd"], s["token"])
    os.close(s["fd"])
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


if __name__ == "__main__":
    stage, settings = sys.argv[1], json.loads(sys.argv[2])
    try:
        (setup if stage == "setup" else run)(settings)
    except OSError as exc:  # a namespace or limit this machine refused: the sandbox reports it, never runs unguarded
        print(f"sandbox setup failed: {exc}", file=sys.stderr)
        os._exit(125)
