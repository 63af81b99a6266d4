"""grpo_ext's step on the digit recipe from two checkouts side by side: this tree against another (an earlier
commit checked out with ``git worktree add``), to see what a change did to a step.

    python benchmarks/two_trees.py --other /path/to/checkout [--processes 2] [--steps 16] [--rounds 2]

Each run is ``benchmarks/contestants.py ours --anatomy`` of its own tree (``benchmarks/_runner.py``: on several
processes through ``accelerate launch`` with configs/cpu-ddp.yaml), the two trees alternating. Prints, per run, the
mean step (the first left out), the loss's forward and backward a step, and the share of rows left out at each timed
step; then the mean of each over the rounds and the ratio this tree / the other.
"""

import argparse
import importlib.util
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def runner(tree: Path):
    """The ``_runner`` module of a checkout's benchmarks: its ``launch`` runs that checkout's code."""
    spec = importlib.util.spec_from_file_location(f"_runner_{abs(hash(str(tree)))}", tree / "benchmarks" / "_runner.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"--other: {tree} has no benchmarks/_runner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--other", type=Path, required=True, help="another checkout of grpo_ext")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    trees = {"this tree": runner(HERE.parent), "other tree": runner(args.other.resolve())}
    found: dict[str, list[tuple[float, float]]] = {label: [] for label in trees}
    for i in range(args.rounds):
        for label in list(trees) if i % 2 == 0 else list(trees)[::-1]:
            r = trees[label].launch("ours", args.steps, extra=["--anatomy"], processes=args.processes)
            timed = r["step_seconds"][1:]
            loss = [phase.get("loss forward", 0.0) + phase.get("backward", 0.0) for phase in r["phases"][1:]]
            found[label].append((statistics.fmean(timed), statistics.fmean(loss)))
            shares = " ".join(f"{x:.0%}" for x in r.get("skipped_rows", [])[1:])
            print(
                f"round {i + 1} {label:<10} mean step {found[label][-1][0]:.3f} s, "
                f"loss forward and backward {found[label][-1][1]:.3f} s a step, skipped rows {shares}",
                flush=True,
            )
    for k, name in enumerate(("step", "loss forward and backward")):
        ours, theirs = (statistics.fmean(x[k] for x in found[label]) for label in trees)
        print(f"mean {name}: this tree {ours:.3f} s, other tree {theirs:.3f} s, ratio {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
