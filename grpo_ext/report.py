"""The run directory's records: metrics.jsonl and the progress display while training; summary.json,
curves.png and report.md when the run ends."""

import json
import sys
import time
from pathlib import Path


def _num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def step_stats(record: dict, each_reward: bool = True) -> str:
    """``reward 0.812  digit_exact 0.750  kl 0.0012  len 2.1`` for one metrics record."""
    parts = [f"reward {record['reward']:.3f}"]
    if each_reward:
        parts += [f"{k.split('/')[1]} {v:.3f}" for k, v in record.items() if k.startswith("rewards/") and k.endswith("/mean")]
    if isinstance(record.get("kl"), float):
        parts.append(f"kl {record['kl']:.4f}")
    if isinstance(record.get("completions/mean_length"), float):
        parts.append(f"len {record['completions/mean_length']:.1f}")
    return "  ".join(parts)


class LineProgress:
    """One line per logged step: readable in CI logs and files, where a redrawn bar is not."""

    def __init__(self, log):
        self.log, self.started = log, time.monotonic()

    def update(self, step: int, total: int, record: dict) -> None:
        per_step = (time.monotonic() - self.started) / max(step, 1)
        left = per_step * max(total - step, 0)
        self.log(f"step {step}/{total}  {step_stats(record)}  {per_step:.1f} s/step, {left:.0f} s left")

    def stop(self) -> None:
        pass


class BarProgress:
    """A single rich progress bar on a terminal; log lines printed meanwhile scroll above it."""

    def __init__(self, total: int, console=None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("step"), MofNCompleteColumn(), BarColumn(bar_width=16), TextColumn("{task.fields[stats]}"),
                            TextColumn("eta"), TimeRemainingColumn(), console=console or Console(stderr=True))
        self.task = self.bar.add_task("train", total=total, stats="")
        self.bar.start()

    def update(self, step: int, total: int, record: dict) -> None:
        self.bar.update(self.task, completed=step, total=total, stats=step_stats(record, each_reward=False))

    def stop(self) -> None:
        self.bar.stop()


class MetricsLog:
    """A transformers TrainerCallback (built lazily so this module imports without transformers).

    Appends each training log to ``metrics.jsonl`` (main process only) and shows progress: a bar
    when stderr is a terminal, else one line per step. ``live`` forces either.
    """

    def __new__(cls, path: Path, is_main: bool, log=print, live: bool | None = None, console=None):
        from transformers import TrainerCallback

        class _Callback(TrainerCallback):
            def __init__(self):
                self.path, self.is_main, self.log = path, is_main, log
                self.live = sys.stderr.isatty() if live is None else live
                self.rewards: list[tuple[int, float]] = []
                self.progress = None

            def on_train_begin(self, args, state, control, **kwargs):
                if self.is_main:
                    self.progress = BarProgress(state.max_steps, console) if self.live else LineProgress(self.log)

            def on_log(self, args, state, control, logs=None, **kwargs):
                if not logs or "reward" not in logs:
                    return
                record = {"step": state.global_step, **{k: _num(v) for k, v in logs.items()}}
                self.rewards.append((state.global_step, record["reward"]))
                if not self.is_main:
                    return
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")
                if self.progress is not None:
                    self.progress.update(state.global_step, state.max_steps, record)

            def on_train_end(self, args, state, control, **kwargs):
                if self.progress is not None:
                    self.progress.stop()
                    self.progress = None

        return _Callback()


