"""Freed memory handed back to the system (``run/heap.py``), measured in this process's resident size."""

import gc
import os
import platform
import weakref
from types import SimpleNamespace

import pytest

from grpo_ext.run import heap
from grpo_ext.run.trl_internals import Step

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's, on Linux"
)
BLOCK = 64 * 1024  # under glibc's smallest mmap threshold (128 KiB): these come from the heap, never from mmap
BLOCKS = 2400  # 150 MiB


def resident() -> int:
    """This process's resident size in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def freed_in_the_heap() -> list:
    """Fill 150 MiB of heap blocks, each followed by one of the same size that stays, then free the first of each
    pair: the holes stay resident, as a micro-batch's activations do between the optimizer's tensors (neighbours that
    stay keep them from merging into the heap's top, which the C library would hand back by itself). Returns the
    blocks that stay."""
    heap.release()  # start from a heap with nothing free to give back
    freed, kept = [], []
    for _ in range(BLOCKS):
        freed.append(bytearray(b"x") * BLOCK)  # written, so every page is resident
        kept.append(bytearray(b"y") * BLOCK)
    del freed
    return kept


def step_on(device: str) -> Step:
    return Step(trainer=SimpleNamespace(accelerator=SimpleNamespace(device=SimpleNamespace(type=device))), metrics={})


@glibc
def test_release_hands_back_what_the_heap_holds_freed(monkeypatch):
    monkeypatch.delenv(heap.OFF, raising=False)
    heap._libc.cache_clear()
    kept = freed_in_the_heap()
    before = resident()
    assert heap.release() is True
    assert before - resident() > BLOCKS * BLOCK // 2, "most of the freed 150 MiB should leave the resident size"
    del kept


@glibc
def test_the_loss_pass_on_a_cpu_runs_after_the_release_and_returns_its_loss(monkeypatch):
    monkeypatch.delenv(heap.OFF, raising=False)
    heap._libc.cache_clear()
    kept = freed_in_the_heap()
    seen = []

    def loss(inputs):
        seen.append(resident())
        return inputs["x"] * 2

    before = resident()
    assert heap.ReleaseFreed().on_loss(step_on("cpu"), None, {"x": 21}, loss) == 42
    assert before - seen[0] > BLOCKS * BLOCK // 2
    batch = {"completion_ids": [1]}
    assert heap.ReleaseFreed().on_batch(step_on("cpu"), batch) is batch
    del kept


@glibc
def test_on_an_accelerator_and_when_turned_off_nothing_is_handed_back(monkeypatch):
    heap._libc.cache_clear()
    kept = freed_in_the_heap()
    before = resident()
    assert heap.ReleaseFreed().on_loss(step_on("cuda"), None, {}, lambda inputs: 0.0) == 0.0
    assert abs(resident() - before) < BLOCKS * BLOCK // 4, "an accelerator's run keeps the CPU heap as it is"
    monkeypatch.setenv(heap.OFF, "0")
    heap._libc.cache_clear()
    try:
        assert heap.release(collect=False) is False
        assert abs(resident() - before) < BLOCKS * BLOCK // 4
    finally:
        monkeypatch.delenv(heap.OFF)
        heap._libc.cache_clear()
    del kept


def test_a_behaviour_that_changes_no_result_is_optional_and_the_others_are_not():
    from grpo_ext.run import dynamic, rollouts, skipping

    assert heap.ReleaseFreed.optional is True
    assert not any(b.optional for b in (skipping.SkipZeroAdvantage(), dynamic.DynamicSampling(2), rollouts.DroppedResults()))


def test_a_run_hands_freed_memory_back_at_each_step_only_with_a_tool_loop():
    """A tool loop's caches of every size leave holes its loss pass does not fill; a run without one takes the same
    memory again each step, and handing it back cost recipes/arith.yaml 6-19 % of its step for no lower peak."""
    from grpo_ext.recipe import load
    from grpo_ext.verbs.train import behaviours

    def trims(name: str) -> bool:
        return any(isinstance(b, heap.ReleaseFreed) for b in behaviours(load(name)))

    assert trims("arith-tools") and trims("guess")
    assert not trims("arith") and not trims("digit")


class Node:
    """An object in a reference cycle: only the collector frees it."""

    def __init__(self):
        self.me = self


def test_a_run_scans_only_what_it_made_and_thaws_what_it_froze():
    """``objects_frozen``: the objects alive at a run's start are frozen for the run (a collection's scan skips them),
    what was garbage then is collected first, and the process leaves as it came; one that froze objects itself keeps
    them frozen and has nothing more frozen."""
    gc.unfreeze()  # this worker's own freeze (tests/conftest.py), put back at the end
    try:
        alive, garbage = Node(), weakref.ref(Node())
        with heap.objects_frozen():
            assert garbage() is None, "garbage at the start was frozen, not collected"
            frozen = gc.get_freeze_count()
            assert frozen > 0
            gc.collect()  # a run's own collection (another thread's garbage may be in it: not counted)
            assert gc.get_freeze_count() == frozen  # alive stays frozen
        assert gc.get_freeze_count() == 0 and alive.me is alive
        gc.freeze()
        frozen = gc.get_freeze_count()
        Node()
        with heap.objects_frozen():
            assert gc.get_freeze_count() == frozen  # the process's choice: nothing more frozen, no collection first
        assert gc.get_freeze_count() == frozen
    finally:
        gc.freeze()


MAPPED = """
import ctypes, json, os
from grpo_ext.run import heap

