"""Wrap a reward so that TRL logs it under a unique name and every fault names the reward.

A reward that raises stops the run with one line naming the reward, the sample and the start of its
completion; with ``on_error: skip`` that sample scores ``None`` instead (TRL leaves it out of the group's
baseline) and the count is logged per step as ``reward_errors/NAME``. Every None a reward gives, for an error or
of its own (a sample it cannot judge), is counted per step as ``reward_none/NAME``. A wrong number of scores, NaN,
infinity or a non-number always stops the run, and so does a reward that raises SystemExit or
KeyboardInterrupt (a ``sys.exit`` in it would otherwise end training as if it had succeeded) or calls
``os._exit``. ``os._exit`` ends a process at once, past every ``except`` and ``finally``, so for the length of a
call it is replaced by a function that raises ``ExitCalled``: the run fails with a line naming the reward. That
is detection, not isolation: the reward still runs in the trainer's process, and an exit by another route
(``posix._exit``, an ``_exit`` bound before the call, a signal) still ends it. Each call runs
on its own daemon thread under a time limit (``timeout`` seconds), so it works whichever thread TRL calls
the reward from. A reward stuck inside C code that holds the interpreter lock (a runaway regular expression)
cannot be stopped from Python: at twice the limit plus one second ``faulthandler`` prints every thread's
stack and ends the process with status 1.
"""

import contextlib
import dataclasses
import faulthandler
import math
import numbers
import os
import sys
import threading
import time
from typing import Any

from grpo_ext.core import console
from grpo_ext.core.errors import Problem, RecipeError, RunError, problem
from grpo_ext.core.text import listing, shown
from grpo_ext.rewards.api import RewardInfo, completion_text, describe
from grpo_ext.rewards.registry import REGISTRY, Resolved
from grpo_ext.settings import compat

ON_ERROR = ("fail", "skip")  # rewards[i].on_error: stop the run, or score the sample None


class RewardTimeout(Exception):
    """A reward call ran past its time limit."""


class RewardExit(Exception):
    """A reward raised SystemExit or KeyboardInterrupt, or called ``os._exit`` (``exc``, then an ExitCalled): an error
    of the reward, not the end of the run."""

    def __init__(self, exc: BaseException):
        super().__init__(exc)
        self.exc = exc


