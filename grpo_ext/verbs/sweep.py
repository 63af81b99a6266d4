"""The checkpoint sweep: score every complete ``checkpoint-N`` of a run, to pick the best one, not just the last.

    grpo-ext eval RECIPE --model runs/digit --checkpoints

Each complete checkpoint (its ``grpo_ext_complete.json`` lists every file, all present) samples the recipe's
eval prompts exactly as ``grpo-ext eval`` does (the same seeds, so two checkpoints are compared on the same
draws), and the rewards score them. The run's own ``eval before`` is step 0 when it was sampled with the same
settings, prompts and rewards (its ``recipe.yaml``). Results go to ``eval_curve.json`` and ``eval_curve.md``,
the held-out pass rate against step to ``eval_curve.png`` (in the run directory, or ``--out``). Any of the three
already there stops the command before a model loads, unless ``--force``; a checkpoint already scored there with
the same settings, prompts and rewards is then not scored again. The best checkpoint is
the one with the highest pass rate of the recipe's first reward (the earliest among equals), compared with the
last one, paired by prompt.
"""

import hashlib
import json
import time
from pathlib import Path

import yaml

from grpo_ext.core import console
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import refuse_to_replace, user_path, write_atomic
from grpo_ext.core.text import plural
from grpo_ext.core.yaml_io import load_yaml
from grpo_ext.recipe import Recipe, add_recipe_arguments, load
from grpo_ext.results import plots, report, scoring
from grpo_ext.run import hardware, heap, rundir, sampling
from grpo_ext.verbs import evaluate

CURVE = "eval_curve"


def fingerprint(checkpoint: Path) -> str:
    """What identifies a checkpoint's contents: a hash of its manifest (every file and its size)."""
    return hashlib.sha256((checkpoint / rundir.MANIFEST).read_bytes()).hexdigest()[:16]


def task_of(portable: dict) -> str:
    """What a recipe asks an eval to do, beyond the sampling settings: its data and rewards, as a short hash."""
    task = {key: portable.get(key) for key in ("data", "rewards")}
    return hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _run_task(run_dir: Path) -> str | None:
    """The task of the run's own recipe (its recipe.yaml), to tell whether its eval before is comparable."""
    try:
        return task_of(load_yaml((run_dir / "recipe.yaml").read_text(encoding="utf-8")) or {})
    except (OSError, yaml.YAMLError):
        return None


