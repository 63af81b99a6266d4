"""When a run ends: summary.json, curves.png and report.md in the run directory; the score tables that
the terminal, report.md and ``grpo-ext eval`` show."""

import json
import sys
from pathlib import Path

import yaml

from grpo_ext.core import console
from grpo_ext.core.files import write_atomic
from grpo_ext.core.text import fmt, plural
from grpo_ext.core.yaml_io import load_yaml
from grpo_ext.recipe import Training
from grpo_ext.results import evalstats, plots, watchdog
from grpo_ext.run import hardware, rundir


def new_summary(recipe: str, model: str, processes: int) -> dict:
    """summary.json of a run that has just started; the run fills it in as it goes."""
    return {
        "recipe": recipe,
        "model": model,
        "versions": hardware.versions(),
        "status": "running",
        "steps": 0,
        "train_seconds": None,
        "reward_first": None,
        "reward_last": None,
        "eval_before": None,
        "eval_after": None,
        "processes": processes,
    }


def name_base_model(run_dir: Path, model: str, recipe: str) -> None:
    """TRL's model card (run_dir/README.md) links a base loaded from a folder as ``[None]``: name it instead."""
    card = run_dir / "README.md"
    if card.is_file():
        text = card.read_text(encoding="utf-8")
        write_atomic(card, text.replace("[None](https://huggingface.co/None)", f"{model} (recipe `{recipe}`)"))


