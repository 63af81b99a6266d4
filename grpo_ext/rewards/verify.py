"""Symbolic answer checking with math-verify, under a hard time limit that works from any thread.

math-verify bounds its own work with ``signal.alarm``, which only works on the main thread, and even
there cannot interrupt a long C-level computation: ``verify(5, 10^{10^{10^{10}}})`` or ten thousand
nested parentheses run for minutes. So the checks run in a separate process, forked from a server that has
math-verify imported already, and a check that overruns its limit has its process killed and replaced. A spare process is kept warm so that a kill costs the next check
nothing. Each process caps its memory, so a check that explodes in size fails instead of swapping.

    >>> checker = Checker()
    >>> checker.check("\\\\frac{1}{2}", "0.5", limit=5.0)
    True
    >>> checker.check("\\\\sqrt{2}/2", "\\\\boxed{\\\\frac{1}{\\\\sqrt{2}}}", limit=5.0)
    True
    >>> checker.check("not an answer at all", "2", limit=5.0) is None
    True
"""

import atexit
import threading

# A check that would need more memory than this fails in the worker (MemoryError) instead of swapping.
WORKER_MEMORY_BYTES = 2 << 30
# A fresh worker has this long to say it is ready (the first one also starts the fork server).
STARTUP_SECONDS = 60.0


def _context():
    """Workers fork from a server process that has already imported math-verify, so a replacement starts in
    milliseconds, and no worker is forked from a process that runs torch threads."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["grpo_ext.rewards.verify", "math_verify"])
    return ctx


class _Worker:
    """One child process answering checks, one at a time, over a pipe."""

    def __init__(self):
        ctx = _context()
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False

    def wait_ready(self) -> bool:
        if not self.ready:
            self.ready = self.conn.poll(STARTUP_SECONDS) and self.conn.recv() == "ready"
        return self.ready

    def ask(self, request: dict, limit: float) -> dict | None:
        self.conn.send(request)
        return self.conn.recv() if self.conn.poll(limit) else None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


class Checker:
    """A pool of verify workers; safe to call from several threads at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.spare: _Worker | None = None
        atexit.register(self.close)

    def _take(self) -> _Worker:
        with self.lock:
            if self.idle:
                return self.idle.pop()
            worker, self.spare = self.spare, None
        worker = worker or _Worker()
        self._start_spare()
        return worker

    def _start_spare(self) -> None:
        with self.lock:
            if self.spare is None:
                self.spare = _Worker()

    def check(self, gold: str, pred: str, limit: float) -> bool | None:
        """Whether ``pred`` equals ``gold`` (math-verify's rules); None if ``gold`` cannot be parsed.

        A check that does not finish within ``limit`` seconds of work is False: the answer could not
        be shown equal in time.
        """
        worker = self._take()
        if not worker.wait_ready():
            worker.kill()
            raise RuntimeError("the math-verify worker did not start; check that math-verify is installed")
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
            workers, self.idle = self.idle + ([self.spare] if self.spare else []), []
            self.spare = None
        for worker in workers:
            worker.kill()


_CHECKER: Checker | None = None
_CHECKER_LOCK = threading.Lock()


def checker() -> Checker:
    """The process-wide pool, started on first use."""
    global _CHECKER
    with _CHECKER_LOCK:
        if _CHECKER is None:
            _CHECKER = Checker()
        return _CHECKER


def serve(conn) -> None:
    """The worker's loop: one ``{"gold", "pred"}`` request in, one ``{"equal"}`` reply out."""
    import logging
    import resource
    from functools import lru_cache

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    logging.disable(logging.WARNING)  # math-verify warns on every call that its own timeout is off
    from math_verify import parse, verify

    @lru_cache(maxsize=4096)
    def parse_gold(text: str):
        if "$" not in text and any(c in text for c in "\\^{"):  # bare LaTeX such as \frac{1}{\sqrt{2}} or x^2+1
            return parse(f"${text}$", parsing_timeout=None) or parse(text, parsing_timeout=None)
        return parse(text, parsing_timeout=None)

    verify(parse_gold("\\frac{1}{2}"), parse("0.5", parsing_timeout=None), timeout_seconds=None)  # warm caches
    conn.send("ready")
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        try:
            gold = parse_gold(request["gold"])
        except Exception:  # sympy raises many kinds of error on malformed input
            gold = None
        try:
            equal = None if not gold else bool(verify(gold, parse(request["pred"], parsing_timeout=None), timeout_seconds=None))
        except Exception:  # an answer that fails to parse or compare is not a match
            equal = False
        conn.send({"equal": equal})
