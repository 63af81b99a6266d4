"""scripts/slurm.sh as a command: each node's accelerate launch, and its usage line."""

import pytest

from tests.helpers import ROOT

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
