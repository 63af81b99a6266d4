"""Multi-process runs (``accelerate launch``): the main process does the one-off work, the others wait.

    accelerate launch --config_file configs/cpu-ddp.yaml -m grpo_ext.train recipes/digit.yaml

A single process (no ``WORLD_SIZE`` above 1 in the environment) runs everything itself and never
imports accelerate here.
"""

import os

from grpo_ext.core.errors import RecipeError


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def is_main() -> bool:
    """Whether this is the main process (always, without a multi-process launch)."""
    return world_size() <= 1 or state().is_main_process


def state():
    """accelerate's process state; on a machine without CUDA the processes talk over gloo on the CPU."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


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
    called without an active exception"): gloo's worker threads outlive the interpreter. After a
    completed run every process first waits for the others (the main one may still be evaluating);
    after a failure it does not wait, as another process may never arrive.
    """
    import sys

    dist = getattr(sys.modules.get("torch"), "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    if completed:
        dist.barrier()
    dist.destroy_process_group()
