"""What the model wrote while it trained: ``completions.jsonl`` in the run directory, and reading it back.

Every ``logging.completions_steps`` steps (null: with each metrics line, every ``training.logging_steps``) the
main process appends one JSON line per completion of the batch TRL sampled last::

    {"step": 4, "prompt": "Reply with one digit.", "completion": "7", "rewards": {"digit_exact": 1.0}, "advantage": 0.87}

``rewards`` holds each reward's score under its metric name (None where it scored none), ``advantage`` the
advantage the completion was trained with. A completion with tool calls is written as its conversation, each call
as ``→ tool(arguments)`` and each result as ``← result`` (``rollouts.transcript``). GRPOTrainer keeps that batch
for its own printing; it is read after the step (``trl_internals.sampled``), so nothing in TRL's loop is wrapped, and a TRL
that keeps none gets no file and one notice. A batch trained on over several steps (``steps_per_generation``) is
written once.

A recipe with a judge model (``llm_judge``) adds ``replies``: what the judge wrote for each completion, under the
judge's metric name (``{"llm_judge": "7"}``; None where its request failed, or, with several processes, where
another process asked it).

The file stops before a line would take it past ``logging.completions_max_mb``: its last line then says so
(``{"capped": true, ...}``) and one notice is printed. A resumed run appends: the steps after the checkpoint
that the stopped run had already logged appear twice, its lines first.
"""

import json
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ext.recipe import Logging
from grpo_ext.rewards.api import completion_text, describe, prompt_text
from grpo_ext.run import rollouts, rundir, trl_internals
from grpo_ext.settings import compat

FILE = "completions.jsonl"
MB = 1_000_000


def _prompt(prompt) -> str:
    """A prompt as plain text; chat messages each after its role when there are several, so that a system prompt
    reads apart from the question."""
    return prompt_text(prompt, roles=isinstance(prompt, list) and len(prompt) > 1)


def _score(value) -> float | None:
    """A score as JSON holds it: to 7 significant digits, what TRL's float32 tensors hold (0.2, not
    0.20000000298023224), and None for a reward that scored none (NaN there)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return float(f"{value:.7g}") if math.isfinite(value) else None


def replies(reward_funcs: list, batch: dict) -> dict[str, list[str | None]]:
    """What each judge among ``reward_funcs`` (a reward that declares ``said``) replied to each completion of ``batch``,
    under its metric name."""
    found = {fn.__name__: describe(fn).said for fn in reward_funcs}
    return {
        name: [said(p, c) for p, c in zip(batch["prompt"], batch["completion"], strict=True)]
        for name, said in found.items()
        if said is not None
    }


def lines(step: int, batch: dict, said: dict[str, list[str | None]] | None = None) -> list[bytes]:
    """The JSON lines of one sampled batch (``trl_internals.sampled``), as they are appended; ``said``: each judge's replies
    (``replies``), written beside the scores."""
    out = []
    for i, (prompt, completion) in enumerate(zip(batch["prompt"], batch["completion"], strict=True)):
        record = {
            "step": step,
            "prompt": _prompt(prompt),
            "completion": rollouts.transcript(completion) if rollouts.has_tool_turns(completion) else completion_text(completion),
            "rewards": {name: _score(scores[i]) for name, scores in batch["rewards"].items()},
            "advantage": _score(batch["advantages"][i]),
        }
        if said:
            record["replies"] = {name: texts[i] for name, texts in said.items()}
        out.append((json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode())
    return out


def _last_line(path: Path) -> tuple[int, bool, dict | None]:
    """(size in bytes, whether the file ends in a line cut short, its last line when that says the file was capped)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(size - 4096, 0))  # a capped line is short; a longer last line is a completion's
            tail = fh.read()
    except FileNotFoundError:
        return 0, False, None
    cut = bool(tail) and not tail.endswith(b"\n")
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        record = json.loads(last)
    except ValueError:
        record = None
    return size, cut, record if is_capped(record) and not cut else None


