"""Multi-process runs (``accelerate launch``): the main process does the one-off work, the others wait.

    accelerate launch --config_file configs/cpu-ddp.yaml -m grpo_ext.train recipes/digit.yaml

A single process (no ``WORLD_SIZE`` above 1 in the environment) runs everything itself and never
imports accelerate here.

When one process fails the others are stopped in a collective (TRL's reward gather, DDP's all-reduce), where they
learn only that a peer left or did not answer. So a process that fails with its own line leaves that line in the
launcher's store before it lets go of the process group (``failed``), and a process whose collective fails reads it
there (``lost``): it stops without an ``error:`` line of its own when another process printed one, and says which
process ended, or did not answer within ``training.ddp_timeout``, when none did. The process group's collective
timeout is ``training.ddp_timeout`` (``begin``), so a process that hangs holds the others that long at most.
"""

import os
import signal
import sys
import threading
from datetime import timedelta

from grpo_ext.core.errors import ElsewhereError, RecipeError, RunError

_FAILED = "grpo_ext/failed/"  # the launcher's store: a failed process's line, under its rank


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def is_main() -> bool:
    """Whether this is the main process (always, without a multi-process launch)."""
    return world_size() <= 1 or state().is_main_process


def state(timeout: float | None = None):
    """accelerate's process state; on a machine without CUDA the processes talk over gloo on the CPU. The first call
    starts the process group, with ``timeout`` seconds as its collective timeout (``begin``); later calls share it."""
    import torch
    from accelerate import PartialState

    kwargs = {"timeout": timedelta(seconds=timeout)} if timeout else {}
    return PartialState(cpu=not torch.cuda.is_available(), **kwargs)


class Terminated(BaseException):
    """The launcher ended this process (SIGTERM: torchrun does so when another process of the run exits)."""


def _terminated(signum, frame) -> None:
    if sys.exc_info()[0] is None:  # a failure already under way finishes recording and saying itself
        raise Terminated


def begin(ddp_timeout: float) -> None:
    """Join a multi-process run's process group with ``ddp_timeout`` seconds (``training.ddp_timeout``) as the
    longest wait of a collective for another process, as TRL's own setting says; the group is started here, before
    the trainer's arguments would set it. The launcher's SIGTERM becomes ``Terminated``, so that the run is recorded
    as stopped. Nothing happens on one process."""
    if world_size() <= 1:
        return
    state(ddp_timeout)
    if threading.current_thread() is threading.main_thread():  # where Python runs signal handlers
        signal.signal(signal.SIGTERM, _terminated)


def _store():
    """A client of the launcher's key-value store (torchrun's, at MASTER_ADDR:MASTER_PORT; it outlives the workers)."""
    from torch.distributed import TCPStore

    return TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=5))


def _rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def failed(exc: BaseException) -> None:
    """This process fails with ``exc``, a line of its own: leave the line where the other processes look for it when
    their collectives fail (before the process group closes). Nothing on one process, or for a failure another
    process reported; a store out of reach is not waited for."""
    if world_size() <= 1 or isinstance(exc, ElsewhereError) or not isinstance(exc, (RunError, RecipeError)):
        return
    try:
        _store().set(f"{_FAILED}{_rank()}", str(exc))
    except Exception:  # noqa: BLE001 (the store is a courtesy: without it the others say a process ended)
        pass


def _reported() -> tuple[int, str] | None:
    """(rank, line) of another process that failed with a line of its own, or None."""
    try:
        store = _store()
        for rank in range(world_size()):
            key = f"{_FAILED}{rank}"
            if rank != _rank() and store.check([key]):
                return rank, store.get(key).decode(errors="replace")
    except Exception:  # noqa: BLE001 (a store out of reach: nothing reported)
        return None
    return None


def lost(exc: BaseException, ddp_timeout: float) -> tuple[RunError, str] | None:
    """When ``exc`` stopped this process because another one of the run failed, ended or did not answer: (the error to
    raise, the line summary.json records); None for a failure of this process's own, and on one process."""
    if world_size() <= 1:
        return None
    n, me = world_size(), _rank()
    reported = _reported()
    if reported is not None:
        rank, line = reported
        said = f"stopped: process {rank} of {n} failed (its error line says why); process {me} stopped with it"
        return ElsewhereError(said), f"process {rank} of {n}: {line}"
    text = str(exc)
    if not isinstance(exc, Terminated) and "gloo" not in text and not _is_dist_error(exc):
        return None
    other = f"process {1 - me} of 2" if n == 2 else f"another process of the {n}"
    if not isinstance(exc, Terminated) and "imed out" in text:  # gloo's "Timed out waiting 15000ms for recv ..."
        why = (
            f"{other} did not answer within training.ddp_timeout ({ddp_timeout:g} s): it hangs or runs long (a reward or "
            f"tool without a timeout?); the run stopped; raise training.ddp_timeout if its steps need longer, and"
        )
    else:  # its sockets closed with it (gloo: "Connection closed by peer"), or the launcher ended this process after it
        why = (
            f"{other} ended without a word (killed, or out of memory: the launcher's report below gives its exit code); "
            f"the run stopped;"
        )
    line = f"{why} continue from the last complete checkpoint with --resume"
    return RunError(line), f"RunError: {line}"


def _is_dist_error(exc: BaseException) -> bool:
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    return dist is not None and isinstance(exc, getattr(dist, "DistError", ()))


def on_main_first(fn):
    """Run ``fn`` on the main process only and hand its result to every process.

    A RecipeError on the main process is re-raised there with its problems, and on the other processes
    with none, so that each problem is printed once and every process exits 2.
    """
    if world_size() <= 1:
        return fn()
    from accelerate.utils import broadcast_object_list

    is_main = state().is_main_process
    outcome: list = [None]
    if is_main:
        try:
            outcome[0] = ("ok", fn())
        except RecipeError as exc:
            outcome[0] = ("error", exc)
    broadcast_object_list(outcome, from_process=0)
    kind, value = outcome[0]
    if kind == "error":
        raise value if is_main else RecipeError([])
    return value


def close(completed: bool) -> None:
    """End this process's part in a multi-process run before the interpreter shuts down.

    A process that exits with its gloo process group still alive can abort in teardown ("terminate
    called without an active exception"): gloo's worker threads, and the work they hold with its
    tensors, outlive the interpreter. So the trainer of a finished run, kept only by its own reference
    cycles (its DDP model holds the process group), is collected first, while the interpreter is whole;
    then the group is shut down. After a completed run every process first waits for the others (the
    main one may still be evaluating); after a failure it does not wait, as another may never arrive.
    """
    import gc
    import sys

    dist = getattr(sys.modules.get("torch"), "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    gc.collect()
    if completed:
        dist.barrier()
    dist.destroy_process_group()
