"""Training health: a watchdog that reads the metrics TRL logs each step and names a run that trains without
learning, with its likely cause and the remedy.

The rules turn the troubleshooting table of the GRPO tutorial into checks (docs/health.md): steps
where no sample got a score (every reward returned None), no learning signal (every completion of a group
scored alike, so the group-relative advantage is zero), a flat reward, entropy collapse, KL rising fast (its
median over a window, not the mean), completions pinned at ``max_completion_length`` (most of them over a window,
or every one of them a few steps in a row), a NaN or infinite loss or gradient, a reward that rises while the
completions grow or while one reward saturates alone (possible reward hacking), a note that a loss near 0 is
normal, and for a recipe with tools, a model that never calls them, whose calls keep failing, or whose tool results
TRL keeps dropping (``tools/dropped_frequency``). Each rule fires once per run. A metric the
installed TRL does not log leaves its rule silent. Pure Python over ``metrics.jsonl`` records, so a run's
watchdog and ``grpo-ext doctor`` agree.
"""

import dataclasses
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

from grpo_ext.core.errors import RunError
from grpo_ext.core.text import fmt, plural
from grpo_ext.recipe import SCHEMA, Health
from grpo_ext.results.plots import reward_function_keys
from grpo_ext.settings import compat

_DEFAULT_VALUES: dict[str, Any] = {key: spec.default for key, spec in SCHEMA["health"].items()}
DEFAULTS = Health(**_DEFAULT_VALUES)  # a health: section left out
LIMITS = {key: spec.default for key, spec in SCHEMA["health"].items() if isinstance(spec.default, (int, float))}