def _cached(dest: Path, key: dict) -> dict[str, dict]:
    """Earlier points in ``dest/eval_curve.json`` sampled with the same settings, by checkpoint fingerprint."""
    try:
        points = json.loads((dest / f"{CURVE}.json").read_text(encoding="utf-8"))["points"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {p["fingerprint"]: p for p in points if p.get("fingerprint") and p.get("settings") == key}


def score_checkpoints(recipe: Recipe, run_dir: Path, dest: Path, log) -> dict:
    """Score step 0 (the run's eval before, when comparable) and each complete checkpoint; the curve as a dict."""
    complete = [c for c in rundir.checkpoints(run_dir) if rundir.is_complete(c)]
    if not complete:
        raise RecipeError(
            f"--checkpoints: {run_dir} has no complete checkpoint-N; train with training.save_steps set "
            f"(and training.save_total_limit: null to keep every checkpoint)"
        )
    s = sampling.settings(recipe, bf16=hardware.uses_bf16(recipe))
    task = task_of(recipe.portable())
    key = {**s.key(), "task": task}  # the same settings, prompts and rewards: the same scores
    cache, started = _cached(dest, key), time.monotonic()
    summary = rundir.read_summary(run_dir)
    before = summary.get("eval_before")
    comparable = before and before.get("settings") == s.key() and _run_task(run_dir) == task
    points = [{"step": 0, "checkpoint": "before training", **before, "settings": key}] if comparable else []
    scored = 0
    for checkpoint in complete:
        mark = fingerprint(checkpoint)
        if mark in cache:
            points.append({**cache[mark], "checkpoint": checkpoint.name, "reused": True})
            continue
        model, tokenizer, _ = evaluate.load_model(str(checkpoint), recipe.model, log)
        t0 = time.monotonic()
        result = evaluate.score_loaded(recipe, model, tokenizer, s, log, checkpoint.name)
        result["seconds"] = round(time.monotonic() - t0, 1)
        points.append(
            {"step": rundir.step_of(checkpoint), "checkpoint": checkpoint.name, "fingerprint": mark, **result, "settings": key}
        )
        scored += 1
        rates = ", ".join(f"{k} {v['pass_rate']}" for k, v in result["rewards"].items())
        log(f"eval {checkpoint.name}: pass rate {rates} ({result['samples']} samples, {result['seconds']} s)")
        del model
        heap.release()  # the next model loads into the memory this one held
    curve = {
        "run": str(run_dir),
        "recipe": str(recipe.path),
        "settings": key,
        "points": points,
        "scored": scored,
        "seconds": round(time.monotonic() - started, 1),
        "train_seconds": summary.get("train_seconds"),
    }
    curve["best"] = best(points, recipe.reward_funcs[0].__name__)
    return curve


def best(points: list[dict], reward: str) -> dict | None:
    """The checkpoint with the highest pass rate of ``reward`` (the earliest among equals), and how it compares
    with the last checkpoint, paired by prompt."""
    saved = [p for p in points if p["checkpoint"].startswith("checkpoint-") and p["rewards"][reward]["pass_rate"] is not None]
    if not saved:
        return None
    top = max(saved, key=lambda p: (p["rewards"][reward]["pass_rate"], -p["step"]))
    last = saved[-1]
    change = scoring.change(last, top).get(reward) if top is not last else None
    return {"checkpoint": top["checkpoint"], "step": top["step"], "reward": reward, "vs_last": change}


def table(curve: dict) -> list[str]:
    """One row per point: step, checkpoint, each reward's pass rate with its interval, seconds."""
    names = list(dict.fromkeys(n for p in curve["points"] for n in p["rewards"]))
    lines = [f"{'step':>6}  {'checkpoint':<18}" + "".join(f"{name + ' pass':>26}" for name in names) + f"{'seconds':>10}"]
    for p in curve["points"]:
        cells = [report.rate_cell(p["rewards"].get(name)) for name in names]
        seconds = "cached" if p.get("reused") or p["step"] == 0 else p.get("seconds")
        lines.append(f"{p['step']:>6}  {p['checkpoint']:<18}" + "".join(f"{c:>26}" for c in cells) + f"{seconds!s:>10}")
    return lines


def closing_lines(curve: dict) -> list[str]:
    b = curve["best"]
    lines = []
    if b:
        lines.append(f"best: {b['checkpoint']} by the pass rate of {b['reward']}")
        if b["vs_last"]:
            lines.append(f"{b['checkpoint']} vs the last checkpoint, pass rate of {b['reward']}: {b['vs_last']['verdict']}")
    trained = f"; the run trained for {curve['train_seconds']} s" if curve.get("train_seconds") else ""
    reused = sum(1 for p in curve["points"] if p.get("reused"))
    lines.append(f"sweep: {plural(curve['scored'], 'checkpoint')} scored and {reused} reused in {curve['seconds']} s{trained}")
    return lines


def markdown(curve: dict) -> str:
    lines = [f"# Eval across checkpoints: `{curve['run']}`", "", f"Recipe `{curve['recipe']}`.", "", "```"]
    lines += table(curve) + ["```", "", f"![held-out pass rate against step]({CURVE}.png)", ""]
    lines += [f"- {line}" for line in closing_lines(curve)]
    return "\n".join(lines) + "\n"


def sweep(
    recipe: str | Path | Recipe,
    run: str | Path,
    overrides: list[str] | tuple = (),
    *,
    out: str | Path | None = None,
    force: bool = False,
    verbose: bool = False,
    log=console.say,
) -> dict:
    """Score every complete checkpoint of the run directory ``run`` on the recipe's eval prompts; print the table;
    write eval_curve.json, eval_curve.md and eval_curve.png to ``out`` (default: the run directory), replacing them
    only with ``force`` (the checkpoints scored in them are then reused). Returns the curve."""
    recipe = recipe if isinstance(recipe, Recipe) else load(str(recipe), list(overrides))
    run_dir = user_path(run)
    if not run_dir.is_dir():
        raise RecipeError(f"--checkpoints: {run_dir} is not a directory; pass the run directory (output_dir) of a run")
    dest = user_path(out) if out else run_dir
    refuse_to_replace([dest / f"{CURVE}{suffix}" for suffix in (".json", ".md", ".png")], force, command="eval --checkpoints")
    console.quiet_third_parties(verbose)
    curve = score_checkpoints(recipe, run_dir, dest, log)
    print("\n".join(table(curve) + closing_lines(curve)))
    dest.mkdir(parents=True, exist_ok=True)
    rundir.record(dest, f"{CURVE}.json", f"{CURVE}.md", f"{CURVE}.png")  # into a run directory: in its marker first
    write_atomic(dest / f"{CURVE}.json", json.dumps(curve, indent=2, ensure_ascii=False) + "\n")
    write_atomic(dest / f"{CURVE}.md", markdown(curve))
    plots.draw_eval_curve(curve["points"], dest / f"{CURVE}.png", f"{run_dir.name}: held-out pass rate")
    log(f"wrote {dest / (CURVE + '.json')}, {CURVE}.md and {CURVE}.png")
    return curve


def cmd_eval(args) -> None:
    """``grpo-ext eval``, both forms: models side by side (``evaluate``), or with --checkpoints a run's checkpoints."""
    if args.checkpoints:
        if len(args.model) != 1:
            raise RecipeError("--checkpoints: give one --model, the run directory whose checkpoint-N to score")
        sweep(args.recipe, args.model[0], args.overrides, out=args.out, force=args.force, verbose=args.verbose)
        return
    evaluate.evaluate_models(args.recipe, args.model, args.overrides, out=args.out, force=args.force, verbose=args.verbose)


def add_parser(subparsers) -> None:
    """``grpo-ext eval RECIPE --model A [--model B ...] [--checkpoints]``: this module's, as it runs both forms (it
    imports ``evaluate``; ``evaluate`` cannot import it)."""
    p = subparsers.add_parser("eval", help="score models side by side on a recipe's eval prompts with its rewards")
    add_recipe_arguments(p, "section.key=value overrides, e.g. eval.samples=16")
    p.add_argument(
        "--model", action="append", required=True, help="catalog alias, hub id, local path, or run directory (repeat to compare)"
    )
    p.add_argument(
        "--out",
        help="folder for eval.json and eval.md (default: eval-NAME beside the recipe's output_dir); with --checkpoints, "
        "for eval_curve.json, eval_curve.md and eval_curve.png (default: the run directory)",
    )
    p.add_argument(
        "--force",
        "--overwrite",
        action="store_true",
        dest="force",
        help="replace those files if they exist (--overwrite: the older name)",
    )
    p.add_argument(
        "--checkpoints",
        action="store_true",
        help="score every complete checkpoint-N of the one --model run directory; eval_curve.png there (or in --out)",
    )
    p.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    p.set_defaults(fn=cmd_eval)
