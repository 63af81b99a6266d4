"""How often a recipe solves its task across seeds: the shipped settings against candidate changes.

    python benchmarks/seeds.py [--recipe recipes/digit.yaml] [--seeds 0-7]
                               [--candidate "LABEL: KEY=VALUE KEY=VALUE" ...] [--metric digit_exact]
                               [--baseline "LABEL: KEY=VALUE ..."] [--keep DIR] [--log runs.jsonl]
    python benchmarks/seeds.py --table-from runs.jsonl [--baseline "LABEL: ..."]   # the runs already recorded

Each contestant trains the recipe once per seed (``grpo-ext train RECIPE seed=N ...`` in its
own process, checkpoints off) and is judged by the run's own held-out ``eval after``: a seed counts as
solved when the pass rate of ``--metric`` reaches ``--solved`` (0.9). The shipped recipe runs first as
``shipped``, the contestant the others are compared with, unless ``--baseline "LABEL: KEY=VALUE ..."`` gives that
place to the recipe with overrides of its own (variants compared with one another rather than with the recipe as
shipped); the candidates add their overrides to the recipe, or name a recipe of their own with ``recipe=PATH``
among them (``--candidate "tools: recipe=recipes/arith-tools.yaml"``), and ``NAME=VALUE`` in capitals sets a variable of
the run's process (``--candidate "per-token: GRPO_EXT_CAST_ONCE=0"``). Seeds alternate between contestants so
that a slow patch of the machine hits all of them alike. The last lines compare each candidate with the
baseline: seeds solved, mean pass rate after, median wall time per run, and the median training seconds until
a training batch first scored ``--metric`` at 0.9 on average (seeds where both did). Recipe paths are read from the
current folder. Each run writes its output to ``seed-N.log`` as it trains (named on stderr when it starts, to follow
with ``tail -f``); with ``--keep DIR`` each run stays in ``DIR/LABEL/seed-N`` with that log beside it, the layout
``benchmarks/health.py --tally-only`` reads.
Each share of seeds solved and each mean pass rate has its 95% interval over seeds (``grpo_ext.results.evalstats``: the
seed is the unit), and each candidate's per-seed pass rates are compared with the baseline's on the same
seeds (paired), and with the run's own ``eval before`` (how far training moved the pass rate). With ``--log FILE``
each finished run is appended to FILE as it ends, and a benchmark started again with the same log (after a crash,
or with more seeds) does not run again what is already there, as long as the recipe it ran has the same settings
(a hash of its parsed YAML is logged with the run, so an edited comment keeps the runs); the comparison covers the
seeds that every
contestant has run. A run's trained model is deleted once it has been scored (0.5 GB each for the digit recipe).
"""

import argparse
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # as when it runs as a script, also where a test loads it from its file

from _runner import environment  # noqa: E402  benchmarks/_runner.py

from grpo_ext.results import evalstats  # noqa: E402


def seed_list(text: str) -> list[int]:
    seeds = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds.extend(range(int(first), int(last or first) + 1))
    return seeds


def candidate(text: str) -> tuple[str, list[str]]:
    label, sep, overrides = text.partition(":")
    if not sep or not label.strip() or not overrides.strip():
        raise argparse.ArgumentTypeError(f"--candidate {text!r}: write it as 'LABEL: key=value [key=value ...]'")
    return label.strip(), shlex.split(overrides)


def recipe_of(recipe: str, overrides: list[str]) -> tuple[str, list[str]]:
    """The recipe a contestant runs (``recipe=PATH`` among its overrides names one of its own) and its other overrides."""
    own = [o for o in overrides if o.startswith("recipe=")]
    return (own[-1].removeprefix("recipe=") if own else recipe), [o for o in overrides if not o.startswith("recipe=")]