class Mallinfo2(ctypes.Structure):  # glibc 2.33 and newer (malloc.h)
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Mallinfo2

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def large_blocks(mapped):
    '''40 blocks of 2 MiB, each followed by a small one that stays, then the large ones freed: the bytes glibc mapped
    on their own for them, and what left the resident size when they were freed.'''
    with heap.large_blocks_mapped(on=mapped):
        before = mallinfo2().hblkhd
        large, kept = [], []
        for _ in range(40):
            large.append(bytearray(b"x") * (2 << 20))
            kept.append(bytearray(b"y") * 4096)
        on_their_own = mallinfo2().hblkhd - before
        held = resident()
        del large
        return {"mapped": on_their_own, "freed": held - resident()}

with heap.large_blocks_mapped():  # leaves glibc's threshold at its ceiling, as in a process that has trained
    pass
print(json.dumps({"inside": large_blocks(True), "outside": large_blocks(False)}))
"""


@glibc
def test_within_large_blocks_mapped_a_large_block_is_mapped_on_its_own_and_freeing_it_leaves_the_resident_size():
    """Within ``large_blocks_mapped`` each block of 2 MiB is mapped on its own (glibc's own count of such bytes,
    ``mallinfo2``), and freeing it unmaps it at once; outside, at the threshold a trained process has, the same blocks
    come from the heap, whose holes between kept blocks stay in the process (how much of the resident size leaves
    then depends on where glibc put them, so only the count is checked there). In a process of its own: the threshold
    it leaves set is the process's."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != heap.OFF}
    proc = subprocess.run([sys.executable, "-c", MAPPED], capture_output=True, text=True, check=True, env=env)
    found = json.loads(proc.stdout)
    assert found["inside"]["mapped"] >= 80 << 20, found
    assert found["inside"]["freed"] > 70 << 20, found  # given back as each was freed
    assert found["outside"]["mapped"] < 8 << 20, found  # from the heap


def test_large_blocks_mapped_does_nothing_where_it_is_off(monkeypatch):
    monkeypatch.setenv(heap.OFF, "0")
    heap._libc.cache_clear()
    try:
        with heap.large_blocks_mapped():
            pass
        assert heap._libc("mallopt") is None
    finally:
        monkeypatch.delenv(heap.OFF)
        heap._libc.cache_clear()
