"""Two machines on one: two `accelerate launch` commands, one a node (--num_machines 2, --machine_rank 0 and 1, the
first node's address 127.0.0.1), one CPU process each over gloo, train a tiny recipe with row skipping on into one run
directory that the main node alone writes; both nodes end with the same weights, those the main node saved. Then
scripts/slurm.sh starts the same run under a faked SLURM allocation of two local nodes (`srun` and `scontrol` are
small stand-ins on PATH that do for two local nodes what SLURM's do) and saves the same weights."""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, resumable_doc
from tests.integration.test_row_skipping_processes import FLAT

ACCELERATE = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"

# configs/multi-node.yaml on the CPU: one process a node over gloo, full precision
CPU_NODES = {
    "compute_environment": "LOCAL_MACHINE",
    "distributed_type": "MULTI_GPU",
    "num_machines": 2,
    "num_processes": 2,
    "machine_rank": 0,
    "main_process_ip": "127.0.0.1",
    "main_process_port": 29500,
    "main_training_function": "main",
    "mixed_precision": "no",
    "use_cpu": True,
    "rdzv_backend": "static",
    "same_network": True,
    "debug": False,
}

# Each node trains through the Python API (and logs as the command line does) with a callback that writes the hash
# of the weights it holds at the end.
WORKER = """
import sys
from pathlib import Path

from transformers import TrainerCallback

import grpo_ext
from grpo_ext.core import console
from tests.slow.test_two_nodes import state_hash


class StateHash(TrainerCallback):
    def on_train_end(self, args, state, control, model=None, **kwargs):
        Path(sys.argv[2], f"rank{args.process_index}.sha256").write_text(state_hash(model))


console.show()  # the log lines the command line writes
grpo_ext.train(sys.argv[1], callbacks=[StateHash()])
"""

# SLURM's commands as two local nodes see them: `srun` runs its command once a node, in parallel, SLURM_NODEID and
# SLURM_PROCID set, and fails if a node fails; `scontrol show hostnames LIST` prints a comma-separated list's hosts
# one a line. Each writes its arguments to calls.log.
FAKE_SRUN = """#!/usr/bin/env bash
echo "srun $*" >> "$FAKE_SLURM_LOG"
while [[ "$1" == --* ]]; do shift; done
pids=()
for ((node = 0; node < SLURM_NNODES; node++)); do
    SLURM_NODEID=$node SLURM_PROCID=$node SLURM_LOCALID=0 "$@" \\
        > "$FAKE_SLURM_OUT/node$node.out" 2> "$FAKE_SLURM_OUT/node$node.err" &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
"""
FAKE_SCONTROL = """#!/usr/bin/env bash
echo "scontrol $*" >> "$FAKE_SLURM_LOG"
[[ "$1 $2" == "show hostnames" ]] || { echo "fake scontrol: only 'show hostnames' is known" >&2; exit 1; }
tr ',' '\\n' <<< "$3"
"""


