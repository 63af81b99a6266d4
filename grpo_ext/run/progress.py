"""While a run trains: each step's metrics appended to metrics.jsonl, and the progress a person watches
(a bar on a terminal, one line per step elsewhere)."""

import json
import sys
import time
from pathlib import Path

from grpo_ext.core import console
from grpo_ext.core.text import fmt
from grpo_ext.run import rundir


def _num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def step_stats(record: dict, each_reward: bool = True) -> str:
    """``reward 0.812  digit_exact 0.750  kl 0.0012  len 2.1`` for one metrics record; a reward that scored samples
    None (not judged) says how many: ``math_accuracy 0.750 (2 None)``; tool results TRL dropped, how many:
    ``4 tool results dropped``."""
    parts = [f"reward {fmt(record.get('reward'))}"]  # a reward that scored no sample of the step logs None
    if each_reward:
        for key, value in record.items():
            if key.startswith("rewards/") and key.endswith("/mean"):
                name = key.split("/")[1]
                unscored = record.get(f"reward_none/{name}")
                unscored = f" ({unscored:g} None)" if isinstance(unscored, (int, float)) and unscored > 0 else ""
                parts.append(f"{name} {fmt(value)}{unscored}")
    if isinstance(record.get("kl"), float):
        parts.append(f"kl {record['kl']:.4f}")
    if isinstance(record.get("completions/mean_length"), float):
        parts.append(f"len {record['completions/mean_length']:.1f}")
    if isinstance(record.get("groups/dropped"), (int, float)) and record["groups/dropped"] > 0:
        parts.append(
            f"dropped {record['groups/dropped']:.0%} (+{record.get('groups/extra_seconds', 0):.0f} s)"
        )  # flat groups resampled
    if isinstance(record.get("skipped_rows"), (int, float)) and record["skipped_rows"] > 0:
        parts.append(f"skipped {record['skipped_rows']:.0%}")  # rows left out of the loss: zero advantage
    dropped = record.get("tools/dropped_results")
    if isinstance(dropped, (int, float)) and dropped > 0:  # TRL rolled them back: the conversation would pass the budget
        parts.append(f"{dropped:g} tool result{'' if dropped == 1 else 's'} dropped")
    return "  ".join(parts)


class LineProgress:
    """One line per logged step: readable in CI logs and files, where a redrawn bar is not."""

    def __init__(self, log):
        self.log = log

    def update(self, step: int, total: int, record: dict) -> None:
        per_step = record["train_seconds"] / max(step, 1)  # every step so far, those before a resume too
        left = per_step * max(total - step, 0)
        self.log(f"step {step}/{total}  {step_stats(record)}  {per_step:.1f} s/step, {left:.0f} s left")

    def stop(self) -> None:
        pass


class BarProgress:
    """A single rich progress bar on a terminal; log lines printed meanwhile scroll above it."""

    def __init__(self, total: int, console=None, done: int = 0):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("step"),
            MofNCompleteColumn(),
            BarColumn(bar_width=16),
            TextColumn("{task.fields[stats]}"),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
        )
        self.task = self.bar.add_task("train", total=total, completed=done, stats="")  # a resume starts part-way
        self.bar.start()

    def update(self, step: int, total: int, record: dict) -> None:
        self.bar.update(self.task, completed=step, total=total, stats=step_stats(record, each_reward=False))

    def stop(self) -> None:
        self.bar.stop()


class MetricsLog:
    """A transformers TrainerCallback (built lazily so this module imports without transformers).

    Appends each training log to ``metrics.jsonl`` (main process only) and shows progress: a bar
    when stderr is a terminal, else one line per step. ``live`` forces either. ``watch(record, control)``,
    when given, sees each record first; what it returns is kept in the record under ``health``. Each record
    holds ``train_seconds``: the training time up to its step, counting ``trained_before`` (the seconds a
    resumed run had trained up to its checkpoint); ``train_seconds()`` is the same up to now.
    """

    def __new__(
        cls, path: Path, is_main: bool, log=console.say, live: bool | None = None, console=None, watch=None, trained_before=0.0
    ):
        from transformers import TrainerCallback

        class _Callback(TrainerCallback):
            def __init__(self):
                self.path, self.is_main, self.log = path, is_main, log
                self.live = sys.stderr.isatty() if live is None else live
                self.rewards: list[tuple[int, float]] = []
                self.progress = None
                self.started: float | None = None
                self.recorded = False  # metrics.jsonl is in the run's marker

            def train_seconds(self) -> float:
                return trained_before + (time.monotonic() - self.started if self.started is not None else 0.0)

            def on_train_begin(self, args, state, control, **kwargs):
                self.started = time.monotonic()
                if self.is_main:
                    live = self.live
                    self.progress = BarProgress(state.max_steps, console, state.global_step) if live else LineProgress(self.log)

            def on_log(self, args, state, control, logs=None, **kwargs):
                if not logs or "reward" not in logs:
                    return
                record = {"step": state.global_step, **{k: _num(v) for k, v in logs.items()}}
                record["train_seconds"] = round(self.train_seconds(), 3)
                found = watch(record, control) if watch is not None else None  # every process, so all stop alike
                if found:
                    record["health"] = found
                self.rewards.append((state.global_step, record["reward"]))
                if not self.is_main:
                    return
                if not self.recorded:  # before the file is made: a kill leaves nothing of the run's unrecorded
                    rundir.record(self.path.parent, self.path.name)
                    self.recorded = True
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")
                if self.progress is not None:
                    self.progress.update(state.global_step, state.max_steps, record)

            def on_train_end(self, args, state, control, **kwargs):
                if self.progress is not None:
                    self.progress.stop()
                    self.progress = None

        return _Callback()