def write_summary(run_dir: Path, summary: dict) -> None:
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def peak_memory() -> dict[str, int]:
    """Peak resident memory of this process, and peak GPU memory allocated by torch when CUDA was used (MiB)."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_mib": round(rss / (2**20 if sys.platform == "darwin" else 2**10))}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        out["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    return out


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def eval_table(before: dict | None, after: dict | None) -> list[str]:
    """Lines of a before/after table: per reward, mean and pass rate; then mean completion length."""
    if not before and not after:
        return []
    names = list((after or before)["rewards"])
    lines = [f"{'reward':<24}{'before mean':>12}{'pass':>8}{'after mean':>12}{'pass':>8}"]
    for name in names:
        b = (before or {}).get("rewards", {}).get(name, {})
        a = (after or {}).get("rewards", {}).get(name, {})
        lines.append(f"{name:<24}{_fmt(b.get('mean')):>12}{_fmt(b.get('pass_rate')):>8}{_fmt(a.get('mean')):>12}{_fmt(a.get('pass_rate')):>8}")
    lengths = [(r or {}).get("mean_length") for r in (before, after)]
    if any(v is not None for v in lengths):
        lines.append(f"{'mean length (tokens)':<24}{_fmt(lengths[0], 1):>12}{'':>8}{_fmt(lengths[1], 1):>12}")
    return lines


def eval_markdown(before: dict | None, after: dict | None) -> list[str]:
    """The before/after table as Markdown."""
    if not before and not after:
        return []
    lines = ["| reward | before: mean | before: pass rate | after: mean | after: pass rate |", "|---|---:|---:|---:|---:|"]
    for name in (after or before)["rewards"]:
        b = (before or {}).get("rewards", {}).get(name, {})
        a = (after or {}).get("rewards", {}).get(name, {})
        cells = [_fmt(b.get("mean")), _fmt(b.get("pass_rate")), _fmt(a.get("mean")), _fmt(a.get("pass_rate"))]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lengths = [(r or {}).get("mean_length") for r in (before, after)]
    if any(v is not None for v in lengths):
        lines.append(f"| mean completion length (tokens) | {_fmt(lengths[0], 1)} | | {_fmt(lengths[1], 1)} | |")
    return lines


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


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def report_markdown(run_dir: Path, summary: dict, run_recipe: dict, records: list[dict]) -> str:
    """``report.md``: what ran, how it went, and what changed."""
    lines = [f"# Run report: {run_dir.name}", ""]
    steps, train_s = summary.get("steps") or 0, summary.get("train_seconds")
    per_step = f" ({train_s / steps:.1f} s/step)" if train_s and steps else ""
    lines += [f"- **Status:** {summary.get('status')}" + (f" ({summary['error']})" if summary.get("error") else ""),
              f"- **Recipe:** `{summary.get('recipe')}`; as run, overrides applied: [recipe.yaml](recipe.yaml)",
              f"- **Model:** {summary.get('model')}",
              f"- **Steps:** {steps}; training time {_seconds(train_s)}{per_step}"]
    rewards = run_recipe.get("rewards") or []
    if rewards:
        named = [f"{r['name']} (weight {r.get('weight', 1.0)})" if isinstance(r, dict) else str(r) for r in rewards]
        lines.append("- **Rewards:** " + ", ".join(named))
    if summary.get("reward_first") is not None:
        lines.append(f"- **Reward during training:** {summary['reward_first']:.3f} at the first step, "
                     f"{summary['reward_last']:.3f} at the last")
    before, after = summary.get("eval_before"), summary.get("eval_after")
    lines += ["", "## Before and after training", ""]
    if before or after:
        ev = run_recipe.get("eval") or {}
        shown = after or before
        lines += [(f"Held-out eval prompts, {shown.get('prompts', '?')} prompts x {ev.get('samples', '?')} samples each; "
                   f"a sample passes a reward when it scores at least {ev.get('pass_threshold', '?')}."), ""]
        lines += eval_markdown(before, after)
    else:
        lines.append("No eval ran (no `data.eval_prompts`, or `eval.enabled: false`).")
    lines += ["", "## Training curves", ""]
    lines.append("![reward, each reward function, KL, completion length, entropy and clipped ratios against step](curves.png)"
                 if (run_dir / "curves.png").exists() else "No curves: no training step was logged.")
    samples = samples_markdown({"before training": before, "after training": after})
    if samples:
        lines += ["", "## Sample completions", ""] + samples
    lines += ["", "## Time and memory", "", "| what | value |", "|---|---:|"]
    for label, key in (("eval before", "eval_before"), ("eval after", "eval_after")):
        if (summary.get(key) or {}).get("seconds") is not None:
            lines.append(f"| {label} | {_seconds(summary[key]['seconds'])} |")
    lines.append(f"| training | {_seconds(train_s)} |")
    step_times = [r["step_time"] for r in records if isinstance(r.get("step_time"), (int, float))]
    if step_times:
        lines.append(f"| mean step time (TRL) | {_seconds(sum(step_times) / len(step_times))} |")
    memory = summary.get("memory") or {}
    if "peak_rss_mib" in memory:
        lines.append(f"| peak memory (process RSS) | {memory['peak_rss_mib']} MiB |")
    if "peak_gpu_mib" in memory:
        lines.append(f"| peak GPU memory (torch) | {memory['peak_gpu_mib']} MiB |")
    lines += ["", "## Versions", "", "| package | version |", "|---|---|"]
    lines += [f"| {name} | {version} |" for name, version in (summary.get("versions") or {}).items()]
    return "\n".join(lines) + "\n"


def finish(run_dir: Path, summary: dict, log=print) -> None:
    """Write summary.json, curves.png and report.md for a run that has ended (completed or not)."""
    import yaml

    from grpo_ext import compat, plots

    summary["memory"] = peak_memory()
    write_summary(run_dir, summary)
    recipe_file = run_dir / "recipe.yaml"
    run_recipe = (yaml.safe_load(recipe_file.read_text(encoding="utf-8")) if recipe_file.exists() else None) or {}
    records = plots.read_metrics(run_dir / "metrics.jsonl")
    if records:
        beta = compat.effective(run_recipe.get("training") or {}, "beta")
        model = (run_recipe.get("model") or {}).get("name", "")
        plots.draw_curves(records, run_dir / "curves.png", f"{run_dir.name}: {model}", beta=beta)
    (run_dir / "report.md").write_text(report_markdown(run_dir, summary, run_recipe, records), encoding="utf-8")
    log(f"report: {run_dir / 'report.md'}" + (f", curves: {run_dir / 'curves.png'}" if records else ""))