def state_hash(model) -> str:
    """One hash of every tensor of a model's state dict, by name: equal hashes, equal weights to the bit."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def saved_hash(folder: Path) -> str:
    from transformers import AutoModelForCausalLM

    return state_hash(AutoModelForCausalLM.from_pretrained(folder))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(**extra: str) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def finish(procs: list[subprocess.Popen], timeout: int) -> list[tuple[int, str]]:
    """(exit status, stderr) of each process; all are killed, with their children, if one outlasts ``timeout``."""
    try:
        return [(p.wait(timeout=timeout), p.stderr.read() if p.stderr else "") for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        raise


def two_node_recipe(tiny_model: Path, tmp_path: Path, run: Path) -> Path:
    """2 steps of 4 groups of 4 on 2 processes, one group lively and three flat: row skipping deals the lively group's
    rows out, 2 to each process, and leaves out three quarters of the rows; the reward pre-flight of the 4 prompts; a
    greedy eval of 2 prompts before and after."""
    (tmp_path / "quarter.py").write_text(
        "def quarter(completions, prompts, **kwargs):\n"
        "    return [1.0 if 'flat' in str(p) else float(i % 2) for i, p in enumerate(prompts)]\n"
    )
    digit = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
    doc = resumable_doc(digit, tiny_model, run, max_steps=2, num_generations=4)
    doc["training"].update(save_strategy="no", per_device_train_batch_size=8, max_completion_length=4, learning_rate=1e-3)
    doc["data"] = {"prompts": [*FLAT, "a lively prompt"], "eval_prompts": ["an eval prompt", "another eval prompt"]}
    doc["rewards"] = ["./quarter.py:quarter"]
    doc["groups"] = {"skip_zero_advantage": True}
    doc["eval"] = {"enabled": True, "samples": 1, "temperature": 0.0}
    doc["health"] = {"preflight_prompts": 4}  # its 4 groups sampled by the 2 processes: 3 of 4 flat, which it warns of
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def check_one_run(run: Path, main_err: str, other_err: str) -> dict:
    """The run directory the main node wrote, once, and the logs: the main node reports, the other node does not."""
    assert "rows with zero advantage are left out" in main_err
    assert "pre-flight: 4 prompts sampled by 2 processes, each its share" in main_err
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]  # written once, by the main node
    assert [line["skipped_rows"] for line in lines] == [0.75, 0.75]
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["processes"], summary["steps"]) == ("completed", 2, 2)
    assert summary["eval_after"]["samples"] == 2 and not summary["final"]["unchanged"]
    assert (run / "report.md").is_file() and (run / "final" / "model.safetensors").is_file()
    assert main_err.count("eval after: pass rate") == 1 and "eval after: pass rate" not in other_err
    for err in (main_err, other_err):
        assert "terminate called" not in err  # each process closes its process group before exiting
    return summary


@pytest.fixture(scope="module")
def two_nodes(tiny_model, tmp_path_factory):
    """(run directory, each node's hash of its final weights, each node's stderr) of one launch per node."""
    tmp_path = tmp_path_factory.mktemp("two-nodes")
    run = tmp_path / "run"
    recipe = two_node_recipe(tiny_model, tmp_path, run)
    (tmp_path / "worker.py").write_text(WORKER)
    config = tmp_path / "cpu-nodes.yaml"
    config.write_text(yaml.safe_dump(CPU_NODES))
    port = free_port()
    nodes = [
        subprocess.Popen(
            [
                *("nice", "-n", "10", ACCELERATE, "launch", "--config_file", str(config), "--num_machines", "2"),
                *("--num_processes", "2", "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1"),
                *("--main_process_port", str(port), str(tmp_path / "worker.py"), str(recipe), str(tmp_path)),
            ],
            cwd=ROOT,
            env=environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for rank in (0, 1)
    ]
    done = finish(nodes, timeout=600)
    for code, err in done:
        assert code == 0, err[-3000:]
    hashes = [(tmp_path / f"rank{rank}.sha256").read_text() for rank in (0, 1)]
    return run, hashes, [err for _, err in done]


def test_two_nodes_train_into_one_run_directory_and_hold_the_same_weights(two_nodes, tiny_model):
    run, hashes, (main_err, other_err) = two_nodes
    check_one_run(run, main_err, other_err)
    assert hashes[0] == hashes[1]  # the second node holds what the first holds
    assert hashes[0] == saved_hash(run / "final")  # and what the main node saved
    assert hashes[0] != saved_hash(tiny_model)  # which is not the base model: the two steps trained


def test_slurm_script_launches_the_same_two_node_run(two_nodes, tiny_model, tmp_path):
    first_run, hashes, _ = two_nodes
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    config = tmp_path / "cpu-nodes.yaml"
    config.write_text(yaml.safe_dump(CPU_NODES))
    run = tmp_path / "run"
    recipe = two_node_recipe(tiny_model, tmp_path, run)
    log, out = tmp_path / "calls.log", tmp_path / "out"
    out.mkdir()
    env = environment(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        SLURM_JOB_ID="4242",
        SLURM_JOB_NODELIST="127.0.0.1,localhost",
        SLURM_NNODES="2",
        GPUS_PER_NODE="1",  # one process a node: the CPU's
        ACCELERATE_CONFIG=str(config),
        ACCELERATE=ACCELERATE,
        MASTER_PORT=str(free_port()),
        FAKE_SLURM_LOG=str(log),
        FAKE_SLURM_OUT=str(out),
    )
    for key in ("SLURM_NODEID", "SLURM_PROCID", "SLURM_GPUS_ON_NODE", "MASTER_ADDR"):
        env.pop(key, None)
    batch = subprocess.Popen(
        ["nice", "-n", "10", "bash", "scripts/slurm.sh", str(recipe)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    [(code, err)] = finish([batch], timeout=600)
    node_err = [(out / f"node{rank}.err").read_text() for rank in (0, 1)]
    assert code == 0, (err + "".join(node_err))[-3000:]
    calls = log.read_text().splitlines()
    assert calls[0] == f"srun --ntasks-per-node=1 bash scripts/slurm.sh --node {recipe}"
    assert calls[1:] == ["scontrol show hostnames 127.0.0.1,localhost"] * 2  # each node finds the first node's address
    summary = check_one_run(run, *node_err)
    assert summary["steps"] == 2
    assert saved_hash(run / "final") == hashes[0]  # the weights the two nodes launched by hand hold