def digest(recipe: str) -> str:
    """The recipe's settings, hashed: a logged run is reused only while the recipe it ran says the same. Its parsed
    YAML, not its text, so that a header brought up to date with the runs does not make them stale."""
    settings = yaml.safe_load(Path(recipe).read_text(encoding="utf-8"))
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_once(recipe: str, seed: int, overrides: list[str], metric: str, out: Path) -> dict:
    recipe, overrides = recipe_of(recipe, overrides)
    overrides, variables = environment(overrides)  # NAME=VALUE in capitals: a variable of the run's process
    cmd = [
        sys.executable,
        "-m",
        "grpo_ext",
        "train",
        str(Path(recipe).resolve()),  # as typed, from the current folder; the run itself starts in the project's
        f"seed={seed}",
        f"output_dir={out}",
        "training.save_strategy='no'",
        *overrides,
        "--overwrite",
    ]
    log = out.with_suffix(".log")
    # the run writes its log as it goes, so that a run of an hour can be followed (tail -f) while it trains
    print(f"seeds: training seed {seed} ({' '.join([recipe, *overrides])}); its output: {log}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, check=False, env={**os.environ, **variables})
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8")[-2000:]
        sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode} (its output: {log}):\n{tail}")
    shutil.rmtree(out / "final", ignore_errors=True)  # the trained model is not needed to judge the run: 0.5 GB each
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    scored = summary["eval_after"]["rewards"]
    if metric not in scored:  # the eval's names: a taskset's rewards are added by validation, so known only here
        raise SystemExit(f"error: --metric {metric}: the eval scored {', '.join(scored)}; pass one of them as --metric")
    after = scored[metric]
    before = ((summary.get("eval_before") or {}).get("rewards") or {}).get(metric) or {}
    ci = after.get("pass_rate_ci") or {}
    shown = f"{after['pass_rate']} [{ci['low']:.2f}, {ci['high']:.2f}]" if ci.get("low") is not None else str(after["pass_rate"])
    return {
        "seed": seed,
        "pass_rate": after["pass_rate"],
        "before": before.get("pass_rate"),  # the same held-out prompts and seeds before training
        "shown": shown,
        "wall": wall,
        "steps": summary["steps"],
        "to_solve": seconds_to_solve(out / "metrics.jsonl", metric, SOLVED_BATCH),
    }


SOLVED_BATCH = 0.9  # a training batch whose mean of the metric reaches this counts as the step the task was solved


def seconds_to_solve(metrics: Path, metric: str, solved: float) -> float | None:
    """Seconds of training until the first step whose training batch scores ``metric`` at ``solved`` or more on
    average (``train_seconds`` of that step in metrics.jsonl), or None when no step did."""
    for line in metrics.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        mean = record.get(f"rewards/{metric}/mean")
        if isinstance(mean, (int, float)) and mean >= solved and "train_seconds" in record:
            return record["train_seconds"]
    return None


def report(results: dict[str, list[dict]], overrides: dict[str, list[str]], solved_at: float, base: str = "shipped") -> list[str]:
    """The comparison of each contestant with the baseline ``base`` on the seeds every contestant ran."""
    seeds = sorted(set.intersection(*({r["seed"] for r in rows} for rows in results.values())))
    results = {label: sorted((r for r in rows if r["seed"] in seeds), key=lambda r: r["seed"]) for label, rows in results.items()}
    n, lines = len(seeds), []

    def stats(rows: list[dict]) -> tuple[int, float, float]:
        return (
            sum(r["pass_rate"] >= solved_at for r in rows),
            statistics.fmean(r["pass_rate"] for r in rows),
            statistics.median(r["wall"] for r in rows),
        )

    def interval(e: evalstats.Estimate) -> str:
        return "" if e.low is None else f" [{e.low:.2f}, {e.high:.2f}]"

    baseline = stats(results[base])
    for label, rows in results.items():
        solved, mean, wall = stats(rows)
        rates = [r["pass_rate"] for r in rows]
        share = evalstats.rate_interval([float(x >= solved_at) for x in rates], [1] * n)
        spread = evalstats.mean_interval(rates, [1] * n)
        lines.append(
            f"{label:<16} solved {solved}/{n} seeds{interval(share)}, mean pass rate {mean:.3f}{interval(spread)}, "
            f"median wall {wall:.0f} s" + (f"  [{' '.join(overrides[label])}]" if overrides[label] else "")
        )
    candidates = [label for label in results if label != base]
    based = [r["pass_rate"] for r in results[base]]
    for label in candidates:
        diff = evalstats.paired(based, [r["pass_rate"] for r in results[label]], [1] * n)
        lines.append(f"{label} vs {base}, mean pass rate on the same seeds: {evalstats.verdict(diff, 'seed')}")
    for label, rows in results.items():
        if rows and all(isinstance(r.get("before"), (int, float)) for r in rows):
            rise = evalstats.paired([r["before"] for r in rows], [r["pass_rate"] for r in rows], [1] * n)
            lines.append(f"{label} after vs before training, mean pass rate on the same seeds: {evalstats.verdict(rise, 'seed')}")
    for label in candidates:
        solved, mean, wall = stats(results[label])
        ratio = f"{solved / baseline[0]:.2f}" if baseline[0] else f"n/a ({base} solved none)"
        lines.append(
            f"ratio {label}/{base}: seeds solved {ratio}, wall {wall / baseline[2]:.2f}" + to_solve(results, label, base)
        )
    return lines


