"""The run directory: metrics.jsonl (one line per logged step), progress lines, summary.json."""

import json
import time
from pathlib import Path


def _num(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


class MetricsLog:
    """A transformers TrainerCallback (built lazily so this module imports without transformers).

    Appends each training log to ``metrics.jsonl`` (main process only) and prints one progress line.
    """

    def __new__(cls, path: Path, is_main: bool, log=print):
        from transformers import TrainerCallback

        class _Callback(TrainerCallback):
            def __init__(self):
                self.path, self.is_main, self.log = path, is_main, log
                self.rewards: list[tuple[int, float]] = []
                self.started = None

            def on_train_begin(self, args, state, control, **kwargs):
                self.started = time.monotonic()

            def on_log(self, args, state, control, logs=None, **kwargs):
                if not logs or "reward" not in logs:
                    return
                record = {"step": state.global_step, **{k: _num(v) for k, v in logs.items()}}
                self.rewards.append((state.global_step, record["reward"]))
                if not self.is_main:
                    return
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")
                elapsed = time.monotonic() - self.started
                per_step = elapsed / max(state.global_step, 1)
                left = per_step * max(state.max_steps - state.global_step, 0)
                parts = [f"step {state.global_step}/{state.max_steps}", f"reward {record['reward']:.3f}"]
                parts += [f"{k.split('/')[1]} {v:.3f}" for k, v in record.items() if k.startswith("rewards/") and k.endswith("/mean")]
                if "kl" in record:
                    parts.append(f"kl {record['kl']:.4f}")
                if "completions/mean_length" in record:
                    parts.append(f"len {record['completions/mean_length']:.1f}")
                parts.append(f"{per_step:.1f} s/step, {left:.0f} s left")
                self.log("  ".join(parts))

        return _Callback()


def write_summary(run_dir: Path, summary: dict) -> None:
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def eval_table(before: dict | None, after: dict | None) -> list[str]:
    """Lines of a before/after table: per reward, mean and pass rate."""
    if not before and not after:
        return []
    names = list((after or before)["rewards"])
    lines = [f"{'reward':<24}{'before mean':>12}{'pass':>8}{'after mean':>12}{'pass':>8}"]
    for name in names:
        b = (before or {}).get("rewards", {}).get(name, {})
        a = (after or {}).get("rewards", {}).get(name, {})

        def fmt(v):
            return "-" if v is None else f"{v:.3f}"

        lines.append(f"{name:<24}{fmt(b.get('mean')):>12}{fmt(b.get('pass_rate')):>8}{fmt(a.get('mean')):>12}{fmt(a.get('pass_rate')):>8}")
    return lines
