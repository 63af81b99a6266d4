"""Every accelerate config in configs/ is read by accelerate's own loader (unknown keys are errors there); scripts/slurm.sh
is run in tests/integration/test_configs_slurm.py."""

import pytest

from tests.helpers import ROOT

CONFIGS = [
    # (file, distributed type, processes, mixed precision)
    ("cpu-ddp.yaml", "MULTI_GPU", 2, "no"),  # MULTI_GPU + use_cpu: accelerate starts local processes with torchrun
    ("single-gpu.yaml", "NO", 1, "bf16"),
    ("multi-gpu.yaml", "MULTI_GPU", 8, "bf16"),
    ("deepspeed-zero2.yaml", "DEEPSPEED", 8, "bf16"),
    ("deepspeed-zero3.yaml", "DEEPSPEED", 8, "bf16"),
    ("fsdp.yaml", "FSDP", 8, "bf16"),
    ("multi-node.yaml", "MULTI_GPU", 16, "bf16"),  # placeholders: scripts/slurm.sh sets the nodes, rank and address
]


@pytest.mark.parametrize("name,kind,processes,precision", CONFIGS)
def test_config_parses(name, kind, processes, precision):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(ROOT / "configs" / name))
    assert str(config.distributed_type).rsplit(".", 1)[-1] == kind
    assert (config.num_processes, config.mixed_precision) == (processes, precision)
    assert config.use_cpu == (name == "cpu-ddp.yaml")


def test_every_config_is_listed():
    assert sorted(p.name for p in (ROOT / "configs").glob("*.yaml")) == sorted(c[0] for c in CONFIGS)


STAGES = [
    # (file, key, value)
    ("deepspeed-zero2.yaml", "zero_stage", 2),
    ("deepspeed-zero3.yaml", "zero_stage", 3),
]


@pytest.mark.parametrize("name,key,value", STAGES)
def test_deepspeed_stage(name, key, value):
    from accelerate.commands.config.config_args import load_config_from_file

    assert load_config_from_file(str(ROOT / "configs" / name)).deepspeed_config[key] == value


@pytest.mark.parametrize("path", sorted([*(ROOT / "configs").glob("*.yaml"), *(ROOT / "recipes").rglob("*.yaml")]))
def test_no_shipped_yaml_gives_a_key_twice(path):
    """accelerate and PyYAML keep the last of two equal keys without a word; the shipped files have none."""
    from grpo_ext.core.yaml_io import duplicate_keys

    assert duplicate_keys(path.read_text(encoding="utf-8")) == []


FSDP_ENVIRONMENT = {
    # what accelerate's launcher hands each process of configs/fsdp.yaml (torchrun passes its environment on)
    "ACCELERATE_USE_FSDP": "true",
    "FSDP_VERSION": "2",
    "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",  # a unit per decoder layer (the model's _no_split_modules)
    "FSDP_RESHARD_AFTER_FORWARD": "true",
    "FSDP_OFFLOAD_PARAMS": "false",
    "FSDP_CPU_RAM_EFFICIENT_LOADING": "true",
    "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT",  # whole weights in final/ and checkpoints
    "ACCELERATE_MIXED_PRECISION": "bf16",
}


def test_fsdp_config_reaches_the_processes_as_fsdp2(monkeypatch):
    """configs/fsdp.yaml through accelerate's launch: the environment each process gets, and the FSDP2 plugin accelerate
    builds from it there. Without a CUDA device accelerate runs those processes as DDP instead, which a run says
    (tests/integration/test_sharding_cpu.py launches it on the CPU)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env

    argv = ["--config_file", str(ROOT / "configs" / "fsdp.yaml"), "--main_process_port", "0", "train.py"]
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(argv))
    environment = prepare_multi_gpu_env(args)
    assert {key: environment.get(key) for key in FSDP_ENVIRONMENT} == FSDP_ENVIRONMENT
    for key, value in environment.items():
        if key.startswith("FSDP_"):
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert (plugin.fsdp_version, plugin.reshard_after_forward, plugin.cpu_ram_efficient_loading) == (2, True, True)
    assert plugin.auto_wrap_policy.__name__ == "transformer_auto_wrap_policy"
    assert str(plugin.state_dict_type).rsplit(".", 1)[-1] == "FULL_STATE_DICT"