def to_solve(results: dict[str, list[dict]], label: str, base: str = "shipped") -> str:
    """The median training seconds until a batch first passed, over the seeds both solved that way, as a ratio."""
    pairs = [
        (a["to_solve"], b["to_solve"])
        for a, b in zip(results[base], results[label], strict=True)
        if a.get("to_solve") and b.get("to_solve")
    ]
    if not pairs:
        return ""
    theirs, other = statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)
    return f", training seconds until a batch passed {other:.0f} vs {theirs:.0f} ({other / theirs:.2f}, {len(pairs)} seeds)"


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] if path.exists() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/digit.yaml")
    parser.add_argument("--seeds", type=seed_list, default=seed_list("0-7"), help="e.g. 0-7 or 0,3,5")
    parser.add_argument(
        "--candidate",
        type=candidate,
        action="append",
        default=[],
        help="'LABEL: key=value ...' overrides on top of the recipe; repeatable",
    )
    parser.add_argument(
        "--baseline",
        type=candidate,
        help="'LABEL: key=value ...': the contestant the others are compared with, in place of the recipe as shipped",
    )
    parser.add_argument("--metric", default="digit_exact", help="the eval reward whose pass rate decides")
    parser.add_argument("--solved", type=float, default=0.9, help="pass rate that counts as solved")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="keep each run as DIR/LABEL/seed-N (and its log as seed-N.log), e.g. for benchmarks/health.py --tally-only",
    )
    parser.add_argument(
        "--log",
        type=Path,
        help="append each run to this JSON-lines file; started again with it, runs already there are not run again",
    )
    parser.add_argument("--table-from", type=Path, metavar="LOG", help="print the comparison of the runs in LOG and exit")
    args = parser.parse_args()
    if args.table_from:
        records = read_log(args.table_from)
        results = {r["label"]: [] for r in records}
        overrides = {r["label"]: r["overrides"] for r in records}
        for r in records:
            results[r["label"]].append(r)
        print("\n".join(report(results, overrides, args.solved, args.baseline[0] if args.baseline else "shipped")))
        return

    contestants = [args.baseline or ("shipped", []), *args.candidate]
    for label, extra in contestants:
        recipe = recipe_of(args.recipe, extra)[0]
        if not Path(recipe).is_file():
            parser.error(f"{label}: recipe {recipe} is not a file (a path from the current folder)")
    overrides = dict(contestants)
    done = read_log(args.log) if args.log else []
    results: dict[str, list[dict]] = {label: [] for label, _ in contestants}
    with tempfile.TemporaryDirectory(prefix="grpo-ext-seeds-") as tmp:
        work = Path(args.keep).resolve() if args.keep else Path(tmp)
        for i, seed in enumerate(args.seeds):
            order = contestants if i % 2 == 0 else contestants[::-1]
            for label, extra in order:
                text = digest(recipe_of(args.recipe, extra)[0])
                same = (args.recipe, label, extra, seed, args.metric, text)
                keys = ("recipe", "label", "overrides", "seed", "metric", "recipe_digest")
                r = next((d for d in done if tuple(d.get(k) for k in keys) == same), None)
                logged = r is not None
                if r is None:
                    (work / label).mkdir(parents=True, exist_ok=True)
                    r = run_once(args.recipe, seed, extra, args.metric, work / label / f"seed-{seed}")
                    r.update(recipe=args.recipe, label=label, overrides=extra, metric=args.metric, recipe_digest=text)
                    if args.log:
                        args.log.parent.mkdir(parents=True, exist_ok=True)
                        with args.log.open("a", encoding="utf-8") as log:
                            log.write(json.dumps(r) + "\n")
                results[label].append(r)
                print(
                    f"seed {seed:<3} {label:<16} {args.metric} pass rate "
                    + (f"before {r['before']}, " if r.get("before") is not None else "")
                    + f"after {r['shown']:<20} "
                    f"{r['steps']} steps, {r['wall']:.0f} s" + ("  (from the log)" if logged else ""),
                    flush=True,
                )
    print("\n".join(report(results, overrides, args.solved, contestants[0][0])))


if __name__ == "__main__":
    main()
