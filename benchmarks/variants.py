"""GRPO variants side by side: each `algorithm:` preset trained on the same tasks, seeds and machine.

    python benchmarks/variants.py [--tasks digit,arith] [--variants shipped,grpo,dr_grpo,...]
                                  [--seeds digit=0-2 --seeds arith=0-1] [--log runs.jsonl]
    python benchmarks/variants.py --table-from runs.jsonl      # the table of runs already recorded

For each task (a shipped recipe) the script writes one recipe per variant: the shipped recipe with every
training key that some preset sets removed (``algorithms.PRESET_KEYS``) and ``algorithm: NAME`` added, so the
preset alone decides them; ``shipped`` is the recipe as it ships. Each run is ``grpo-ext train`` in its own
process with checkpoints off; variants alternate their order from seed to seed so a slow patch of the machine
hits all of them alike. Each finished run is appended to ``--log`` (JSON lines) as it ends, so an interrupted
benchmark keeps what it measured; started again with the same log, it skips the runs already there.

Per task and variant the table shows: seeds whose held-out pass rate of the task's metric reached 0.9, the
mean held-out pass rate after training, the median wall time per run (process start to exit), the entropy
and KL of the last training step (KL only where beta > 0), and the mean completion length in the eval after
training. The last line is the wall time of the whole benchmark (or of the recorded runs).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ext.settings import variants  # noqa: E402

TASKS = {"digit": ("recipes/digit.yaml", "digit_exact"), "arith": ("recipes/arith.yaml", "math_accuracy")}
SOLVED = 0.9


def seed_list(text: str) -> list[int]:
    seeds = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds.extend(range(int(first), int(last or first) + 1))
    return seeds


def task_seeds(text: str) -> tuple[str, list[int]]:
    task, sep, seeds = text.partition("=")
    if not sep or task not in TASKS:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: write it as TASK=0-2 with TASK one of {', '.join(TASKS)}")
    return task, seed_list(seeds)


def variant_recipe(task: str, variant: str, folder: Path) -> Path:
    """The task's shipped recipe for ``variant``: as shipped, or with the preset deciding every key it sets."""
    doc = yaml.safe_load((ROOT / TASKS[task][0]).read_text(encoding="utf-8"))
    if variant != "shipped":
        doc["training"] = {k: v for k, v in doc["training"].items() if k not in variants.PRESET_KEYS}
        doc["algorithm"] = variant
    path = folder / f"{task}-{variant}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def last_metrics(run_dir: Path) -> dict:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    steps = [r for r in lines if "entropy" in r or "kl" in r]
    return steps[-1] if steps else {}


def run_once(task: str, variant: str, seed: int, work: Path) -> dict:
    recipe = variant_recipe(task, variant, work)
    out = work / f"{task}-{variant}-{seed}"
    cmd = [sys.executable, "-m", "grpo_ext", "train", str(recipe), f"seed={seed}", f"output_dir={out}"]
    cmd.append("training.save_strategy='no'")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    record = {"task": task, "variant": variant, "seed": seed, "wall": round(wall, 1)}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160]
        killed = " (killed: out of memory?)" if proc.returncode == -9 else ""
        record["error"] = f"exit {proc.returncode}{killed}; last line: {last}"
        return record
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    after = summary["eval_after"]
    last = last_metrics(out)
    beta = yaml.safe_load((out / "recipe.yaml").read_text(encoding="utf-8"))["training"].get("beta", 0.0)
    record.update(
        pass_rate=after["rewards"][TASKS[task][1]]["pass_rate"],
        mean_length=after.get("mean_length"),
        entropy=last.get("entropy"),
        kl=last.get("kl") if beta else None,
        beta=beta,
        steps=summary["steps"],
    )
    return record


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(records: list[dict]) -> list[str]:
    lines = []
    for task in dict.fromkeys(r["task"] for r in records):
        rows = [r for r in records if r["task"] == task]
        lines.append(f"{task} ({TASKS[task][1]} held-out pass rate; solved: >= {SOLVED})")
        lines.append(
            f"  {'variant':<10} {'solved':>7} {'pass rate':>10} {'median wall':>12} {'entropy':>8} {'length':>7} {'KL':>8}  seeds"
        )
        for variant in dict.fromkeys(r["variant"] for r in rows):
            runs = [r for r in rows if r["variant"] == variant]
            ok = [r for r in runs if "error" not in r]
            errors = [r["error"] for r in runs if "error" in r]
            failed = f"  ({len(errors)} failed: {errors[0]})" if errors else ""
            if not ok:
                lines.append(f"  {variant:<10} {'-':>7}{failed}")
                continue

            def mean(key, runs=ok):
                values = [r[key] for r in runs if r.get(key) is not None]
                return statistics.fmean(values) if values else None

            solved = sum(r["pass_rate"] >= SOLVED for r in ok)
            lines.append(
                f"  {variant:<10} {f'{solved}/{len(ok)}':>7} {mean('pass_rate'):>10.3f} "
                f"{statistics.median(r['wall'] for r in ok):>10.0f} s {fmt(mean('entropy'), '.3f'):>8} "
                f"{fmt(mean('mean_length'), '.1f'):>7} {fmt(mean('kl'), '.4f'):>8}  "
                f"{','.join(str(r['seed']) for r in ok)}{failed}"
            )
    lines.append(f"runs: {len(records)}, their wall time in all: {sum(r['wall'] for r in records) / 60:.1f} min")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="digit,arith", help="comma-separated: digit, arith")
    parser.add_argument("--variants", default=",".join(["shipped", *variants.VARIANTS]), help="comma-separated")
    parser.add_argument("--seeds", type=task_seeds, action="append", default=[], help="TASK=0-2 (default digit=0-2, arith=0-1)")
    parser.add_argument("--log", type=Path, default=ROOT / "runs" / "variants.jsonl", help="each run appended here")
    parser.add_argument("--table-from", type=Path, help="print the table of the runs recorded in this log and exit")
    args = parser.parse_args()
    if args.table_from:
        print("\n".join(table([json.loads(line) for line in args.table_from.read_text().splitlines() if line.strip()])))
        return
    seeds = {"digit": seed_list("0-2"), "arith": seed_list("0-1"), **dict(args.seeds)}
    chosen = args.variants.split(",")
    unknown = [v for v in chosen if v != "shipped" and v not in variants.VARIANTS]
    if unknown:
        sys.exit(f"error: --variants: unknown {', '.join(unknown)}; choose from shipped, {', '.join(variants.VARIANTS)}")
    args.log.parent.mkdir(parents=True, exist_ok=True)
    done = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()] if args.log.exists() else []
    done = [r for r in done if "error" not in r]
    records, started = list(done), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grpo-ext-variants-") as tmp:
        for task in args.tasks.split(","):
            for i, seed in enumerate(seeds[task]):
                for variant in chosen if i % 2 == 0 else chosen[::-1]:
                    if any((r["task"], r["variant"], r["seed"]) == (task, variant, seed) for r in done):
                        continue
                    r = run_once(task, variant, seed, Path(tmp))
                    records.append(r)
                    with args.log.open("a", encoding="utf-8") as log:
                        log.write(json.dumps(r) + "\n")
                    print(json.dumps(r), flush=True)
    print("\n".join(table(records)))
    print(f"benchmark wall time: {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
