"""What a CPU's bfloat16 kernels keep (``run/heap.py``: ``bound_kernel_caches``), measured in a process's resident
size."""

import json
import os
import platform
import subprocess
import sys

import pytest

from grpo_ext.run import heap

GROWTH = """
import json, os, random, sys
import torch
if sys.argv[1] == "bounded":
    from grpo_ext.run import heap
    heap.bound_kernel_caches()
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
random.seed(0)
layer = torch.nn.Linear(256, 768)
sizes = []
for i in range(120):  # a new row count each time, as a tool run's conversations have
    x = torch.randn(2, 100 + i, 256, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    y.float().sum().backward()
    if i in (19, 119):
        sizes.append(resident())
print(json.dumps({"caps": [os.environ.get(k) for k in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")],
                  "growth": sizes[1] - sizes[0]}))
"""


@pytest.mark.skipif(platform.system() != "Linux", reason="the resident size is read from /proc")
def test_bfloat16_products_of_new_shapes_keep_no_more_kernels_than_the_caps():
    """bfloat16 products on a CPU over 100 new shapes, in a process of their own: with the caps grpo_ext sets before a
    model loads, the resident size grows by less than a third of what it grows by under oneDNN's and ideep's own
    capacities (1024 kernels each, one a shape: 254 MiB against 45 here); a capacity the environment gives is kept."""

    def growth(mode: str, env: dict) -> dict:
        clean = {k: v for k, v in os.environ.items() if k not in heap.KERNEL_CACHES}
        proc = subprocess.run([sys.executable, "-c", GROWTH, mode], capture_output=True, text=True, env={**clean, **env})
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    bounded = growth("bounded", {})
    library = growth("bounded", dict.fromkeys(heap.KERNEL_CACHES, "1024"))  # as given: setdefault keeps it
    assert bounded["caps"] == list(heap.KERNEL_CACHES.values()) and library["caps"] == ["1024", "1024"]
    assert library["growth"] > 100 * 2**20, library  # what the libraries' own caches kept
    assert bounded["growth"] < library["growth"] / 3, (bounded, library)
