"""Symbolic answer checking with math-verify, under a hard limit on CPU time that works from any thread.

math-verify bounds its own work with ``signal.alarm``, which only works on the main thread, and even
there cannot interrupt a long C-level computation: ``verify(5, 10^{100000000}+1)`` or deeply nested
parentheses run for minutes. So checks run in worker processes, and a check that overruns its limit
has its worker killed. Workers are forked from a template process (``python -m
grpo_ext.rewards.verify SOCKET``) that has imported and warmed math-verify once, so a replacement
is ready in milliseconds; they reach this process over a Unix socket. Each worker caps its memory,
so a check that explodes in size fails instead of swapping.

The limit is on the worker's own CPU time (``setitimer(ITIMER_PROF)``: the kernel ends the worker when
it has used that much), not on the wall clock: on a busy machine a check waits for its turn on a core
longer, but still gets the same work done, so an answer is judged alike whatever else the machine runs.
A check that runs out of CPU time, or a worker that does not answer at all within ``stall_seconds``,
is not judged (None), never judged wrong.

    >>> checker = Checker()
    >>> checker.check("\\\\frac{1}{2}", "0.5", limit=5.0)
    True
    >>> checker.check("\\\\sqrt{2}/2", "\\\\boxed{\\\\frac{1}{\\\\sqrt{2}}}", limit=5.0)
    True
    >>> checker.check("not an answer at all", "2", limit=5.0) is None
    True
    >>> checker.close()
"""

import atexit
import os
import signal
import sys
import threading
from pathlib import Path

# socket, subprocess, tempfile and multiprocessing.connection are imported where a pool or a worker starts, not at
# the top: every command that reads a recipe imports this module, and most never check an answer.

# A check that would need more memory than this fails in the worker (MemoryError) instead of swapping.
WORKER_MEMORY_BYTES = 2 << 30
# The template process imports sympy and math-verify once; it and each new worker have this long to connect.
STARTUP_SECONDS = 60.0
# A worker that has not answered a check within this many seconds of wall time (or 20 times the check's CPU limit,
# if more) is given up: the machine gives it under a twentieth of a core, or it is stopped. A backstop, so that a
# reward call always returns; a check that merely waits for a busy core ends by its CPU limit well before it.
STALL_SECONDS = 30.0


def stall_seconds(limit: float) -> float:
    """The wall time a check with ``limit`` seconds of CPU may take before its worker is given up.

    >>> stall_seconds(0.5), stall_seconds(5.0)
    (30.0, 100.0)
    """
    return max(STALL_SECONDS, 20 * limit)


class _Worker:
    """One forked worker answering checks one at a time over its socket (``conn``, a multiprocessing Connection)."""

    def __init__(self, conn, pid: int):
        self.conn, self.pid = conn, pid

    def ask(self, request: dict, wait: float) -> dict | None:
        """The worker's reply, or None when it sent none within ``wait`` seconds (EOFError when it died)."""
        self.conn.send(request)
        return self.conn.recv() if self.conn.poll(wait) else None

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.conn.close()


