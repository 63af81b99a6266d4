"""Time to solve the digit task: the tutorial's script vs plain TRL vs grpo_ext's shipped recipe.

    python benchmarks/time_to_solve.py [--max-steps 60] [--check-every 2] [--only seed,plain,same,ours]

Wall time from launch until the pass rate of digit_exact on held-out prompts reaches 0.9 (checked
every K steps, 8 samples per prompt), for (a) the tutorial's script as written on the same model,
(b) a plain-TRL script with the partial-credit reward, chat prompts and TRL's defaults, (c)
recipes/digit.yaml, and (d) plain TRL given exactly the GRPOConfig that grpo_ext builds from that recipe.
See benchmarks/contestants.py for exactly what each runs. Prints each time and the ratios: (c)/(b) is the
whole gain; (d)/(b) is what the recipe's settings buy; (c)/(d) is what grpo_ext adds to the same settings.
"""

import argparse
import statistics

from _runner import launch

LABELS = {
    "seed": "(a) tutorial script",
    "plain": "(b) plain TRL",
    "ours": "(c) grpo_ext digit.yaml",
    "same": "(d) plain TRL, same config",
}


def ratio(top: dict | None, bottom: dict | None, name: str) -> None:
    """Print the ratio of two contestants' times to solve, or what can be said when one did not solve."""
    if not top or not bottom:
        return
    if top["solved_at"] and bottom["solved_at"]:
        print(f"ratio {name} time to solve: {top['solved_at'] / bottom['solved_at']:.2f}")
    elif top["solved_at"] and bottom["checks"]:
        last = bottom["checks"][-1][2]  # the bottom one had not solved when it stopped: its time is more than this
        print(f"ratio {name} time to solve: below {top['solved_at'] / last:.2f} (not solved by {last:.0f} s)")
    else:
        print(f"ratio {name}: undefined, the first did not reach 0.9")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--check-every", type=int, default=2)
    p.add_argument("--only", default="seed,plain,same,ours", help="comma-separated subset of seed,plain,same,ours")
    args = p.parse_args()
    results = {}
    for name in args.only.split(","):
        r = results[name] = launch(name, args.max_steps, args.check_every)
        solved = f"{r['solved_at']:.0f} s (step {r['solved_step']})" if r["solved_at"] else f"not reached in {r['steps']} steps"
        step = statistics.median(r["step_seconds"]) if r["step_seconds"] else float("nan")
        last = r["checks"][-1][1] if r["checks"] else None
        print(
            f"{LABELS[name]:<26} solved: {solved:<24} median step {step:.2f} s  last pass rate {last}  wall {r['wall']:.0f} s",
            flush=True,
        )
    b, c, d = results.get("plain"), results.get("ours"), results.get("same")
    ratio(c, b, "(c)/(b)")
    ratio(d, b, "(d)/(b)")
    ratio(c, d, "(c)/(d)")


if __name__ == "__main__":
    main()
