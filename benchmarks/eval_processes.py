"""The held-out eval of one recipe trained on one process and on two, side by side: its numbers before and after
training, and the seconds each eval took.

    python benchmarks/eval_processes.py [--recipe recipes/digit.yaml] [--rounds 1] [--steps 16]

One process is ``python -m grpo_ext.train RECIPE``; two are ``accelerate launch --config_file configs/cpu-ddp.yaml
-m grpo_ext.train RECIPE`` (DDP over gloo, one thread a process) with ``per_device_train_batch_size`` halved, so
both train on the same global batch. The contestants alternate. Prints, per reward, the eval's mean and pass rate
before and after on each, whether every prompt's scores before training are the same on both (they are sampled
with the same per-batch seeds, so they should be), and the eval's seconds (two over one).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _runner import accelerate  # benchmarks/_runner.py: accelerate launch with configs/cpu-ddp.yaml

ROOT = Path(__file__).resolve().parent.parent


def train(recipe: Path, out: Path, processes: int, steps: int, batch: int) -> dict:
    """summary.json of one run of ``recipe`` into ``out`` on ``processes`` processes (same global batch)."""
    overrides = [f"output_dir={out}", f"training.max_steps={steps}", "training.save_strategy=no"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if processes == 1:
        cmd = [sys.executable, "-m", "grpo_ext.train", str(recipe), *overrides]
    else:
        per_process = f"training.per_device_train_batch_size={batch // processes}"
        cmd = [*accelerate(processes), "-m", "grpo_ext.train", str(recipe), *overrides, per_process]
        env["OMP_NUM_THREADS"] = "1"
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: the run on {processes} process(es) failed (exit {proc.returncode}): {tail}")
    summary = json.loads((out / "summary.json").read_text())
    summary["wall"] = round(time.time() - started, 1)
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", type=Path, default=ROOT / "recipes" / "digit.yaml")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--steps", type=int, default=16)
    args = p.parse_args()
    training = yaml.safe_load(args.recipe.read_text())["training"]
    batch = training["per_device_train_batch_size"] * training.get("gradient_accumulation_steps", 1)
    if batch % 2:
        raise SystemExit(f"--recipe: a batch of {batch} completions cannot be split evenly over 2 processes")
    found: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for processes in (1, 2) if i % 2 == 0 else (2, 1):
                out = Path(tmp) / f"run-{processes}-{i}"
                summary = train(args.recipe, out, processes, args.steps, batch)
                found[processes].append(summary)
                print(f"round {i + 1}, {processes} process(es): {summary['wall']} s", flush=True)
    one, two = found[1][0], found[2][0]
    for when in ("eval_before", "eval_after"):
        print(f"\n{when.replace('_', ' ')}:")
        print(f"  {'reward':<16} {'1 process':>22} {'2 processes':>22}   same per prompt")
        for name, a in one[when]["rewards"].items():
            b = two[when]["rewards"][name]
            cell = lambda r: f"mean {r['mean']:.4f} pass {r['pass_rate']:.4f}"  # noqa: E731
            same = "yes" if a["per_prompt"] == b["per_prompt"] else "no"
            print(f"  {name:<16} {cell(a):>22} {cell(b):>22}   {same}")
        secs = [[s[when]["seconds"] for s in found[n]] for n in (1, 2)]
        ratio = (sum(secs[1]) / len(secs[1])) / (sum(secs[0]) / len(secs[0]))
        print(f"  seconds: 1 process {secs[0]}, 2 processes {secs[1]}; two over one {ratio:.2f}")


if __name__ == "__main__":
    main()
