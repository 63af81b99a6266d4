"""A whole short run as a command, from two checkouts side by side: this tree against another (an earlier commit
checked out with ``git worktree add``), to see what a change did to everything a run costs besides its steps (the
imports, the model load, the evals, the run directory, the plots).

    python benchmarks/run_start.py --other /path/to/checkout [--rounds 6] [--steps 2]

Each run is ``python -m grpo_ext.train recipes/digit.yaml`` on the tiny local model (built once, ``python -m
grpo_ext.tiny``) with ``training.max_steps`` steps and an eval of 4 prompts, started in the tree's own folder so that
its own package is imported; the two trees alternate. Prints each run's wall time and peak memory (the process's
maximum resident size, from the operating system), then the medians and the ratio this tree / the other.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _runner import measured

HERE = Path(__file__).resolve().parent


def run(tree: Path, model: Path, out: Path, steps: int) -> tuple[float, float]:
    """One run's wall seconds and peak resident MiB."""
    command = [sys.executable, "-m", "grpo_ext.train", "recipes/digit.yaml", f"model.name={model}", f"output_dir={out}"]
    command += [f"training.max_steps={steps}", "eval.max_prompts=4", "--overwrite"]
    seconds, gib = measured(command, tree, str(tree))
    return seconds, gib * 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--other", type=Path, required=True, help="another checkout of grpo_ext")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=2)
    args = p.parse_args()
    trees = {"this tree": HERE.parent, "other tree": args.other.resolve()}
    if not (trees["other tree"] / "grpo_ext").is_dir():
        raise SystemExit(f"--other: {trees['other tree']} has no grpo_ext package")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model"
        subprocess.run([sys.executable, "-m", "grpo_ext.tiny", str(model)], cwd=HERE.parent, check=True, capture_output=True)
        found: dict[str, list[tuple[float, float]]] = {label: [] for label in trees}
        for i in range(args.rounds):
            for label in list(trees) if i % 2 == 0 else list(trees)[::-1]:
                found[label].append(run(trees[label], model, Path(tmp) / label.replace(" ", "-"), args.steps))
                seconds, mib = found[label][-1]
                print(f"round {i + 1} {label:<10} {seconds:.2f} s, peak {mib:.0f} MiB", flush=True)
    for k, name in enumerate(("wall", "peak memory")):
        ours, theirs = (statistics.median(x[k] for x in found[label]) for label in trees)
        unit = "s" if k == 0 else "MiB"
        print(f"median {name}: this tree {ours:.2f} {unit}, other tree {theirs:.2f} {unit}, ratio {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
