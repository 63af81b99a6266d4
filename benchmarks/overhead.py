"""grpo_ext's overhead over plain TRL: the same GRPOConfig, model and data, alternated in one run.

    python benchmarks/overhead.py [--rounds 2] [--steps 6]

"same" is plain TRL given exactly the GRPOConfig grpo_ext builds from recipes/digit.yaml; "ours" is
grpo_ext running that recipe (its own eval off, no checkpoints, as in the plain run). Prints the ratios
grpo_ext / plain TRL of time to first step (from process launch) and of median step time.
"""

import argparse
import statistics

from _runner import launch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    first = {"same": [], "ours": []}
    steps = {"same": [], "ours": []}
    for i in range(args.rounds):
        for name in ("same", "ours") if i % 2 == 0 else ("ours", "same"):
            r = launch(name, args.steps)
            first[name].append(r["first_step_at"])
            steps[name].extend(r["step_seconds"][1:])  # the first step includes warm-up; it is in time to first step
            print(
                f"round {i + 1} {name:<5} first step at {r['first_step_at']:.2f} s, "
                f"median step {statistics.median(r['step_seconds'][1:]):.2f} s",
                flush=True,
            )
    f_same, f_ours = statistics.median(first["same"]), statistics.median(first["ours"])
    s_same, s_ours = statistics.median(steps["same"]), statistics.median(steps["ours"])
    print(f"time to first step: plain TRL {f_same:.2f} s, grpo_ext {f_ours:.2f} s, ratio {f_ours / f_same:.3f}")
    print(f"median step time:   plain TRL {s_same:.2f} s, grpo_ext {s_ours:.2f} s, ratio {s_ours / s_same:.3f}")


if __name__ == "__main__":
    main()
