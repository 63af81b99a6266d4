"""Where a GRPO step's time goes: each phase for plain TRL and for grpo_ext, at identical learning settings.

    python benchmarks/step_anatomy.py [--rounds 2] [--steps 6] [--processes 1] [--candidate "LABEL: key=value ..."]
    nice -n 5 python benchmarks/step_anatomy.py --processes 2 --rounds 2 --steps 6
    python benchmarks/step_anatomy.py --recipe arith --recipe arith-tools [--candidate "LABEL: key=value ..."]

"same" is plain TRL given exactly the GRPOConfig grpo_ext builds from recipes/digit.yaml; "ours" is grpo_ext
running that recipe (see benchmarks/contestants.py, whose --anatomy timers split each step into generation,
reward scoring, forward passes without gradient, the loss's forward pass, the loss, backward, the optimizer
step and the rest). Contestants alternate, one process per run; the first step of each run is left out
(warm-up). Prints, per run, its mean and median step and the share of rows left out at each timed step; then,
per phase, the mean seconds per step of each contestant (a mean, so that work done every other step, such as
generation with ``generation_batch_size`` twice the batch, counts at its share), its share of the step, and the
ratio to plain TRL; then the mean and the median step time of each contestant and its ratio to
plain TRL, and the share of rows each left out of the loss (``skipped_rows``, mean of the timed steps; plain TRL
leaves none out). A candidate is grpo_ext with recipe overrides (an engine choice to try, e.g.
``training.generation_batch_size=32``).

With ``--recipe`` (twice or more) the contestants are grpo_ext on each named recipe instead (no pre-flight, no
eval), and a candidate's overrides apply to the last one: e.g. ``--recipe arith --recipe arith-tools`` splits a
step of the same 16 completions as single replies and as conversations with the calculator (generation then
counts every turn of the tool loop; running the tools themselves is in "other"). The ratios are to the first.

With ``--processes 2`` every run is ``accelerate launch --config_file configs/cpu-ddp.yaml --num_processes 2`` (DDP
over gloo, OMP_NUM_THREADS=1 a process): both contestants get the recipe's per-device batch on each process, so the
same global batch; a phase is the mean over the processes, a step the main process's.
"""

import argparse
import statistics

from _runner import launch
from seeds import candidate  # benchmarks/seeds.py: 'LABEL: key=value ...'

ORDER = ["generation", "rewards", "forward, no grad", "loss forward", "loss", "backward", "optimizer", "other"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--processes", type=int, default=1, help="processes a run (CPU DDP over gloo above 1)")
    p.add_argument("--candidate", type=candidate, action="append", default=[], help="'LABEL: key=value ...' for grpo_ext")
    p.add_argument("--recipe", action="append", default=[], help="grpo_ext on this recipe as a contestant (twice or more)")
    args = p.parse_args()
    if len(args.recipe) == 1:
        p.error("--recipe: name two recipes or more (the ratios are to the first)")
    contestants = [("plain TRL", "same", []), ("grpo_ext", "ours", [])]
    if args.recipe:
        contestants = [(name, "ours", [f"--recipe={name}", "health.preflight=off"]) for name in args.recipe]
    base = contestants[-1][2]  # a candidate is the last contestant with its overrides added
    contestants += [(label, "ours", [*base, *sets]) for label, sets in args.candidate]
    phases: dict[str, list[dict]] = {label: [] for label, _, _ in contestants}
    steps: dict[str, list[float]] = {label: [] for label, _, _ in contestants}
    skipped: dict[str, list[float]] = {label: [] for label, _, _ in contestants}
    for i in range(args.rounds):
        for label, name, sets in contestants if i % 2 == 0 else contestants[::-1]:
            extra = ["--anatomy", *[s if s.startswith("--") else f"--set={s}" for s in sets]]
            r = launch(name, args.steps, extra=extra, processes=args.processes)
            phases[label].extend(r["phases"][1:])
            steps[label].extend(r["step_seconds"][1:])
            shares = r.get("skipped_rows", [])[1:] or [0.0]
            skipped[label].extend(shares)
            timed = r["step_seconds"][1:]
            print(
                f"round {i + 1} {label:<12} mean step {statistics.fmean(timed):.3f} s, median {statistics.median(timed):.3f} s, "
                f"skipped rows {' '.join(f'{x:.0%}' for x in shares)}",
                flush=True,
            )

    def per_step(label: str, phase: str) -> float:
        return statistics.fmean(step.get(phase, 0.0) for step in phases[label])

    labels = [label for label, _, _ in contestants]
    print()
    print(f"{'phase':<18}" + "".join(f"{label:>24}" for label in labels) + "".join(f"{'ratio ' + lb:>22}" for lb in labels[1:]))
    for phase in ORDER:
        cells, base = [], per_step(labels[0], phase)
        for label in labels:
            total = statistics.fmean(steps[label])
            value = per_step(label, phase)
            cells.append(f"{value:>10.3f} s ({value / total:>5.1%})")
        ratios = [f"{per_step(lb, phase) / base:>22.2f}" if base > 0.0005 else f"{'-':>22}" for lb in labels[1:]]
        print(f"{phase:<18}" + "".join(f"{c:>24}" for c in cells) + "".join(ratios))
    base = statistics.fmean(steps[labels[0]])
    print(f"{'step (mean)':<18}" + "".join(f"{statistics.fmean(steps[lb]):>22.3f} s" for lb in labels), end="")
    print("".join(f"{statistics.fmean(steps[lb]) / base:>22.3f}" for lb in labels[1:]))
    base = statistics.median(steps[labels[0]])
    print(f"{'step (median)':<18}" + "".join(f"{statistics.median(steps[lb]):>22.3f} s" for lb in labels), end="")
    print("".join(f"{statistics.median(steps[lb]) / base:>22.3f}" for lb in labels[1:]))
    print(f"{'skipped rows':<18}" + "".join(f"{statistics.fmean(skipped[lb]):>24.1%}" for lb in labels))


if __name__ == "__main__":
    main()
