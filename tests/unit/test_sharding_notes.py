"""What a sharded launch becomes on this machine, said in one line (run/hardware.py's sharding_notes); the launches
themselves run in tests/integration/test_sharding_cpu.py."""

import pytest

from grpo_ext.run import hardware

FSDP_ON_CPU = (
    "FSDP: accelerate shards only on GPUs: without a CUDA device these 2 processes run DDP over gloo, "
    "each holding the whole model and its optimizer state (as with configs/cpu-ddp.yaml)"
)


@pytest.mark.parametrize(
    "environ, has_cuda, expected",
    [
        ({"ACCELERATE_USE_FSDP": "true", "WORLD_SIZE": "2"}, False, [FSDP_ON_CPU]),  # accelerate keeps DDP on the CPU
        ({"ACCELERATE_USE_FSDP": "True", "WORLD_SIZE": "2"}, False, [FSDP_ON_CPU]),  # read as accelerate reads it
        ({"ACCELERATE_USE_FSDP": "true", "WORLD_SIZE": "2"}, True, []),  # a GPU: FSDP shards
        ({"ACCELERATE_USE_FSDP": "false", "WORLD_SIZE": "2"}, False, []),  # configs/cpu-ddp.yaml
        ({"ACCELERATE_USE_DEEPSPEED": "true", "WORLD_SIZE": "2"}, False, []),  # DeepSpeed ZeRO runs on the CPU
        ({}, False, []),  # one process, no launcher
    ],
)
def test_sharding_notes(environ, has_cuda, expected):
    assert hardware.sharding_notes(environ, has_cuda) == expected