def limits_of(recorded: dict) -> Health:
    """A run's recorded ``health:`` section as the watchdog reads it: its numbers (of the keys in ``LIMITS``), the
    defaults for the rest; a hand-edited run's words are left out."""
    numbers: dict[str, Any] = {
        k: v for k, v in recorded.items() if k in LIMITS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return dataclasses.replace(DEFAULTS, **numbers)


class Unhealthy(RunError):
    """A run stopped by its health checks (``health.preflight: fail`` or ``health.on_problem: stop``)."""


def pass_marks(reward_funcs: list) -> dict[str, float]:
    """Reward name → the score at which a sample passes it, for the rewards that set their own (the recipe's
    ``rewards[i].pass_threshold``, else what the reward declares)."""
    infos = [fn.info for fn in reward_funcs]  # guarded rewards: guard.Guarded
    return {info.name: info.pass_threshold for info in infos if info.pass_threshold is not None}


@dataclass(frozen=True)
class Finding:
    """One symptom at one step: what is seen, the likely cause, and what to do about it."""

    step: int
    rule: str
    symptom: str
    cause: str
    remedy: str
    severity: str = "warning"  # warning: the run is not healthy; note: an explanation, nothing wrong

    def line(self) -> str:
        when = "before step 1" if self.step == 0 else f"at step {self.step}"
        return f"health: {self.severity} {when}: {self.symptom}; likely cause: {self.cause}; remedy: {self.remedy}"

    def to_dict(self) -> dict:
        return asdict(self)


def _num(record: dict, key: str) -> float | None:
    value = record.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _finite(values: Sequence[float | None]) -> TypeGuard[list[float]]:
    return all(v is not None and math.isfinite(v) for v in values)


def _given(values: Sequence[float | None]) -> TypeGuard[list[float]]:
    """Whether every step of a window logged the metric (``None in values`` never is)."""
    return None not in values


def _entropy_bonus() -> str:
    """The installed TRL's direct remedy for a collapse, where it has one: an entropy bonus in the loss."""
    if compat.has_key("entropy_coef"):
        return "; or add an entropy bonus: training.entropy_coef (e.g. 0.01), or use_adaptive_entropy with entropy_target"
    first = compat.first_with("entropy_coef")
    return f"; TRL {first} and later also take an entropy bonus (training.entropy_coef)" if first else ""


def trend(values: list[float]) -> tuple[float, float]:
    """The least-squares slope of ``values`` against their index, and its standard error.

    >>> slope, error = trend([0.0, 1.0, 2.0, 3.0])
    >>> slope, round(error, 9)
    (1.0, 0.0)
    """
    n = len(values)
    mid = (n - 1) / 2
    spread = sum((i - mid) ** 2 for i in range(n))
    mean = statistics.fmean(values)
    slope = sum((i - mid) * (v - mean) for i, v in enumerate(values)) / spread
    residual = sum((v - mean - slope * (i - mid)) ** 2 for i, v in enumerate(values))
    return slope, math.sqrt(residual / (n - 2) / spread)


def _zero_spread(record: dict) -> float | None:
    """Share of groups whose rewards have no spread: TRL's ``frac_reward_zero_std``; a TRL that does not log it
    logs ``reward_std`` (the mean spread of the groups), which is 0 only when every group is flat."""
    share = _num(record, "frac_reward_zero_std")
    if share is None and _num(record, "reward_std") is not None:
        share = 1.0 if _num(record, "reward_std") == 0 else 0.0
    return share


def _length_key(records: list[dict]) -> str:
    return "completions/mean_length" if any("completions/mean_length" in r for r in records) else "completion_length"


def _clip_key(records: list[dict]) -> str:
    return "clip_ratio/region_mean" if any("clip_ratio/region_mean" in r for r in records) else "clip_ratio"


class Watchdog:
    """Feed it each step's metrics record (``update``); it returns the findings that step raised, each once.

    ``limits``: the recipe's ``health`` section (``DEFAULTS`` without one); ``pass_thresholds``: reward name →
    the score at which a sample passes it, so that a batch where every reward is at its pass mark counts as
    solved (all groups agree because all are right) rather than as a run without signal.
    """

    def __init__(self, limits: Health | None = None, pass_thresholds: dict[str, float] | None = None, default_pass: float = 1.0):
        self.limits = limits or DEFAULTS
        self.pass_thresholds = pass_thresholds or {}
        self.default_pass = default_pass
        self.records: list[dict] = []
        self.findings: list[Finding] = []
        self.fired: set[str] = set()
        self.stopped_by: Finding | None = None
        self.seconds = 0.0  # time spent in the live hook, the watchdog's whole cost to a run

    def update(self, record: dict) -> list[Finding]:
        self.records.append(record)
        new = [f for f in self._check() if f.rule not in self.fired]
        self.fired.update(f.rule for f in new)
        self.findings += new
        return new

    def hook(self, log, stop: bool):
        """``progress.MetricsLog``'s ``watch``: each finding printed once; with ``stop``, a warning stops training
        after a checkpoint is saved (``stopped_by`` names it)."""

        def watch(record: dict, control) -> list[dict]:
            started = time.perf_counter()
            new = self.update(record)
            for finding in new:
                log(finding.line())
            warning = next((f for f in new if f.severity == "warning"), None)
            if stop and warning is not None and self.stopped_by is None:
                self.stopped_by = warning
                control.should_save = True
                control.should_training_stop = True
            found = [f.to_dict() for f in new]
            self.seconds += time.perf_counter() - started
            return found

        return watch

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def solved(self, record: dict) -> bool:
        """Every reward function's mean at or above its pass mark: the batch agrees because it is right."""
        keys = reward_function_keys([record])
        means = {name: _num(record, key) for name, key in keys.items()}
        return bool(means) and all(
            m is not None and m >= self.pass_thresholds.get(name, self.default_pass) for name, m in means.items()
        )

    def _last(self, n: int) -> list[dict] | None:
        return self.records[-n:] if len(self.records) >= n else None

    def _check(self) -> list[Finding]:
        rules = (
            self._nonfinite,
            self._unscored,
            self._no_signal,
            self._flat,
            self._not_learning,
            self._pinned,
            self._entropy,
            self._kl,
            self._hacking,
            self._loss_zero,
            self._tools_unused,
            self._tools_failing,
            self._results_dropped,
        )
        return [f for f in (rule() for rule in rules) if f is not None]

    # The rules, each named after the Finding.rule it raises.

    def _nonfinite(self) -> Finding | None:
        record = self.records[-1]
        bad = [k for k in ("loss", "grad_norm") if k in record and not _finite([_num(record, k)])]
        if not bad:
            return None
        return Finding(
            record["step"],
            "nonfinite",
            f"{' and '.join(bad)} is {record[bad[0]]}",
            "a reward returned NaN, a group's reward std of 0 divided by, or log-probabilities overflowing (fp16)",
            "check the rewards for NaN, prefer bf16 to fp16, lower learning_rate, keep max_grad_norm set",
        )

    def _unscored(self) -> Finding | None:
        k = self.limits.unscored_steps
        window = self._last(k)
        keys = reward_function_keys(window or [])
        if not window or not keys:
            return None
        if any(_finite([_num(r, key)]) for r in window for key in keys.values()):  # TRL logs NaN (null) for all-None
            return None
        return Finding(
            window[-1]["step"],
            "unscored",
            f"no sample got a score for {plural(k, 'step')} in a row: {', '.join(keys)} returned None for every completion",
            "each reward raised on every sample and on_error: skip scored it None (reward_errors/NAME in metrics.jsonl), "
            "so no completion is compared with another and the policy learns nothing",
            "fix the reward (its first error was printed as a warning), or set on_error: fail to stop at the first one",
        )

    def _no_signal(self) -> Finding | None:
        k = self.limits.no_signal_steps
        window = self._last(k)
        shares = [_zero_spread(r) for r in window or []]
        if not window or not _given(shares):
            return None
        share = self.limits.zero_std_share
        # A solved step among flat ones does not clear the run: a policy that plays one fixed game wins every game of
        # a batch whose secrets it happens to hit (recipes/guess.yaml seed 2 did on 2 of its 13 flat steps). Only a
        # window solved for the most part is silent.
        unsolved = sum(not self.solved(r) for r in window)
        if not all(z >= share for z in shares) or 2 * unsolved <= k:
            return None
        # a step whose every group was flat may have been skipped (no forward pass, no entropy): the last one logged
        last = next((r for r in reversed(self.records) if _num(r, "entropy") is not None), None)
        entropy = _num(last, "entropy") if last else None
        collapsed = entropy is not None and entropy < self.limits.entropy_floor
        when = "" if last is window[-1] else f" at step {last['step']}" if last else ""
        return Finding(
            window[-1]["step"],
            "no_signal",
            f"{share:.0%} or more of the groups had zero reward spread for {plural(k, 'step')} (frac_reward_zero_std), "
            f"reward {_num(window[-1], 'reward') or 0:.3f}" + (f", entropy {entropy:.3f}{when}" if collapsed else ""),
            (
                "the policy has collapsed to one completion per prompt, so every completion of a group scores the same "
                "and the group-relative advantage and the gradient are zero"
                if collapsed
                else "every completion of a group scores the same, so the group-relative advantage and the gradient are zero"
            ),
            "add a partial-credit reward, raise temperature or num_generations, or make the prompts easier"
            + (", and lower learning_rate" if collapsed else ""),
        )

    def _flat(self) -> Finding | None:
        n = self.limits.flat_steps
        window = self._last(n)
        if not window or any(self.solved(r) for r in window):
            return None
        rewards = [_num(r, "reward") for r in window]
        if not _finite(rewards) or max(rewards) - min(rewards) >= self.limits.flat_reward:
            return None
        entropy = [_num(r, "entropy") for r in window]
        kl = [_num(r, "kl") for r in window]
        still = []
        if _finite(entropy) and max(entropy) - min(entropy) < 0.1 * max(statistics.fmean(entropy), 1e-9):
            still.append("entropy")
        if _finite(kl) and max(kl) - min(kl) < max(0.1 * statistics.fmean(kl), 1e-4):
            still.append("KL")
        if not still:
            return None
        return Finding(
            window[-1]["step"],
            "reward_flat",
            f"reward flat at {statistics.fmean(rewards):.3f} for {n} steps while {' and '.join(still)} stays flat",
            "the policy is not moving: the reward gives too little signal to this model",
            "change the reward (partial credit) or enlarge the group (num_generations)",
        )

    def _not_learning(self) -> Finding | None:
        n = self.limits.trend_steps
        window = self._last(n)
        if not window or "reward_flat" in self.fired or any(self.solved(r) for r in window):
            return None
        rewards = [_num(r, "reward") for r in window]
        if not _finite(rewards):
            return None
        slope, error = trend(rewards)
        z = self.limits.trend_z
        if slope - z * error > 0 or self._risen(rewards[n // 2 :], z):
            return None
        return Finding(
            window[-1]["step"],
            "not_learning",
            f"reward not rising over the last {n} steps: slope {slope:+.4f} a step, {z:g} standard errors "
            f"{slope - z * error:+.4f} to {slope + z * error:+.4f} (reward {statistics.fmean(rewards[: n // 2]):.3f} "
            f"then {statistics.fmean(rewards[n // 2 :]):.3f})",
            "the policy is not moving toward the reward: a learning rate too small to move the weights, a reward this "
            "model rarely reaches, or a run that has stopped improving",
            "check training.learning_rate (a 135M model takes 1e-5 to 1e-4, a 7B about 1e-6), the pre-flight's share "
            "of flat groups, and that the reward can be reached; a run that rose before has plateaued",
        )

    def _risen(self, recent: list[float], z: float) -> bool:
        """The recent rewards stand ``z`` standard errors above the run's first step: the policy moved toward the
        reward and then levelled off. A slope misses this when the rise came in the first step or two: the guessing
        game rose from 0.24 to 0.73 at step 2 and then wandered between 0.68 and 0.93, and its held-out games won went
        from 0.16 to 0.84."""
        first = _num(self.records[0], "reward")
        if first is None or len(recent) < 2 or not _finite(recent):
            return False
        # the first step is one batch, as noisy as any of the recent ones: its noise adds to that of their mean
        noise = statistics.stdev(recent) * math.sqrt(1 + 1 / len(recent))
        return statistics.fmean(recent) - first > z * noise

    def _pinned(self) -> Finding | None:
        n = self.limits.clipped_steps
        window = self._last(n)
        every = self._last(ALL_CUT_STEPS)
        if every and all(_num(r, "completions/clipped_ratio") == 1.0 for r in every) and not any(map(self.solved, every)):
            length = _num(every[-1], _length_key(every))
            return Finding(
                every[-1]["step"],
                "length_pinned",
                f"every completion cut at max_completion_length for {plural(ALL_CUT_STEPS, 'step')} in a row "
                "(completions/clipped_ratio 1.0)" + (f", mean length {length:.1f}" if length is not None else ""),
                "no completion ends within the budget, so no group shows what ending earns: the budget is too short "
                "for the answer, or the model does not end its replies",
                LENGTH_REMEDY,
            )
        if not window or not all("completions/clipped_ratio" in r for r in window) or any(self.solved(r) for r in window):
            return None
        cut = statistics.fmean(_num(r, "completions/clipped_ratio") or 0 for r in window)
        if cut < self.limits.clipped_share:
            return None
        length = _num(window[-1], _length_key(window))
        return Finding(
            window[-1]["step"],
            "length_pinned",
            f"{cut:.0%} of the completions cut at max_completion_length over the last {n} steps"
            + (f" (mean length now {length:.1f})" if length is not None else ""),
            "the model rarely ends its answer, so few groups show what stopping earns",
            LENGTH_REMEDY,
        )

    def _entropy(self) -> Finding | None:
        record = self.records[-1]
        entropy = _num(record, "entropy")
        if entropy is None or entropy >= self.limits.entropy_floor or self.solved(record):
            return None
        if (_num(record, "tools/call_frequency") or 0) >= MOSTLY_CALLS:
            return None  # most tokens are a call's fixed form and its copied result: low entropy there is not a collapse
        return Finding(
            record["step"],
            "entropy_collapse",
            f"entropy {entropy:.3f} nats per token, below {self.limits.entropy_floor} before the task is solved",
            "the policy has stopped exploring (group too small, clipping too tight, or learning rate too high)",
            "raise num_generations, widen epsilon (epsilon_high), raise temperature, or lower learning_rate" + _entropy_bonus(),
        )

    def _kl(self) -> Finding | None:
        n = self.limits.flat_steps
        now = self._last(n)
        if not now:
            return None
        kl = [_num(r, "kl") for r in now]
        if not _finite(kl):
            return None
        median = statistics.median(kl)
        before = self._last(2 * n)
        earlier = statistics.median([_num(r, "kl") or 0 for r in before[:n]]) if before else None
        growing = earlier is not None and median > max(self.limits.kl_growth * earlier, 0.05 * self.limits.kl_max)
        if median <= self.limits.kl_max and not growing:
            return None
        trend = f"from {earlier:.3g} " if growing else ""
        return Finding(
            now[-1]["step"],
            "kl_rising",
            f"KL median over {n} steps {trend}to {median:.3g}"
            + (f" (above {self.limits.kl_max})" if median > self.limits.kl_max else ""),
            "beta too small or learning_rate too high: the policy runs away from the reference model",
            "raise beta, lower learning_rate",
        )

    def _hacking(self) -> Finding | None:
        n = self.limits.flat_steps
        if len(self.records) < 2 * n:
            return None
        first, now = self.records[:n], self.records[-n:]
        r0 = [_num(r, "reward") for r in first]
        r1 = [_num(r, "reward") for r in now]
        if not (_finite(r0) and _finite(r1)) or statistics.fmean(r1) <= statistics.fmean(r0) + self.limits.flat_reward:
            return None
        key = _length_key(self.records)
        l0, l1 = [_num(r, key) for r in first], [_num(r, key) for r in now]
        step = now[-1]["step"]
        if _finite(l0) and _finite(l1) and statistics.fmean(l1) >= self.limits.length_growth * max(statistics.fmean(l0), 1.0):
            return Finding(
                step,
                "reward_hacking",
                f"reward rose while mean completion length grew from {statistics.fmean(l0):.0f} to {statistics.fmean(l1):.0f}",
                "the reward pays for length or padding rather than the task (possible reward hacking)",
                "read sample completions; fix the reward (add overlong_penalty), raise beta for a stronger KL",
            )
        keys = reward_function_keys(self.records)
        if len(keys) < 2:
            return None
        mark = {name: self.pass_thresholds.get(name, self.default_pass) for name in keys}
        alone = [name for name, k in keys.items() if all((_num(r, k) or -math.inf) >= mark[name] for r in now)]
        still = [
            name
            for name, k in keys.items()
            if name not in alone
            and statistics.fmean([_num(r, k) or 0 for r in now])
            <= statistics.fmean([_num(r, k) or 0 for r in first]) + self.limits.flat_reward
        ]
        if not alone or not still:
            return None
        return Finding(
            step,
            "reward_hacking",
            f"{', '.join(alone)} saturated while {', '.join(still)} did not improve",
            "the policy satisfies the easy (format) reward alone (possible reward hacking)",
            "read sample completions; weight the task reward higher, make the format reward need the answer, raise beta",
        )

    def _loss_zero(self) -> Finding | None:
        record = self.records[-1]
        loss, zero_std = _num(record, "loss"), _num(record, "frac_reward_zero_std")
        if loss is None or abs(loss) > 1e-6 or zero_std is None or zero_std >= 1.0:
            return None
        return Finding(
            record["step"],
            "loss_zero",
            f"loss {loss:.2g}",
            "normal in GRPO: advantages are centred within each group, so the loss sits near 0 while the gradient is not 0",
            "nothing to fix; watch the reward, frac_reward_zero_std and grad_norm instead",
            severity="note",
        )

    def _tools_unused(self) -> Finding | None:
        n = self.limits.tool_steps
        window = self._last(n)
        calls = [_num(r, "tools/call_frequency") for r in window or []]
        if not window or None in calls or any(calls) or any(self.solved(r) for r in window):
            return None
        earlier = [_num(r, "tools/call_frequency") or 0 for r in self.records[:-n]]
        if any(earlier):  # it did call, and gave it up: a different cause, a different fix
            return Finding(
                window[-1]["step"],
                "tools_never_called",
                f"no completion called a tool for {plural(n, 'step')} (tools/call_frequency 0), "
                f"after {max(earlier):.0%} of a step's completions did",
                TOOLS_DROPPED_CAUSE,
                TOOLS_DROPPED_REMEDY,
            )
        return Finding(
            window[-1]["step"],
            "tools_never_called",
            f"no completion called a tool for {plural(n, 'step')} (tools/call_frequency 0)",
            TOOLS_UNUSED_CAUSE,
            TOOLS_UNUSED_REMEDY,
        )

    def _tools_failing(self) -> Finding | None:
        n = self.limits.tool_steps
        window = self._last(n)
        failing = [_num(r, "tools/failure_frequency") for r in window or []]
        called = [_num(r, "tools/call_frequency") or 0 for r in window or []]
        if not window or not _given(failing) or not any(called):
            return None
        share = statistics.fmean(f for f, c in zip(failing, called, strict=True) if c)
        if share < self.limits.tool_failure_share:
            return None
        return Finding(
            window[-1]["step"],
            "tool_calls_failing",
            f"{share:.0%} of the tool calls failed over the last {plural(n, 'step')} (tools/failure_frequency)",
            TOOLS_FAILING_CAUSE,
            TOOLS_FAILING_REMEDY,
        )

    def _results_dropped(self) -> Finding | None:
        # from the first step, not once the window is full: a budget that drops results drops them at once
        window = self.records[-self.limits.tool_steps :]
        shares = [_num(r, "tools/dropped_frequency") for r in window]
        counts = [_num(r, "tools/dropped_results") or 0 for r in window]
        called = [_num(r, "tools/call_frequency") or 0 for r in window]
        if not _given(shares) or not any(counts):
            return None
        share = statistics.fmean([f for f, c in zip(shares, called, strict=True) if c] or shares)
        if share < self.limits.tool_failure_share:
            return None
        return Finding(
            window[-1]["step"],
            "tool_results_dropped",
            f"{plural(round(sum(counts)), 'tool result')} dropped over the last {plural(len(window), 'step')}, {share:.0%} "
            "of the calls (tools/dropped_frequency): the conversation would pass max_completion_length",
            RESULTS_DROPPED_CAUSE,
            RESULTS_DROPPED_REMEDY,
        )


# Tool calls per completion from which the entropy rule stands aside: arith-tools seeds 0 and 1 called on every
# completion from step 2 or 3 and reached 0.96 and 0.91, at 0.009 to 0.04 nats per token, under the 0.05 floor the
# digit task calibrated; seed 2, which stopped calling, was still flagged (0.039 at step 17, its pass rate 0.49).
# Entropy cannot tell a tool run's collapse from its learning: the guessing game's seed 1 (games won 0.14 -> 0.94)
# sank to 0.008 as seed 2 (0.09 -> 0.31) sank to 0.012. What tells them apart is that seed 2's groups lost all
# spread from step 8; the no-signal rule names that.
MOSTLY_CALLS = 0.5

# Steps in a row with every completion cut at the budget before the length rule speaks without waiting for its
# window: a budget that holds no answer cuts every completion from step 1 (a tool run at 48 tokens for a 38-token call
# and its 23-token result). A run that learns to end starts with some completions ending: SmolLM2 ended 9 of 64
# pre-flight samples of recipes/digit-lora.yaml at 8 tokens and 11 of 64 of recipes/arith.yaml at 32; were each sample
# cut that often, a step of 16 would be cut whole 1 time in 11 and 1 in 20, three in a row 1 in 1,400 or fewer. The
# shipped recipes/digit.yaml (end boost) ended 59 of 64, and recipes/guess.yaml's seed 0 cut at most 0.875 of a step.
ALL_CUT_STEPS = 3
LENGTH_REMEDY = (
    "boost the end of the reply for the first steps (explore.end_boost: 1.3), reward ending the answer "
    "(a stricter format reward, overlong_penalty), or raise max_completion_length if answers need room"
)
RESULTS_DROPPED_CAUSE = (
    "max_completion_length counts the whole conversation after the prompt, the tools' results included: TRL drops a "
    "result that would pass it and ends the sample on the call, so the model never reads it (and TRL counts the call "
    "as one that worked)"
)
RESULTS_DROPPED_REMEDY = (
    "raise training.max_completion_length to hold each call, its result and the answer, shorten the tool's output, "
    "or lower max_tool_calling_iterations"
)

# what the watchdog and the pre-flight say of a model that does not call its tools, or calls them wrongly
TOOLS_UNUSED_CAUSE = "the model has not seen a call it could copy, or its chat template does not show it the tools"
TOOLS_UNUSED_REMEDY = (
    "show it worked calls (data.examples, docs/tools.md), check the tools it sees (--dry-run) and what it writes "
    "(grpo-ext doctor RUN --samples), or start from a model trained to call tools"
)
TOOLS_DROPPED_CAUSE = (
    "its first calls failed or did no better than answers without the tool, so within their groups they lost out"
)
TOOLS_DROPPED_REMEDY = (
    "reward a call that works a little beside the task's reward (rewards: tool_success with weight 0.2), make the "
    "examples' calls easy to copy, or lower learning_rate"
)
TOOLS_FAILING_CAUSE = "the model calls tools with unknown names or arguments of the wrong name or kind, or the tool raises"
TOOLS_FAILING_REMEDY = (
    "read the calls and their errors (grpo-ext doctor RUN --samples), make the tool's docstring and the examples' "
    "calls show its arguments, and have the tool answer bad input with a message rather than raise"
)


def dropped_line(count: float, budget: int | None) -> str:
    """``4 tool results dropped: the conversation would pass max_completion_length (48)``, for every place that counts
    them (the pre-flight, the eval, the report, the doctor)."""
    return f"{plural(round(count), 'tool result')} dropped: the conversation would pass max_completion_length" + (
        f" ({budget})" if budget is not None else ""
    )


def replay(records: list[dict], limits: Health | None = None, pass_thresholds: dict[str, float] | None = None) -> Watchdog:
    """A watchdog fed a whole run's records, in order: what the live watchdog found, found again."""
    dog = Watchdog(limits, pass_thresholds)
    for record in records:
        dog.update(record)
    return dog


def verdict(findings: list[Finding], preflight: dict | None = None, seconds: float | None = None) -> dict:
    """summary.json's ``health``: the pre-flight, the watchdog's findings, healthy or not (any warning), and the
    seconds the live watchdog took (``watchdog_seconds``, when it ran)."""
    warnings = [f for f in findings if f.severity == "warning"]
    warnings += [f for f in (preflight or {}).get("findings", []) if f["severity"] == "warning"]
    out: dict[str, Any] = {"status": "unhealthy" if warnings else "healthy", "findings": [f.to_dict() for f in findings]}
    if seconds is not None:
        out["watchdog_seconds"] = round(seconds, 6)
    return ({"preflight": preflight} if preflight else {}) | out


def markdown(summary_health: dict | None) -> list[str]:
    """report.md's Health section: the pre-flight per reward, then each finding with its remedy."""
    if not summary_health:
        return []
    lines = ["", "## Health", "", f"**{summary_health.get('status', '?')}**", ""]
    pre = summary_health.get("preflight")
    if pre:
        lines += [
            f"Reward pre-flight on the base model before step 1 ({pre['total']['samples']} samples, {pre['seconds']} s):",
            "",
            "| reward | mean | std | groups without spread | None | s/call |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, r in [*pre["rewards"].items(), ("total (weighted)", {**pre["total"], "seconds_per_call": None})]:
            lines.append(
                f"| {name} | {fmt(r['mean'])} | {fmt(r['std'])} | {r['zero_spread_groups']:.0%} | {r['none']} | "
                f"{fmt(r['seconds_per_call'], 4)} |"
            )
        lines.append("")
        tools = pre.get("tools")
        if tools:
            dropped = f"; {dropped_line(tools['dropped'], tools.get('budget'))}" if tools.get("dropped") else ""
            lines += [
                f"Tools in the pre-flight: {tools['called']:.0%} of the samples called one, {tools['unread_call']:.0%} wrote "
                f"a call that could not be read, {tools['error_back']:.0%} got an error back{dropped}.",
                "",
            ]
        cut = pre.get("cut")
        if cut and cut["samples"]:
            lines += [
                f"Cut at max_completion_length ({cut['budget']}) in the pre-flight: {cut['samples']} of {cut['of']} samples; "
                f"no sample ended in {cut['groups_without_end']} of {cut['groups']} groups.",
                "",
            ]
    found = [*(pre or {}).get("findings", []), *summary_health.get("findings", [])]
    if not found:
        lines.append("No finding: every group had a reward spread when it needed one, and no rule fired.")
    for f in found:
        lines.append(f"- {Finding(**f).line().removeprefix('health: ')}")
    return lines
