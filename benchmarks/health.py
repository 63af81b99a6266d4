"""Does the health watchdog name the seeds that fail, and stay quiet on the seeds that solve?

    python benchmarks/health.py [--recipe recipes/digit.yaml] [--seeds 0-15] [--out runs/health-digit]
                                [--metric digit_exact] [--solved 0.9] [--tally-only] [KEY=VALUE ...]

Trains the recipe once per seed (``grpo-ext train RECIPE seed=N output_dir=OUT/seed-N``, checkpoints off; a
seed whose run directory already holds a finished run is not trained again), then reads each run: solved
when the held-out ``eval after`` pass rate of ``--metric`` reaches ``--solved``; flagged when the watchdog
recorded a warning while it trained (``summary.json``, ``health.findings``). A miss is a seed that did not
solve and was not flagged; a false alarm is a seed that solved and was flagged. ``grpo-ext doctor`` is run
on each directory and must name the same warnings the run printed (the ``health:`` lines of its log).
It also prints the watchdog's own cost: the time its hook took inside each run (``summary.json``,
``health.watchdog_seconds``) against the run's training time, and its time per step replaying the metrics.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seeds import seed_list  # noqa: E402  (benchmarks/seeds.py, beside this file)

from grpo_ext.recipe import checked  # noqa: E402
from grpo_ext.results import watchdog  # noqa: E402
from grpo_ext.run import rundir  # noqa: E402


def train(recipe: str, seed: int, out: Path, overrides: list[str]) -> None:
    summary = out / "summary.json"
    if summary.is_file() and json.loads(summary.read_text(encoding="utf-8")).get("status") == "completed":
        return
    cmd = [sys.executable, "-m", "grpo_ext", "train", recipe, f"seed={seed}", f"output_dir={out}", "training.save_strategy='no'"]
    with open(out.with_suffix(".log"), "w", encoding="utf-8") as log:
        subprocess.run([*cmd, *overrides, "--overwrite"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)


def printed(run: Path) -> list[str]:
    """The warnings a run printed while it trained."""
    log = run.with_suffix(".log")
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    return [line.removeprefix("grpo_ext: ") for line in lines if line.startswith("grpo_ext: health: warning at step")]


def doctor(run: Path) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "grpo_ext", "doctor", str(run)], cwd=ROOT, capture_output=True, text=True)
    return proc.returncode, [line for line in proc.stdout.splitlines() if line.startswith("health: warning at step")]


def watchdog_cost(records: list[dict], limits: checked.Health) -> float:
    """Seconds per step the watchdog spends, replaying the run's records 20 times."""
    t0 = time.perf_counter()
    for _ in range(20):
        watchdog.replay(records, limits)
    return (time.perf_counter() - t0) / 20 / max(len(records), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/digit.yaml")
    parser.add_argument("--seeds", type=seed_list, default=seed_list("0-15"))
    parser.add_argument("--out", default="runs/health-digit")
    parser.add_argument("--metric", default="digit_exact")
    parser.add_argument("--solved", type=float, default=0.9)
    parser.add_argument("--tally-only", action="store_true", help="read the run directories already in --out; train nothing")
    parser.add_argument("overrides", nargs="*", help="key=value overrides for every run")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    rows = []
    for seed in args.seeds:
        run = out / f"seed-{seed}"
        if not args.tally_only:
            train(args.recipe, seed, run, args.overrides)
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8")) if (run / "summary.json").is_file() else {}
        if summary.get("status") != "completed":
            print(f"seed {seed:<3} no finished run in {run}", flush=True)
            continue
        rate = summary["eval_after"]["rewards"][args.metric]["pass_rate"]
        findings = [f for f in summary["health"]["findings"] if f["severity"] == "warning"]
        code, named = doctor(run)
        said = printed(run)
        records = rundir.read_metrics(run / "metrics.jsonl")
        step_s = statistics.median(r["step_time"] for r in records if isinstance(r.get("step_time"), float))
        limits = checked.build("health", yaml.safe_load((run / "recipe.yaml").read_text(encoding="utf-8"))["health"])
        row = {
            "seed": seed,
            "rate": rate,
            "solved": rate >= args.solved,
            "flagged": bool(findings),
            "rules": [f"{f['rule']}@{f['step']}" for f in findings],
            "doctor_agrees": named == said and code == (1 if findings else 0),
            "step_s": step_s,
            "watchdog_s": watchdog_cost(records, limits),
            "live_s": summary["health"].get("watchdog_seconds"),
            # the metrics keep milliseconds; the summary's tenths read 0.0 for a run of a few fast steps
            "train_s": next((r["train_seconds"] for r in reversed(records) if r.get("train_seconds")), None),
        }
        rows.append(row)
        verdict = {(True, False): "ok", (False, True): "ok", (True, True): "FALSE ALARM", (False, False): "MISS"}[
            (row["solved"], row["flagged"])
        ]
        agrees = "agrees" if row["doctor_agrees"] else "DIFFERS"
        print(
            f"seed {seed:<3} pass rate {rate:<6} {'solved' if row['solved'] else 'failed':<7} "
            f"warnings {', '.join(row['rules']) or '-':<40} {verdict:<12} doctor {agrees}",
            flush=True,
        )
    if not rows:
        return
    alarms = sum(r["solved"] and r["flagged"] for r in rows)
    misses = sum(not r["solved"] and not r["flagged"] for r in rows)
    seeds = ",".join(str(r["seed"]) for r in rows)
    print(f"seeds {seeds}: {sum(r['solved'] for r in rows)}/{len(rows)} solved; false alarms {alarms}, misses {misses}")
    print(f"doctor agrees with the run on {sum(r['doctor_agrees'] for r in rows)}/{len(rows)}")
    cost = statistics.median(r["watchdog_s"] for r in rows)
    step = statistics.median(r["step_s"] for r in rows)
    print(
        f"watchdog replayed: {cost * 1e6:.0f} us per step, step {step:.2f} s (median): "
        f"ratio with/without {(step + cost) / step:.5f}"
    )
    live = [r for r in rows if r["live_s"] is not None and r["train_s"]]
    if live:
        spent, trained = sum(r["live_s"] for r in live), sum(r["train_s"] for r in live)
        print(
            f"watchdog live: {spent * 1e3:.1f} ms inside {trained:.0f} s of training over {len(live)} runs: "
            f"ratio with/without {trained / (trained - spent):.5f}"
        )


if __name__ == "__main__":
    main()
