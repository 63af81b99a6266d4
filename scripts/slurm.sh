#!/usr/bin/env bash
# Train a recipe on several nodes under SLURM: one `accelerate launch` per node, all GPUs of each node.
#
#   sbatch --nodes=2 --gpus-per-node=8 scripts/slurm.sh recipes/gsm8k.yaml training.max_steps=500
#
# Run it from the repository root (sbatch keeps the working directory). Settings from the environment:
#   GPUS_PER_NODE   GPUs per node (default: SLURM_GPUS_ON_NODE, else what nvidia-smi lists)
#   ACCELERATE_CONFIG  accelerate config (default configs/multi-node.yaml; configs/deepspeed-zero3.yaml and
#                   configs/fsdp.yaml work too, the node count and ranks come from here)
#   MASTER_PORT     the first node's rendezvous port (default 29500)
#   ACCELERATE      the accelerate command (default: accelerate on PATH, e.g. .venv/bin/accelerate)
#   DRY_RUN=1       print the command each node would run, run nothing
#
# The first node of the allocation is the main process; its address comes from `scontrol show hostnames`
# (MASTER_ADDR overrides it). Every node writes the same output_dir, which must be on a shared filesystem.
#SBATCH --job-name=grpo_ext
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
set -euo pipefail

if [[ "${1:-}" != "--node" ]]; then  # the batch step: start this script once per node
    [[ $# -ge 1 ]] || { echo "usage: sbatch --nodes=N scripts/slurm.sh RECIPE [section.key=value ...]" >&2; exit 2; }
    if [[ "${DRY_RUN:-0}" == "1" ]]; then
        for rank in $(seq 0 $(( ${SLURM_NNODES:-1} - 1 ))); do SLURM_NODEID=$rank bash "$0" --node "$@"; done
        exit 0
    fi
    exec srun --ntasks-per-node=1 bash "$0" --node "$@"
fi
shift  # --node: build and run this node's command

nodes=${SLURM_NNODES:?SLURM_NNODES is not set: submit with sbatch --nodes=N, or set it}
rank=${SLURM_NODEID:?SLURM_NODEID is not set: run under srun, or set it}
gpus=${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-$(nvidia-smi -L 2>/dev/null | wc -l)}}
[[ "$gpus" -ge 1 ]] || { echo "error: no GPUs found on $(hostname); set GPUS_PER_NODE" >&2; exit 2; }
master=${MASTER_ADDR:-$(scontrol show hostnames "${SLURM_JOB_NODELIST:?SLURM_JOB_NODELIST is not set}" | head -n 1)}

cmd=("${ACCELERATE:-accelerate}" launch
    --config_file "${ACCELERATE_CONFIG:-configs/multi-node.yaml}"
    --num_machines "$nodes" --num_processes "$(( nodes * gpus ))"
    --machine_rank "$rank" --main_process_ip "$master" --main_process_port "${MASTER_PORT:-29500}"
    -m grpo_ext.train "$@")
if [[ "${DRY_RUN:-0}" == "1" ]]; then
    printf '%q ' "${cmd[@]}"; echo
else
    exec "${cmd[@]}"
fi
