"""Symbolic answer checking with math-verify, under a hard time limit that works from any thread.

math-verify bounds its own work with ``signal.alarm``, which only works on the main thread, and even
there cannot interrupt a long C-level computation: ``verify(5, 10^{100000000}+1)`` or deeply nested
parentheses run for minutes. So checks run in worker processes, and a check that overruns its limit
has its worker killed. Workers are forked from a template process (``python -m
grpo_ext.rewards.verify SOCKET``) that has imported and warmed math-verify once, so a replacement
is ready in milliseconds; they reach this process over a Unix socket. Each worker caps its memory,
so a check that explodes in size fails instead of swapping.

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
import socket
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path

# A check that would need more memory than this fails in the worker (MemoryError) instead of swapping.
WORKER_MEMORY_BYTES = 2 << 30
# The template process imports sympy and math-verify once; it and each new worker have this long to connect.
STARTUP_SECONDS = 60.0


class _Worker:
    """One forked worker answering checks one at a time over its socket."""

    def __init__(self, conn: Connection, pid: int):
        self.conn, self.pid = conn, pid

    def ask(self, request: dict, limit: float) -> dict | None:
        self.conn.send(request)
        return self.conn.recv() if self.conn.poll(limit) else None

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
        """Whether ``pred`` equals ``gold`` (math-verify's rules); None if ``gold`` cannot be parsed.

        A check that does not finish within ``limit`` seconds is False: the answer could not be
        shown equal in time.
        """
        with self.lock:
            worker = self.idle.pop() if self.idle else None
        worker = worker or self._new_worker()
        try:
            reply = worker.ask({"gold": gold, "pred": pred}, limit)
        except (OSError, EOFError):
            reply = None
        if reply is None:
            worker.kill()
            return False
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


def _serve(conn: Connection, parse, verify) -> None:
    """A worker's loop: one ``{"gold", "pred"}`` request in, one ``{"equal"}`` reply out, until the socket closes."""
    import resource
    from functools import lru_cache

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))

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