class Checker:
    """A pool of verify workers; safe to call from several threads at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.fork_lock = threading.Lock()
        self.idle: list[_Worker] = []
        import socket
        import subprocess
        import tempfile

        self.folder = tempfile.TemporaryDirectory(prefix="grpo_ext_verify_")
        path = str(Path(self.folder.name) / "socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.template = subprocess.Popen(
            [sys.executable, "-m", "grpo_ext.rewards.verify", path], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        atexit.register(self.close)

    def _new_worker(self) -> _Worker:
        from multiprocessing.connection import Connection

        with self.fork_lock:
            self.template.stdin.write(b"fork\n")
            self.template.stdin.flush()
            self.listener.settimeout(STARTUP_SECONDS)
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                raise RuntimeError("the math-verify worker did not start; check that math-verify is installed") from None
        conn = Connection(sock.detach())
        return _Worker(conn, conn.recv())

    def check(self, gold: str, pred: str, limit: float) -> bool | None:
        """Whether ``pred`` equals ``gold`` (math-verify's rules); None if ``gold`` cannot be parsed, or if the
        check could not be finished: it used ``limit`` seconds of CPU time, or its worker gave no answer within
        ``stall_seconds(limit)`` of wall time (its worker is then killed and replaced).
        """
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        worker = worker or self._new_worker()
        try:
            reply = worker.ask({"gold": gold, "pred": pred, "limit": limit}, stall_seconds(limit))
        except (OSError, EOFError):  # the worker died: its CPU time ran out (SIGPROF), or it was killed
            reply = None
        if reply is None:
            worker.kill()
            return None
        with self.lock:
            self.idle.append(worker)
        return reply["equal"]

    def close(self) -> None:
        with self.lock:
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.kill()
        if self.template.poll() is None:
            self.template.kill()
            self.template.wait()
        self.listener.close()
        self.folder.cleanup()


_CHECKER: Checker | None = None
_CHECKER_LOCK = threading.Lock()


def checker() -> Checker:
    """The process-wide pool, started on first use."""
    global _CHECKER
    with _CHECKER_LOCK:
        if _CHECKER is None:
            _CHECKER = Checker()
        return _CHECKER


def _serve(conn, parse, verify) -> None:
    """A worker's loop: one ``{"gold", "pred", "limit"}`` request in, one ``{"equal"}`` reply out, until the socket
    closes. Each check runs under a profiling timer of ``limit`` seconds of this process's CPU time; SIGPROF's default
    action ends the process, which stops even a computation inside C code that no Python handler could interrupt."""
    import resource
    from functools import lru_cache

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    signal.signal(signal.SIGPROF, signal.SIG_DFL)

    @lru_cache(maxsize=4096)
    def parse_gold(text: str):
        if "$" not in text and any(c in text for c in "\\^{"):  # bare LaTeX such as \frac{1}{\sqrt{2}} or x^2+1
            return parse(f"${text}$", parsing_timeout=None) or parse(text, parsing_timeout=None)
        return parse(text, parsing_timeout=None)

    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        signal.setitimer(signal.ITIMER_PROF, request["limit"])
        try:
            gold = parse_gold(request["gold"])
        except Exception:  # sympy raises many kinds of error on malformed input
            gold = None
        try:
            pred = parse(request["pred"], parsing_timeout=None) if gold else None
            if not gold:
                equal = None
            else:
                equal = not _numbers_differ(gold, pred) and bool(verify(gold, pred, timeout_seconds=None))
        except Exception:  # an answer that fails to parse or compare is not a match
            equal = False
        signal.setitimer(signal.ITIMER_PROF, 0)
        conn.send({"equal": equal})


def _numbers_differ(gold: list, pred: list) -> bool:
    """True when both answers are plain numbers (no symbols, no sets) whose values clearly differ.

    Proving two different expressions unequal is where sympy spends its time (``\\sqrt{46}/2`` against
    ``\\sqrt{47}/2`` takes 70-700 ms); a 15-digit evaluation settles it in microseconds. Values within
    a relative 1e-4 of each other are left to math-verify, whose own rounding may call them equal.
    """
    from sympy import Expr

    if not gold or not pred:
        return False
    g, p = gold[0], pred[0]
    if not (isinstance(g, Expr) and isinstance(p, Expr) and g.is_number and p.is_number):
        return False
    gv, pv = complex(g.evalf(15)), complex(p.evalf(15))
    scale = max(1.0, abs(gv))
    return all(abs(v) < 1e300 for v in (gv, pv)) and abs(gv - pv) > 1e-4 * scale


def template(path: str) -> None:
    """The template process: import and warm math-verify, then fork one worker per ``fork`` line on stdin."""
    import logging
    import socket
    from multiprocessing.connection import Connection

    logging.disable(logging.WARNING)  # math-verify warns on every call that its own timeout is off
    from math_verify import parse, verify

    verify(parse("$\\frac{1}{2}$", parsing_timeout=None), parse("0.5", parsing_timeout=None), timeout_seconds=None)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel when killed
    for line in sys.stdin:
        if line.strip() != "fork" or os.fork() != 0:
            continue
        sys.stdin.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        conn = Connection(sock.detach())
        conn.send(os.getpid())
        _serve(conn, parse, verify)
        os._exit(0)


if __name__ == "__main__":
    template(sys.argv[1])
