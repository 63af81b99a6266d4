"""Every accelerate config in configs/ is read by accelerate's own loader (unknown keys are errors there)."""

import pytest

from tests.test_recipe import ROOT

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


SLURM = [
    # (environment, node rank, expected processes): one accelerate launch per node, every GPU of each
    ({"SLURM_NNODES": "2", "GPUS_PER_NODE": "4"}, 0, "8"),
    ({"SLURM_NNODES": "2", "GPUS_PER_NODE": "4"}, 1, "8"),
    ({"SLURM_NNODES": "3", "SLURM_GPUS_ON_NODE": "8"}, 2, "24"),  # SLURM's own count of the node's GPUs
]


@pytest.mark.parametrize("env,rank,processes", SLURM)
def test_slurm_script_builds_each_nodes_launch(env, rank, processes):
    """scripts/slurm.sh in dry mode: the command of every node, which accelerate's own launch parser accepts."""
    import os
    import shlex
    import subprocess

    from accelerate.commands.launch import launch_command_parser

    run_env = {**os.environ, **env, "DRY_RUN": "1", "MASTER_ADDR": "node01"}
    if "SLURM_GPUS_ON_NODE" not in env:
        run_env.pop("SLURM_GPUS_ON_NODE", None)
    out = subprocess.run(
        ["bash", "scripts/slurm.sh", "recipes/digit.yaml", "training.max_steps=5", "data.system_prompt=Be brief."],
        cwd=ROOT,
        env=run_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out) == int(env["SLURM_NNODES"])
    argv = shlex.split(out[rank])
    assert argv[:2] == ["accelerate", "launch"]
    args = launch_command_parser().parse_args(argv[2:])
    assert (args.config_file, args.num_machines, args.num_processes) == (
        "configs/multi-node.yaml",
        int(env["SLURM_NNODES"]),
        int(processes),
    )
    assert (args.machine_rank, args.main_process_ip, args.main_process_port) == (rank, "node01", 29500)
    assert args.module and args.training_script == "grpo_ext.train"
    assert args.training_script_args == ["recipes/digit.yaml", "training.max_steps=5", "data.system_prompt=Be brief."]


def test_slurm_script_without_a_recipe_says_how():
    import subprocess

    proc = subprocess.run(["bash", "scripts/slurm.sh"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: sbatch --nodes=N scripts/slurm.sh RECIPE")