class ExitCalled(BaseException):
    """Raised in place of ``os._exit(status)`` called during a reward call: a BaseException, so that a reward's
    ``except Exception`` does not swallow it and ``on_error: skip`` never skips it."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


_exits_lock = threading.Lock()
_exits_seen: dict[int, tuple[int, list]] = {}  # per reward call under way, by its block's id: (process id, statuses caught)
_replaced: list = []  # while any call is under way: the os._exit and threading.excepthook it replaced, put back after


def _caught_exit(status):
    """``os._exit`` while a reward call is under way: raises ExitCalled and records the status for each call under way
    in this process (on a thread the reward started, the exception ends only that thread; the record still fails
    the call). A child the reward forked (multiprocessing) is another process: its ``os._exit`` ends it."""
    with _exits_lock:
        calls = [seen for owner, seen in _exits_seen.values() if owner == os.getpid()]
        for seen in calls:
            seen.append(status)
        real_exit = _replaced[0] if _replaced else os._exit
    if not calls:
        real_exit(status)
    raise ExitCalled(status)


def _quiet_exit_hook(args):
    """A thread of the reward's own that ended in ExitCalled: no traceback, the call's error says it."""
    if not isinstance(args.exc_value, ExitCalled):
        (_replaced[1] if _replaced else threading.__excepthook__)(args)


def _put_back() -> None:
    if _replaced:
        os._exit, threading.excepthook = _replaced
        _replaced.clear()


def _forked():
    """In a child forked during a reward call: no call of its own is under way, and the lock may have been held."""
    global _exits_lock
    _exits_lock = threading.Lock()
    _exits_seen.clear()
    _put_back()


os.register_at_fork(after_in_child=_forked)


@contextlib.contextmanager
def exits_caught():
    """For the length of the block, ``os._exit`` in this process raises ExitCalled; yields the list of the statuses
    it was called with. Blocks may overlap (on other threads): ``os._exit`` stays replaced while any is open."""
    seen: list = []
    key = id(seen)
    with _exits_lock:
        if not _replaced:
            _replaced[:] = [os._exit, threading.excepthook]
            os._exit, threading.excepthook = _caught_exit, _quiet_exit_hook
        _exits_seen[key] = (os.getpid(), seen)
    try:
        yield seen
    finally:
        with _exits_lock:
            _exits_seen.pop(key, None)  # a forked child that returns here holds none
            if not _exits_seen:
                _put_back()


def call_with_limit(fn, limit: float | None, /, **kwargs):
    """``fn(**kwargs)`` on a daemon thread; RewardTimeout if it has not returned within ``limit`` seconds.

    An exception of ``fn`` is raised here as is, except SystemExit, KeyboardInterrupt and ExitCalled, which come as
    RewardExit:
    on the reward's own thread neither can be the user's Ctrl-C (a signal reaches the main thread, here, in the
    wait). With ``limit`` None ``fn`` runs on the caller's thread, where a KeyboardInterrupt may be Ctrl-C and
    stays one."""
    if limit is None:
        try:
            return fn(**kwargs)
        except (SystemExit, ExitCalled) as exc:
            raise RewardExit(exc) from exc
    box: dict = {}
    done = threading.Event()
    inherit = _torch_context()

    def target():
        try:
            inherit()
            box["value"] = fn(**kwargs)
        except BaseException as exc:  # handed to the caller's thread as is
            box["error"] = exc
        finally:
            done.set()

    faulthandler.dump_traceback_later(2 * limit + 1, exit=True, file=sys.__stderr__)
    try:
        threading.Thread(target=target, daemon=True, name="grpo_ext-reward").start()
        finished = done.wait(limit)
    finally:
        faulthandler.cancel_dump_traceback_later()
    if not finished:
        raise RewardTimeout
    if isinstance(box.get("error"), (SystemExit, KeyboardInterrupt, ExitCalled)):
        raise RewardExit(box["error"]) from box["error"]
    if "error" in box:
        raise box["error"]
    return box["value"]


def _torch_context():
    """What a reward thread must share with the caller's: torch's grad mode and current CUDA device."""
    torch = sys.modules.get("torch")
    if torch is None:
        return lambda: None
    grad = torch.is_grad_enabled()
    device = torch.cuda.current_device() if torch.cuda.is_initialized() else None

    def inherit():
        torch.set_grad_enabled(grad)
        if device is not None:
            torch.cuda.set_device(device)

    return inherit


def _start(completion) -> str:
    return repr(completion_text(completion)[:40])


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


class Guarded:
    """A picklable reward wrapper: runs the reward under a time limit and checks the scores it returns.

    ``where`` is the recipe key of the reward (``rewards[1]``), named in the fix each error suggests.
    A reward without ``**kwargs`` gets only the keywords it names, whatever this TRL version passes.
    ``info``: what the reward declares (``api.RewardInfo``), read once, under the metric name ``name``, with
    ``pass_threshold`` (the recipe's) over the reward's own.
    """

    info: RewardInfo

    def __init__(
        self,
        fn,
        name: str,
        *,
        where: str = "rewards[i]",
        on_error: str = "fail",
        timeout: float | None = None,
        pass_threshold: float | None = None,
    ):
        self.fn = fn
        declared = describe(fn)
        # the score at which an eval sample passes this reward: the recipe's, else the reward's own, else eval's
        own = pass_threshold if pass_threshold is not None else declared.pass_threshold
        self.info = dataclasses.replace(declared, name=name, pass_threshold=own)
        self.__name__ = name
        self.__doc__ = fn.__doc__
        self.where, self.on_error, self.timeout = where, on_error, timeout
        self.accepts = compat.reward_params(fn)
        self.skipped = 0  # samples scored None after an error, since the last metrics line
        self.unscored = 0  # samples scored None, those after an error included, since the last metrics line
        self.seconds = 0.0  # wall time spent scoring, since the last metrics line
        self.warned = False

    def __getstate__(self):
        fresh = {"skipped": 0, "unscored": 0, "seconds": 0.0, "warned": False}
        return {k: v for k, v in self.__dict__.items() if k not in fresh} | fresh

    def __call__(self, completions, **kwargs) -> list[float | None]:
        n = len(completions)
        started = time.perf_counter()
        try:
            with exits_caught() as exits:
                scores = call_with_limit(
                    self._batch_then_samples, self.timeout, completions=completions, **compat.reward_kwargs(self.accepts, kwargs)
                )
        except RewardTimeout:
            raise RunError(
                f"reward {self.__name__!r} did not return within {self.timeout:g} s on a batch of {n} "
                f"completions; make it faster or raise {self.where}.timeout"
            ) from None
        except RewardExit as exc:  # never skipped: the reward tried to end the process, not to score a sample
            raise self._exited(exc.exc, n) from exc.exc
        finally:
            self.seconds += time.perf_counter() - started
        if exits:  # os._exit on a thread of the reward's own, or its ExitCalled caught by the reward: it still meant to exit
            raise self._exited(ExitCalled(exits[0]), n)
        if not isinstance(scores, (list, tuple)) or len(scores) != n:
            got = f"{len(scores)} scores" if isinstance(scores, (list, tuple)) else f"a {type(scores).__name__}"
            raise RunError(f"reward {self.__name__!r} returned {got} for {n} completions; return one score per completion")
        out = []
        for i, s in enumerate(scores):
            if s is None:
                self.unscored += 1
                out.append(None)
                continue
            if isinstance(s, bool) or not isinstance(s, numbers.Real) or not math.isfinite(s):
                raise RunError(
                    f"reward {self.__name__!r} gave {shown(s, 40)} for sample {i} of {n} (completion {_start(completions[i])}); "
                    f"a score is a finite number or None"
                )
            out.append(float(s))
        return out

    def _exited(self, exc: BaseException, n: int) -> RunError:
        """The error for a reward that raised SystemExit or KeyboardInterrupt, or called ``os._exit`` (ExitCalled)."""
        did = f"called os._exit({exc.status!r})" if isinstance(exc, ExitCalled) else f"raised {_reason(exc)}"
        return RunError(
            f"reward {self.__name__!r} {did} on a batch of {n} completions; a reward returns scores and never exits: "
            f"fix the reward ({self.where})"
        )

    def _batch_then_samples(self, completions, **kwargs):
        """The reward on the whole batch; if that raises, on each sample alone to find (or skip) the culprit."""
        try:
            return self.fn(completions=completions, **kwargs)
        except Exception as exc:
            batch_error = exc
        n = len(completions)
        scores: list = []
        skipped = 0
        for i in range(n):
            alone = {k: [v[i]] if isinstance(v, list) and len(v) == n else v for k, v in kwargs.items()}
            try:
                scores.extend(self.fn(completions=[completions[i]], **alone))
            except Exception as exc:
                if self.on_error != "skip":
                    raise RunError(
                        f"reward {self.__name__!r} raised {_reason(exc)} on sample {i} of {n} (completion "
                        f"{_start(completions[i])}); fix the reward or set {self.where}.on_error: skip"
                    ) from exc
                self._skip(i, n, completions[i], exc)
                skipped += 1
                scores.append(None)
        if not skipped:
            raise RunError(
                f"reward {self.__name__!r} raised {_reason(batch_error)} on a batch of {n} completions, though each "
                f"sample alone scores; the reward depends on the batch: fix it"
            ) from batch_error
        return scores

    def _skip(self, i: int, n: int, completion, exc: BaseException) -> None:
        self.skipped += 1
        if not self.warned:
            self.warned = True
            console.logger(__name__).warning(
                f"warning: reward {self.__name__!r} raised {_reason(exc)} on sample {i} of {n} (completion "
                f"{_start(completion)}); scored None ({self.where}.on_error: skip), counted as reward_errors/{self.__name__} "
                f"in metrics.jsonl"
            )


def metric_name(name: str, fn, i: int = 0) -> str:
    """The name TRL logs the reward ``rewards[i]`` names ``name`` under: the registry name, else the function's."""
    return name if name in REGISTRY else describe(fn).name or f"reward_{i}"


def guard_all(entries: list[dict], funcs: list) -> list[Guarded | None]:
    """The recipe's rewards (``entries``, with the functions built from them) guarded, each under a unique
    metric name: a registry name, else the function's ``__name__``; a name used twice gets ``_2``, ``_3``.
    A None in ``funcs`` (a user's factory that validation does not call) stays None in its place."""
    guarded, seen = [], {}
    for i, (entry, fn) in enumerate(zip(entries, funcs, strict=True)):
        if fn is None:
            guarded.append(None)
            continue
        base = metric_name(entry["name"], fn, i)
        seen[base] = seen.get(base, 0) + 1
        guarded.append(
            Guarded(
                fn,
                base if seen[base] == 1 else f"{base}_{seen[base]}",
                where=f"rewards[{i}]",
                on_error=entry["on_error"],
                timeout=entry["timeout"],
                pass_threshold=entry.get("pass_threshold"),
            )
        )
    return guarded


def missing_columns(funcs: list, columns: list[str], rows: str) -> list[str]:
    """One problem per reward that needs a dataset column the ``rows`` (named in the message) lack.

    >>> def graded(completions, answer, **kwargs): ...
    >>> guarded = guard_all([{"name": "graded", "on_error": "fail", "timeout": None}], [graded])
    >>> print(missing_columns(guarded, ["prompt"], "the rows")[0][:60])
    rewards[0] (graded) needs column 'answer', which the rows la
    """
    problems = []
    for fn in funcs:
        for column in describe(fn).columns:  # a reward not built yet (None) needs none until it is
            if column not in columns:
                problems.append(
                    f"{fn.where} ({fn.__name__}) needs column {column!r}, which {rows} lack (columns: {listing(columns)}); "
                    f"add it to the data, or point the reward at a column they have"
                )
    return problems


def guarded_rewards(
    entries: list[dict[str, Any]],
    resolved: list[Resolved],
    columns: dict[str, tuple[list[str] | None, str]],
    problems: list[Problem],
    *,
    build: bool,
) -> list[Guarded | None]:
    """The rewards guarded under unique metric names, and a problem for each dataset column one of them needs that
    its rows lack. A user's factory is called only with ``build``; without, its place holds None, checked later."""
    if len(resolved) != len(entries):  # a reward that failed its own check is already a problem
        return []
    funcs = []
    for r in resolved:
        try:
            funcs.append(r.build() if build or not r.deferred else None)
        except RecipeError as exc:
            problems.extend(exc.found)
            funcs.append(None)
    guarded = guard_all(entries, funcs)
    for cols, rows in columns.values():
        if cols is not None:
            problems.extend(map(problem, missing_columns(guarded, cols, rows)))
    return guarded


def reward_meter(funcs: list):
    """A TrainerCallback that adds to each training log, per reward, ``reward_seconds/NAME`` (wall time spent
    scoring since the last line, for the cost of a reward next to the step's), ``reward_none/NAME`` (samples it
    scored None since the last line: not judged, left out of their group) and, for rewards that skip errors,
    ``reward_errors/NAME`` (those of them scored None after an error)."""
    from transformers import TrainerCallback

    guarded = [f for f in funcs if isinstance(f, Guarded)]

    class _Meter(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            for f in guarded:  # what the pre-flight and the eval before cost is not the first step's
                f.skipped, f.unscored, f.seconds = 0, 0, 0.0

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs is None or "reward" not in logs:
                return
            for f in guarded:
                logs[f"reward_seconds/{f.__name__}"] = round(f.seconds, 3)
                logs[f"reward_none/{f.__name__}"] = f.unscored
                if f.on_error == "skip":
                    logs[f"reward_errors/{f.__name__}"] = f.skipped
                f.skipped, f.unscored, f.seconds = 0, 0, 0.0

    return _Meter()