def write_summary(run_dir: Path, summary: dict) -> None:
    rundir.record(run_dir, "summary.json")  # in the run's marker before the file is made
    write_atomic(run_dir / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")


def peak_memory() -> dict[str, int]:
    """Peak resident memory of this process, and peak GPU memory allocated by torch when CUDA was used (MiB)."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_mib": round(rss / (2**20 if sys.platform == "darwin" else 2**10))}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    return out


def _reward_names(columns: dict[str, dict | None]) -> list[str]:
    return list(dict.fromkeys(n for result in columns.values() if result for n in result["rewards"]))


def _with_ci(value, ci: dict | None, symmetric: bool) -> str:
    """``0.984 [0.91, 1.00]`` for a rate, ``0.076 ±0.041`` for a mean (``[low, high]`` too where the reward's range
    cut it); the figure alone without an interval."""
    if value is None or not ci or ci.get("low") is None:
        return fmt(value)
    centre = ci.get("value", value)
    if symmetric and abs((ci["high"] - centre) - (centre - ci["low"])) < 5e-4:  # equal but for rounding to 4 places
        return f"{fmt(value)} ±{(ci['high'] - ci['low']) / 2:.3f}"
    return f"{fmt(value)} [{ci['low']:.2f}, {ci['high']:.2f}]"


def too_few(columns: dict[str, dict | None]) -> list[str]:
    """The line under a score table where a figure stands alone because too few prompts were judged for an
    interval (``evalstats.MIN_PROMPTS``); none otherwise.

    >>> too_few({"before": {"rewards": {"r": {"mean": 0.5, "mean_ci": {"low": None}, "per_prompt": [[1.0], [0.0]]}}}})
    ['too few prompts for an interval: 2 prompts judged; an interval takes at least 3']
    """
    judged = [
        sum(1 for scores in stats.get("per_prompt", []) if scores)
        for result in columns.values()
        for stats in (result or {}).get("rewards", {}).values()
        if stats.get("mean") is not None and "per_prompt" in stats and (stats.get("mean_ci") or {}).get("low") is None
    ]
    if not judged:
        return []
    least = evalstats.MIN_PROMPTS
    return [f"too few prompts for an interval: {plural(max(judged), 'prompt')} judged; an interval takes at least {least}"]


def unscored(columns: dict[str, dict | None]) -> list[str]:
    """The line under a score table that counts the samples a reward scored None (a judge that gave no grade, a
    reference that could not be read), which its mean and pass rate leave out; none when every sample was scored.

    >>> unscored({"before": {"samples": 4, "rewards": {"llm_judge": {"judged": 1}, "digit_exact": {"judged": 4}}},
    ...           "after": {"samples": 4, "rewards": {"llm_judge": {"judged": 4}}}})
    ['not scored (None), left out of the mean and pass rate: llm_judge 3 of 4 samples before, 0 of 4 samples after']
    """
    shown = {label: result for label, result in columns.items() if result}
    parts = []
    for name in _reward_names(columns):
        counts = {
            label: (result["samples"] - result["rewards"][name]["judged"], result["samples"])
            for label, result in shown.items()
            if "judged" in result["rewards"].get(name, {}) and isinstance(result.get("samples"), int)
        }
        if any(missing for missing, _ in counts.values()):
            parts.append(f"{name} " + ", ".join(f"{missing} of {of} samples {label}" for label, (missing, of) in counts.items()))
    return ["not scored (None), left out of the mean and pass rate: " + "; ".join(parts)] if parts else []


def sample_count(result: dict) -> str:
    """``4 samples``, and the samples a reward scored None: ``4 samples, 3 of them not scored by llm_judge``.

    >>> sample_count({"samples": 4, "rewards": {"llm_judge": {"judged": 1}, "digit_exact": {"judged": 4}}})
    '4 samples, 3 of them not scored by llm_judge'
    """
    n = result["samples"]
    missing = [(n - r["judged"], name) for name, r in result["rewards"].items() if r.get("judged", n) < n]
    return plural(n, "sample") + "".join(f", {k} of them not scored by {name}" for k, name in missing)


def rate_cell(scores: dict | None) -> str:
    """One reward's pass rate with its interval, ``0.984 [0.91, 1.00]``, or ``-``."""
    return _with_ci((scores or {}).get("pass_rate"), (scores or {}).get("pass_rate_ci"), False)


def _score_rows(columns: dict[str, dict | None]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(row label, its name out of the table's indentation, one (mean cell, pass cell) per column): each reward,
    its pass@k (k > 1) and maj@n rows, lengths."""
    cells = [columns[label] or {} for label in columns]
    rows = []
    for name in _reward_names(columns):
        scores = [c.get("rewards", {}).get(name, {}) for c in cells]
        rows.append(
            (
                name,
                name,
                [
                    (_with_ci(c.get("mean"), c.get("mean_ci"), True), _with_ci(c.get("pass_rate"), c.get("pass_rate_ci"), False))
                    for c in scores
                ],
            )
        )
        ks = dict.fromkeys(k for c in scores for k in c.get("pass_at", {}) if k != "1")
        for k in ks:
            at = [c.get("pass_at", {}).get(k) or {} for c in scores]
            rows.append((f"  pass@{k}", f"{name} pass@{k}", [("", _with_ci(a.get("value"), a, False)) for a in at]))
        if any(c.get("maj") for c in scores):
            n = next(c["maj"]["n"] for c in scores if c.get("maj"))
            votes = [("", _with_ci((c.get("maj") or {}).get("value"), c.get("maj"), False)) for c in scores]
            rows.append((f"  maj@{n}", f"{name} maj@{n}", votes))
    lengths = [c.get("mean_length") for c in cells]
    if any(v is not None for v in lengths):
        rows.append(("mean length (tokens)", "mean completion length (tokens)", [(fmt(v, 1), "") for v in lengths]))
    return rows


def score_table(columns: dict[str, dict | None]) -> list[str]:
    """Terminal lines: per reward, mean and pass rate of each column (before/after, or models) side by side,
    with 95% intervals when the eval has them (then pass@k and maj@n rows); then mean completion length.
    A column without a result shows ``-``; no result at all, no table."""
    if not any(columns.values()):
        return []
    labels = list(columns)
    rows = _score_rows(columns)
    wide = any("[" in cell[1] for _, _, row in rows for cell in row)
    mean_w, pass_w = (15, 20) if wide else (10, 8)
    if any("[" in cell[0] for _, _, row in rows for cell in row):  # a mean cut to its reward's range: [low, high]
        mean_w = 20
    width = max(mean_w + pass_w, *(len(label) + 2 for label in labels))
    lines = [
        f"{'':<24}" + "".join(f"{label:>{width}}" for label in labels),
        f"{'reward':<24}" + "".join(f"{'mean':>{width - pass_w}}{'pass':>{pass_w}}" for _ in labels),
    ]
    for name, _, row in rows:
        lines.append(f"{name:<24}" + "".join(f"{m:>{width - pass_w}}{p:>{pass_w}}" for m, p in row))
    return [line.rstrip() for line in lines] + too_few(columns) + unscored(columns)


def score_markdown(columns: dict[str, dict | None]) -> list[str]:
    """The same table as Markdown."""
    if not any(columns.values()):
        return []
    labels = list(columns)
    lines = [
        "| reward | " + " | ".join(f"{label}: mean | {label}: pass rate" for label in labels) + " |",
        "|---|" + "---:|---:|" * len(labels),
    ]
    for _, name, row in _score_rows(columns):
        lines.append(f"| {name} | " + " | ".join(f"{m} | {p}".rstrip() for m, p in row) + " |")
    notes = too_few(columns) + unscored(columns)
    return lines + [line for note in notes for line in ("", note)]  # each its own paragraph


def change_lines(changes: dict | None, label: str) -> list[str]:
    """One line per reward: the paired change of its pass rate, with the verdict (``better: +0.34 [+0.21, +0.47]``)."""
    return [f"{label}, pass rate of {name}: {change['verdict']}" for name, change in (changes or {}).items()]


def md_text(text: str) -> str:
    """A completion as a Markdown table cell: quoted, so whitespace and newlines show."""
    return "`" + json.dumps(text, ensure_ascii=False).replace("|", "\\|").replace("`", "'") + "`"


def samples_markdown(columns: dict[str, dict | None]) -> list[str]:
    """Sample completions side by side: one table per prompt, one column per label (before/after, or models)."""
    present = {label: r for label, r in columns.items() if r and r.get("examples")}
    if not present:
        return []
    lines = []
    first = next(iter(present.values()))
    for i, example in enumerate(first["examples"]):
        lines += [f"**Prompt:** {example['prompt']}", "", "| " + " | ".join(present) + " |", "|" + "---|" * len(present)]
        cols = [r["examples"][i]["completions"] if i < len(r["examples"]) else [] for r in present.values()]
        for row in range(max(len(c) for c in cols)):
            lines.append("| " + " | ".join(md_text(c[row]) if row < len(c) else "" for c in cols) + " |")
        lines.append("")
    return lines


INTERVALS_NOTE = (
    "Intervals are 95% and count prompts, not samples, as the units: a mean ± t times its standard error over "
    "prompts (as [low, high] where the reward's range of scores cuts it), a rate [low, high] by Wilson on the effective "
    f"sample size, none from fewer than {evalstats.MIN_PROMPTS} prompts; the change after vs before is paired by "
    "prompt (same prompts, same sampling seeds)."
)


def eval_share(summary: dict) -> float | None:
    """The evals' share of the time spent evaluating and training (None before both have a time)."""
    evals = [(summary.get(key) or {}).get("seconds") for key in ("eval_before", "eval_after")]
    spent = sum(x for x in evals if x is not None)
    train_s = summary.get("train_seconds")
    if not train_s or not spent:
        return None
    return spent / (spent + train_s)


def _seconds(value) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def reward_seconds(records: list[dict]) -> dict[str, float]:
    """Wall time each reward spent scoring during training, from the ``reward_seconds/NAME`` of metrics lines.

    >>> reward_seconds([{"reward_seconds/a": 1.5, "loss": 0.1}, {"reward_seconds/a": 2.0, "reward_seconds/b": 0.25}])
    {'a': 3.5, 'b': 0.25}
    """
    totals: dict[str, float] = {}
    for record in records:
        for key, value in record.items():
            if key.startswith("reward_seconds/") and isinstance(value, (int, float)):
                name = key.removeprefix("reward_seconds/")
                totals[name] = totals.get(name, 0.0) + value
    return totals


def tool_use(records: list[dict]) -> dict | None:
    """Tool calls in training, from TRL's ``tools/call_frequency`` (calls per completion) and
    ``tools/failure_frequency`` (the share of calls that failed) on the metrics lines, and grpo_ext's
    ``tools/dropped_results`` (results TRL dropped: the conversation would pass max_completion_length; TRL counts
    such a call as one that worked); None for a run without tools.

    >>> used = tool_use([{"tools/call_frequency": 0.0}, {"tools/call_frequency": 1.5, "tools/failure_frequency": 0.25,
    ...                   "tools/dropped_results": 3.0}])
    >>> used["calls_per_completion_first"], used["calls_per_completion_last"], used["failed_share_mean"], used["results_dropped"]
    (0.0, 1.5, 0.25, 3)
    """
    calls = [r["tools/call_frequency"] for r in records if isinstance(r.get("tools/call_frequency"), (int, float))]
    if not calls:
        return None
    failed = [
        r["tools/failure_frequency"]
        for r in records
        if isinstance(r.get("tools/failure_frequency"), (int, float)) and r.get("tools/call_frequency")
    ]
    dropped = [r["tools/dropped_results"] for r in records if isinstance(r.get("tools/dropped_results"), (int, float))]
    return {
        "calls_per_completion_first": calls[0],
        "calls_per_completion_last": calls[-1],
        "calls_per_completion_mean": round(sum(calls) / len(calls), 4),
        "failed_share_mean": round(sum(failed) / len(failed), 4) if failed else None,
        **({"results_dropped": round(sum(dropped))} if dropped else {}),  # none logged: a run from before they were counted
    }


def tools_markdown(summary: dict, budget: int | None = None) -> list[str]:
    """report.md's Tools section: how the model used its tools in the evals and in training, and the results TRL
    dropped (``budget``: training's max_completion_length)."""
    evals = {label: (summary.get(key) or {}).get("tools") for label, key in (("before", "eval_before"), ("after", "eval_after"))}
    train = summary.get("tools")
    if not train and not any(evals.values()):
        return []
    lines = ["", "## Tools", ""]
    shown = {label: t for label, t in evals.items() if t}
    if shown:
        lines += [
            "| eval | samples | called a tool | wrote a call that could not be read | got an error back | calls a sample "
            "| results dropped |"
        ]
        lines += ["|---|---:|---:|---:|---:|---:|---:|"]
        for label, t in shown.items():
            lines.append(
                f"| {label} | {t['samples']} | {t['called']:.0%} | {t['unread_call']:.0%} | {t['error_back']:.0%} | "
                f"{t['calls_per_sample']:.3g} | {t.get('dropped', '-')} |"
            )
        lines.append("")
        dropped = [
            f"- eval {label}: {watchdog.dropped_line(t['dropped'], t.get('budget'))}"
            for label, t in shown.items()
            if t.get("dropped")
        ]
        lines += [*dropped, ""] if dropped else []
    if train:
        failed = train["failed_share_mean"]
        dropped = train.get("results_dropped")
        lines.append(
            f"In training, calls per completion went from {train['calls_per_completion_first']:g} at the first step to "
            f"{train['calls_per_completion_last']:g} at the last (mean {train['calls_per_completion_mean']:g}); "
            + (f"{failed:.0%} of the calls failed on the mean step" if failed is not None else "no call was made")
            + (f"; {watchdog.dropped_line(dropped, budget)} (TRL counts these calls as ones that worked)." if dropped else ".")
        )
    lines.append("The sample conversations below show each call as `→ tool(arguments)` and its result as `← result`.")
    return lines


def report_markdown(run_dir: Path, summary: dict, run_recipe: dict, records: list[dict]) -> str:
    """``report.md``: what ran, how it went, and what changed."""
    lines = [f"# Run report: {run_dir.name}", ""]
    steps, train_s = summary.get("steps") or 0, summary.get("train_seconds")
    per_step = f" ({train_s / steps:.1f} s/step)" if train_s and steps else ""
    lines += [
        f"- **Status:** {summary.get('status')}" + (f" ({summary['error']})" if summary.get("error") else ""),
        f"- **Recipe:** `{summary.get('recipe')}`; as run, overrides applied: [recipe.yaml](recipe.yaml)",
        f"- **Model:** {summary.get('model')}",
        f"- **Steps:** {steps}; training time {_seconds(train_s)}{per_step}",
    ]
    final = summary.get("final")
    if isinstance(final, dict):  # a completed run: where its model is, or why it saved none; weights that never moved
        saved = "[final/](final)" if final.get("saved") else f"none, {final.get('why')}"
        unchanged = f"; the weights are the base model's, unchanged ({final['unchanged']})" if final.get("unchanged") else ""
        lines.append(f"- **Model saved:** {saved}{unchanged}")
    resumed = summary.get("resumed_at") or []
    if resumed:
        at = ", ".join(f"step {step}" for step in resumed)
        lines.append(f"- **Resumed** from the checkpoint of {at}; the training time counts every step, before and after")
    for change in summary.get("changes") or []:
        lines.append(f"- **Recipe changed on resume** at step {change['at_step']}: {', '.join(change['keys'])}")
    rewards = run_recipe.get("rewards") or []
    if rewards:
        named = [f"{r['name']} (weight {r.get('weight', 1.0)})" if isinstance(r, dict) else str(r) for r in rewards]
        lines.append("- **Rewards:** " + ", ".join(named))
    if summary.get("reward_first") is not None or summary.get("reward_last") is not None:  # a step may score nothing
        lines.append(
            f"- **Reward during training:** {fmt(summary.get('reward_first'))} at the first step, "
            f"{fmt(summary.get('reward_last'))} at the last"
        )
    before, after = summary.get("eval_before"), summary.get("eval_after")
    lines += ["", "## Before and after training", ""]
    if before or after:
        ev = run_recipe.get("eval") or {}
        shown = after or before
        lines += [
            (
                f"Held-out eval prompts, {shown.get('prompts', '?')} prompts x {ev.get('samples', '?')} samples each; "
                f"a sample passes a reward when it scores at least {ev.get('pass_threshold', '?')}."
            ),
            "",
        ]
        lines += score_markdown({"before": before, "after": after})
        lines += ["", INTERVALS_NOTE]
        lines += [f"- {line}" for line in change_lines(summary.get("eval_change"), "After vs before")]
    else:
        lines.append("No eval ran (no `data.eval_prompts`, or `eval.enabled: false`).")
    lines += tools_markdown(summary, Training(run_recipe.get("training") or {}).effective("max_completion_length"))
    lines += watchdog.markdown(summary.get("health"))
    lines += ["", "## Training curves", ""]
    lines.append(
        "![reward, each reward function, KL, completion length, entropy and clipped ratios against step](curves.png)"
        if (run_dir / "curves.png").exists()
        else "No curves: no training step was logged."
    )
    samples = samples_markdown({"before training": before, "after training": after})
    if samples:
        lines += ["", "## Sample completions", ""] + samples
    lines += ["", "## Time and memory", "", "| what | value |", "|---|---:|"]
    for label, key in (("eval before", "eval_before"), ("eval after", "eval_after")):
        if (summary.get(key) or {}).get("seconds") is not None:
            lines.append(f"| {label} | {_seconds(summary[key]['seconds'])} |")
    lines.append(f"| training | {_seconds(train_s)}{per_step} |")
    for name, total in reward_seconds(records).items():
        share_of_step = f", {total / train_s:.0%} of training" if train_s else ""
        lines.append(f"| reward {name}, per step | {_seconds(total / steps) if steps else '-'}{share_of_step} |")
    share = eval_share(summary)
    if share is not None:
        lines.append(f"| eval share of eval + training time | {share:.0%} |")
    memory = summary.get("memory") or {}
    if "peak_rss_mib" in memory:
        lines.append(f"| peak memory (process RSS) | {memory['peak_rss_mib']} MiB |")
    if "peak_gpu_mib" in memory:
        lines.append(f"| peak GPU memory (torch) | {memory['peak_gpu_mib']} MiB |")
    lines += ["", "## Versions", "", "| package | version |", "|---|---|"]
    lines += [f"| {name} | {version} |" for name, version in (summary.get("versions") or {}).items()]
    return "\n".join(lines) + "\n"


def finish(run_dir: Path, summary: dict, log=console.say) -> None:
    """Write summary.json, curves.png and report.md for a run that has ended (completed or not)."""
    summary["memory"] = peak_memory()
    records = rundir.read_metrics(run_dir / "metrics.jsonl")
    used = tool_use(records)
    if used is not None:
        summary["tools"] = used
    rundir.record(run_dir, "summary.json", "report.md", *(["curves.png"] if records else []))
    write_summary(run_dir, summary)
    name_base_model(run_dir, summary.get("model"), summary.get("recipe"))  # TRL rewrites the card at each checkpoint
    recipe_file = run_dir / "recipe.yaml"
    try:  # the report is written for any run that ended, even one whose recipe.yaml was damaged since
        run_recipe = load_yaml(recipe_file.read_text(encoding="utf-8")) if recipe_file.exists() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        run_recipe = None
    run_recipe = run_recipe if isinstance(run_recipe, dict) else {}
    if records:
        beta = Training(run_recipe.get("training") or {}).effective("beta")
        model = (run_recipe.get("model") or {}).get("name", "")
        plots.draw_curves(records, run_dir / "curves.png", f"{run_dir.name}: {model}", beta=beta)
    write_atomic(run_dir / "report.md", report_markdown(run_dir, summary, run_recipe, records))
    log(f"report: {run_dir / 'report.md'}" + (f", curves: {run_dir / 'curves.png'}" if records else ""))