def writer(settings: Logging, run_dir: Path, log, trainer):
    """A TrainerCallback that appends the sampled completions to ``run_dir/completions.jsonl`` (main process only).

    ``settings`` is the recipe's ``logging`` section; ``trainer`` returns the GRPOTrainer, which is built after its
    callbacks are; ``log`` prints a notice (the cap reached, or a TRL that keeps no samples)."""
    from transformers import TrainerCallback

    path = Path(run_dir) / FILE
    every, cap = settings.completions_steps, int(settings.completions_max_mb * MB)

    class _Completions(TrainerCallback):
        def __init__(self):
            self.on = every != 0
            self.size = 0
            self.written = None  # the batch written last, so that one sampled for several steps goes in once
            self.capped = None  # the closing line the file already ends with (a run resumed after its cap)
            self.recorded = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.on = self.on and state.is_world_process_zero
            if not self.on:
                return
            self.size, cut, self.capped = _last_line(path)
            if cut:  # a killed run's last line stays as it is, cut short, and the next one starts on its own
                self._append([b"\n"])

        def on_step_end(self, args, state, control, **kwargs):
            if every and state.global_step % every == 0:
                self._log(state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if every is None and logs and "reward" in logs:
                self._log(state.global_step)

        def _append(self, chunks: list[bytes]) -> None:
            if not chunks:
                return
            if not self.recorded:  # in the run's marker before the file is made
                rundir.record(path.parent, path.name)
                self.recorded = True
            with open(path, "ab") as fh:
                fh.writelines(chunks)
            self.size += sum(map(len, chunks))
            self.capped = None

        def _log(self, step: int) -> None:
            if not self.on:
                return
            batch = trl_internals.sampled(trainer())
            if batch is None:
                self.on = False
                log(f"completions: trl {compat.trl_version()} keeps no sampled completions on its trainer; {FILE} not written")
                return
            seen = [(completion_text(c), _score(a)) for c, a in zip(batch["completion"], batch["advantages"], strict=True)]
            if not seen or seen == self.written:
                return
            self.written = seen
            chunks: list[bytes] = []
            room = cap - self.size
            for line in lines(step, batch, replies(getattr(trainer(), "reward_funcs", []), batch)):
                if len(line) > room:
                    self._append(chunks)
                    self._close(step)
                    return
                chunks.append(line)
                room -= len(line)
            self._append(chunks)

        def _close(self, step: int) -> None:
            self.on = False
            mb = settings.completions_max_mb
            if self.capped is None:
                closing = {"capped": True, "step": step, "max_mb": mb}
                self._append([(json.dumps(closing) + "\n").encode()])
            log(
                f"completions: {FILE} reached logging.completions_max_mb ({mb} MB) at step {step}; later completions "
                f"are not logged (raise it, or log less often with logging.completions_steps)"
            )

    return _Completions()


def is_capped(record) -> bool:
    return isinstance(record, dict) and record.get("capped") is True


def is_completion(record) -> bool:
    """A line of one completion: its step, prompt and completion, and its rewards by name."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("step"), int)
        and isinstance(record.get("prompt"), str)
        and isinstance(record.get("completion"), str)
        and isinstance(record.get("rewards"), dict)
    )


@dataclass
class Logged:
    """What ``read`` found in a completions.jsonl."""

    last: list[dict] = field(default_factory=list)  # the last completions asked for, oldest first
    count: int = 0  # completion lines in the file
    damaged: int = 0  # lines that are not one (not JSON, or not a completion), the last one cut short included
    cut_short: bool = False  # the last line ends without a newline and is not JSON: a run killed while writing it
    capped: dict | None = None  # the closing line, when the file ends at its cap


def read(path: Path, last: int = 5) -> Logged:
    """The last ``last`` completions of a completions.jsonl, read line by line (bytes that are not UTF-8 read as
    replacement characters); a damaged line is counted and skipped. OSError when the file cannot be read."""
    found = Logged()
    tail: deque[dict] = deque(maxlen=max(last, 0))
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                record = json.loads(raw.decode("utf-8", errors="replace"))
            except ValueError:
                found.damaged += 1
                found.cut_short = not raw.endswith(b"\n")
                continue
            found.cut_short = False
            if is_capped(record):
                found.capped = record
                continue
            if not is_completion(record):
                found.damaged += 1
                continue
            found.count += 1
            found.capped = None  # appended after a cap: a resume that raised it
            tail.append(record)
    found.last = list(tail)
    return found
