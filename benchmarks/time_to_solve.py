"""Time to solve the digit task: the tutorial's script vs plain TRL vs grpo_ext's shipped recipe.

    python benchmarks/time_to_solve.py [--max-steps 60] [--check-every 2]

Wall time from launch until the pass rate of digit_exact on held-out prompts reaches 0.9 (checked
every K steps, 8 samples per prompt), for (a) the tutorial's script as written on the same model,
(b) a plain-TRL script with the partial-credit reward and chat prompts, (c) recipes/digit.yaml.
See benchmarks/contestants.py for exactly what each runs. Prints each time and the ratio (c)/(b).
"""

import argparse
import statistics

from _runner import launch

LABELS = {"seed": "(a) tutorial script", "plain": "(b) plain TRL", "ours": "(c) grpo_ext digit.yaml"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--check-every", type=int, default=2)
    p.add_argument("--only", default="seed,plain,ours", help="comma-separated subset of seed,plain,ours")
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
    b, c = results.get("plain"), results.get("ours")
    if b and c:
        if b["solved_at"] and c["solved_at"]:
            print(f"ratio (c)/(b) time to solve: {c['solved_at'] / b['solved_at']:.2f}")
        elif c["solved_at"]:
            # (b) had not solved it when it stopped, so its time to solve is more than its last check.
            print(
                f"ratio (c)/(b) time to solve: below {c['solved_at'] / b['checks'][-1][2]:.2f} "
                f"((b) not solved by {b['checks'][-1][2]:.0f} s)"
            )
        else:
            print("ratio (c)/(b): undefined, (c) did not reach 0.9")


if __name__ == "__main__":
    main()
