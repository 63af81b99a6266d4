"""Coverage of the eval's 95% intervals on synthetic evals whose true rates are known.

    python benchmarks/intervals.py [--prompts 8] [--samples 8] [--trials 2000]

Each trial draws a rate per prompt from a Beta distribution with the given mean (prompts differ in
difficulty), samples pass/fail for each completion, and checks whether the interval covers the mean
rate. Compared: the interval grpo_ext reports (Wilson on the effective sample size, t on prompts - 1)
and a percentile bootstrap over prompts. Also the paired difference of two evals of an unchanged model on
the same prompts (truth: 0).
"""

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_ext.results import evalstats

CONCENTRATION = 4.0  # alpha + beta of the per-prompt Beta distribution: prompts differ a lot


def draw_rates(rng: random.Random, mean: float, prompts: int) -> list[float]:
    return [rng.betavariate(mean * CONCENTRATION, (1 - mean) * CONCENTRATION) for _ in range(prompts)]


def draw_eval(rng: random.Random, rates: list[float], samples: int) -> list[list[float]]:
    return [[float(rng.random() < r) for _ in range(samples)] for r in rates]


def bootstrap(values: list[float], rng: random.Random, rounds: int = 400) -> tuple[float, float]:
    means = sorted(sum(rng.choice(values) for _ in values) / len(values) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    weights = [args.samples] * args.prompts
    print(
        f"{args.prompts} prompts x {args.samples} samples, {args.trials}"
        f" trials a row; share of 95% intervals that cover the truth"
    )
    print(f"{'true rate':<12}{'grpo_ext':>10}{'bootstrap':>11}{'paired diff':>13}")
    for mean in (0.05, 0.2, 0.5, 0.8):
        ours = boot = pair = 0
        for _ in range(args.trials):
            truth = draw_rates(rng, mean, args.prompts)
            rates = [sum(s) / len(s) for s in draw_eval(rng, truth, args.samples)]
            e = evalstats.rate_interval(rates, weights)
            ours += e.low <= mean <= e.high
            low, high = bootstrap(rates, rng)
            boot += low <= mean <= high
            other = [sum(s) / len(s) for s in draw_eval(rng, truth, args.samples)]  # the same prompts, an unchanged model
            d = evalstats.paired(rates, other, weights)
            pair += d.low <= 0 <= d.high
        print(f"{mean:<12}{ours / args.trials:>10.3f}{boot / args.trials:>11.3f}{pair / args.trials:>13.3f}")


if __name__ == "__main__":
    main()
