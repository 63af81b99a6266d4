"""Row skipping on two processes (CPU DDP over gloo): step time with ``groups.skip_zero_advantage`` on and off,
side by side.

Each contestant is one ``accelerate launch --config_file configs/cpu-ddp.yaml -m grpo_ext.train`` of the digit
recipe on the tiny model (built here), with a reward that gives three prompts of four no spread: each step one
process holds the one group with spread and a flat one, the other two flat groups, so skipping deals the group
with spread out over both processes and leaves three quarters of each process's rows out. The rounds
alternate the order of the two. Prints, per run, the median seconds of the steps after the first (the
``train_seconds`` of ``metrics.jsonl``), the seconds each process spent a step in the loss's forward pass (the
trainer's ``compute_loss``, skipping's count gather included) and in its backward pass (``Accelerator.backward``,
DDP's all-reduce included), and the share skipped; then the median of each and the ratio on/off.

    python benchmarks/skip_processes.py --rounds 3 --steps 6 --completion-length 64
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _runner import accelerate  # benchmarks/_runner.py: accelerate launch with configs/cpu-ddp.yaml

ROOT = Path(__file__).resolve().parents[1]
REWARD = (
    "def quarter(completions, prompts, **kwargs):\n"
    "    return [1.0 if 'flat' in str(p) else float(i % 2) for i, p in enumerate(prompts)]\n"
)
PROMPTS = ["a flat prompt", "one more flat prompt", "the last flat prompt", "a lively prompt"]


def run(work: Path, model: Path, skip: bool, steps: int, length: int, name: str) -> dict:
    """One two-process training; its step seconds (after the first) and the share of rows skipped."""
    out = work / name
    overrides = [
        f"model.name={model}",
        f"output_dir={out}",
        f"training.max_steps={steps}",
        "training.per_device_train_batch_size=8",
        "training.num_generations=4",
        f"training.max_completion_length={length}",
        "training.save_strategy='no'",
        "eval.enabled=false",
        "health.preflight=off",
        f"groups.skip_zero_advantage={str(skip).lower()}",
        f"rewards=[{work / 'quarter.py'}:quarter]",
        f"data={json.dumps({'prompts': PROMPTS})}",
    ]
    cmd = [*accelerate(), __file__, "--worker", str(work)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([*cmd, "recipes/digit.yaml", *overrides], capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"error: the run {name} failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    seconds = [b["train_seconds"] - a["train_seconds"] for a, b in zip(records, records[1:], strict=False)]
    phases = [json.loads((work / f"phases-{rank}.json").read_text()) for rank in (0, 1)]
    return {
        "step_seconds": statistics.median(seconds),
        "skipped_rows": records[-1].get("skipped_rows", 0.0),
        "loss": [p["loss"] / steps for p in phases],
        "backward": [p["backward"] / steps for p in phases],
    }


def worker(work: Path, argv: list[str]) -> int:
    """One process of a launched run: grpo_ext's training with the loss's two passes timed, written per process."""
    import time

    from accelerate import Accelerator

    from grpo_ext import cli
    from grpo_ext.run import trl_internals

    tally = {"loss": 0.0, "backward": 0.0}

    def timed(owner, name: str, phase: str) -> None:
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                tally[phase] += time.perf_counter() - t0

        setattr(owner, name, wrapper)

    timed(trl_internals.trainer_class(), "compute_loss", "loss")
    timed(Accelerator, "backward", "backward")
    rc = cli.main(["train", *argv])
    (work / f"phases-{os.environ.get('RANK', '0')}.json").write_text(json.dumps(tally))
    return rc


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        sys.path.insert(0, str(ROOT))
        raise SystemExit(worker(Path(argv[1]), argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="runs of each contestant, alternating (default 3)")
    ap.add_argument("--steps", type=int, default=6, help="training steps a run (default 6; the first is not timed)")
    ap.add_argument("--completion-length", type=int, default=64, help="training.max_completion_length (default 64)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from grpo_ext.testing import tiny

    found: dict[str, list[float]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = tiny.build(work / "tiny")
        (work / "quarter.py").write_text(REWARD)
        for r in range(args.rounds):
            order = ("on", "off") if r % 2 == 0 else ("off", "on")
            for which in order:
                got = run(work, model, which == "on", args.steps, args.completion_length, f"{which}-{r}")
                for key in ("step_seconds", "loss", "backward"):
                    found[f"{which} {key}"].append(got[key] if key == "step_seconds" else sum(got[key]) / 2)
                loss = ", ".join(f"{x:.3f}" for x in got["loss"])
                backward = ", ".join(f"{x:.3f}" for x in got["backward"])
                print(
                    f"round {r + 1} skipping {which:3} median step {got['step_seconds']:.3f} s, a step's loss forward "
                    f"[{loss}] s and backward [{backward}] s on processes [0, 1], skipped_rows {got['skipped_rows']}"
                )
    for key, what in (("step_seconds", "step"), ("loss", "loss forward a step"), ("backward", "backward a step")):
        on, off = statistics.median(found[f"on {key}"]), statistics.median(found[f"off {key}"])
        print(f"median {what}: skipping on {on:.3f} s, off {off:.3f} s, ratio on/off {on / off:.2f}")


if __name__ == "__main__":
    main()
