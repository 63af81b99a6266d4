"""The reward pre-flight: before the first optimizer step, sample the base model on a few training prompts
(``num_generations`` completions each, as training will), score them with every reward, and say in plain
words when GRPO would get no gradient from them.

Per reward: mean, spread, the share of groups whose completions all scored alike (such a group has a zero
advantage and contributes no gradient), None and NaN counts, and seconds per call. The verdicts: the summed
reward gives no group a spread (a warning: step 1 would learn nothing), or too few of them
(``health.preflight_flat_share``, a warning, with one reward as with several); one reward alone is constant or has
no spread while others carry the signal (a note); a reward that returns None or NaN for every sample; rewards
on very different scales; a budget that no sample of most groups ends within (``cut_verdict``: the share of groups
whose samples were all cut at ``max_completion_length`` reaches ``health.clipped_share``). ``verdicts`` is pure
Python; ``sample_and_score`` samples with ``run.sampling``, and ``sample_conversations`` with the trainer's
tool loop for a recipe with tools, where it also says how often the model called a tool, how often a call failed,
and how many results TRL dropped because the conversation would pass ``max_completion_length``; and before any
sample, whether a worked call of ``data.examples`` and its result fit that budget (``budget_verdict``).
"""

import math
import statistics
import time

from grpo_ext.core.text import fmt
from grpo_ext.recipe import Health, Training
from grpo_ext.results import scoring
from grpo_ext.results.watchdog import (
    DEFAULTS,
    LENGTH_REMEDY,
    RESULTS_DROPPED_CAUSE,
    RESULTS_DROPPED_REMEDY,
    TOOLS_FAILING_CAUSE,
    TOOLS_FAILING_REMEDY,
    TOOLS_UNUSED_CAUSE,
    TOOLS_UNUSED_REMEDY,
    Finding,
    dropped_line,
)
from grpo_ext.rewards import api
from grpo_ext.run import launch, rollouts, sampling


def _judged(score) -> bool:
    return score is not None and not (isinstance(score, float) and math.isnan(score))


def _spread(group: list[float]) -> float:
    return max(group) - min(group) if group else 0.0


def reward_stats(scores: list, group: int, seconds: float | None) -> dict:
    """Statistics of one reward's scores, in groups of ``group`` completions per prompt; ``seconds`` per call, None
    where the calls were not timed (TRL made them, in the tool loop)."""
    judged = [s for s in scores if _judged(s)]
    groups = [[s for s in scores[i : i + group] if _judged(s)] for i in range(0, len(scores), group)]
    flat = sum(1 for g in groups if len(g) < 2 or _spread(g) == 0)
    return {
        "samples": len(scores),
        "mean": round(statistics.fmean(judged), 4) if judged else None,
        "std": round(statistics.pstdev(judged), 4) if judged else None,
        "min": min(judged) if judged else None,
        "max": max(judged) if judged else None,
        "zero_spread_groups": round(flat / len(groups), 4) if groups else None,
        "none": sum(s is None for s in scores),
        "nan": sum(isinstance(s, float) and math.isnan(s) for s in scores),
        "seconds_per_call": round(seconds, 4) if seconds is not None else None,
    }


def _summed(per_reward: dict[str, list], weights: list[float]) -> list[float | None]:
    """The weighted sum TRL trains on, per sample (a None score counts as missing, as TRL's nansum does)."""
    columns = list(per_reward.values())
    out = []
    for i in range(len(columns[0])):
        parts = [w * c[i] for c, w in zip(columns, weights, strict=True) if _judged(c[i])]
        out.append(sum(parts) if parts else None)
    return out


def verdicts(
    per_reward: dict[str, list],
    weights: list[float],
    group: int,
    seconds: dict[str, float],
    limits: Health | None = None,
    judges: frozenset[str] = frozenset(),
    partial_credit: dict[str, str] | None = None,
):
    """(stats per reward and for the weighted ``total``, findings at step 0) from each reward's scores. ``judges``:
    the rewards that ask a judge model for a grade (``llm_judge``); one that gives every sample the same grade is
    named as a judge that cannot tell them apart (its rubric, model or grade parsing), not as a strict reward.
    ``partial_credit``: reward name → the reward that gives partial credit towards it, named in the remedy when the
    reward alone gives no gradient (``marks``)."""
    partial_credit = partial_credit or {}
    limits = limits or DEFAULTS
    stats = {name: reward_stats(scores, group, seconds.get(name)) for name, scores in per_reward.items()}
    total = reward_stats(_summed(per_reward, weights), group, None)
    findings: list[Finding] = []

    def say(rule: str, symptom: str, cause: str, remedy: str, severity: str = "warning") -> None:
        findings.append(Finding(0, rule, symptom, cause, remedy, severity))

    for name, s in stats.items():
        n = s["samples"]
        if s["none"] == n:
            say(
                "preflight_none",
                f"{name} returned None for all {n} samples",
                "it scores none of them: a rule reward lacks the data it reads, or a judge or program failed",
                "check its columns and args, and any warning it printed above",
            )
        elif s["nan"]:
            say("preflight_nan", f"{name} returned NaN for {s['nan']} of {n} samples", "NaN reaches the loss", "return a number")
        elif s["zero_spread_groups"] == 1.0:
            shaped = partial_credit.get(name)
            partial = f"a partial-credit reward ({shaped})" if shaped and shaped not in stats else "a partial-credit reward"
            scored = n - s["none"]
            on = f"all {n} samples" if scored == n else f"all {scored} samples it scored ({s['none']} of {n} None)"
            constant = (
                f"scored {s['min']:g} on {on}" if s["min"] == s["max"] else f"scored the same within every group of {group}"
            )
            alone = len(stats) == 1 or (total["zero_spread_groups"] or 0) >= limits.zero_std_share
            if name in judges and s["min"] == s["max"]:
                say(
                    "preflight_no_gradient",
                    f"{name} gave the grade {s['min']:g} to {on}: the judge cannot tell them apart, so GRPO gets no "
                    "gradient from it",
                    "the judge does not grade what the rubric asks: a model too small to judge, a rubric it does not "
                    "follow, or a reply whose grade is read wrong (the first number on the scale)",
                    "check the rubric, the judge model and the grades it writes (grpo-ext rewards score llm_judge --prompt "
                    "P --completion A --completion B shows what it said; completions.jsonl keeps its replies)",
                    "warning" if alone else "note",
                )
                continue
            say(
                "preflight_no_gradient",
                f"{name} {constant}: every group has zero spread, so GRPO gets no gradient from it",
                "the reward is too strict (or too coarse) for what the base model writes",
                f"add {partial}, raise temperature, or make the prompts easier"
                if alone
                else "nothing to fix while the other rewards carry the signal; it counts once the model gets there",
                "warning" if alone else "note",
            )
    flat_share = total["zero_spread_groups"] or 0
    if flat_share >= limits.preflight_flat_share and not any(
        f.rule in ("preflight_no_gradient", "preflight_none") and f.severity == "warning" for f in findings
    ):
        alone = next(iter(stats)) if len(stats) == 1 else None
        shaped = partial_credit.get(alone or "")
        say(
            "preflight_no_gradient",
            f"{'the summed reward' if alone is None else alone} has zero spread in {flat_share:.0%} of the groups: "
            f"little gradient at step 1",
            "the reward scores the completions of most groups alike"
            if alone
            else "every reward scores the completions of a group alike",
            f"add a partial-credit reward{f' ({shaped})' if shaped else ''}, raise temperature or num_generations, "
            f"or make the prompts easier",
        )
    spreads = {name: s["std"] for name, s in stats.items() if s["std"]}
    if len(spreads) > 1 and max(spreads.values()) >= limits.scale_ratio * min(spreads.values()):
        big, small = max(spreads, key=spreads.__getitem__), min(spreads, key=spreads.__getitem__)
        say(
            "preflight_scales",
            f"rewards on very different scales: {big} spreads {spreads[big]:.3g}, {small} {spreads[small]:.3g}",
            f"the summed reward, and so the advantage, follows {big} and hardly sees {small}",
            f"set rewards[i].weight to bring them within a factor of {limits.scale_ratio:g}, or rescale the reward",
        )
    return {"rewards": stats, "total": total}, findings


def cut_verdict(cut: list[bool], group: int, budget: int, limits: Health | None = None) -> tuple[dict, list[Finding]]:
    """(what was cut, findings) from each sample's cut at ``budget`` (in groups of ``group``): a warning when no
    sample ended in ``clipped_share`` or more of the groups, as then no group shows GRPO what ending earns. A base
    model that rambles still ends a few: SmolLM2 ended 9 of 64 pre-flight samples of recipes/digit-lora.yaml (8
    tokens) and 11 of 64 of recipes/arith.yaml (32), no group without one ending in most draws; both recipes learn.

    >>> stats, found = cut_verdict([True] * 16, 8, 48)
    >>> stats["groups_without_end"], found[0].rule
    (2, 'preflight_cut')
    """
    limits = limits or DEFAULTS
    groups = [cut[i : i + group] for i in range(0, len(cut), group)]
    whole = sum(all(g) for g in groups if g)
    stats = {"samples": sum(cut), "of": len(cut), "budget": budget, "groups_without_end": whole, "groups": len(groups)}
    if not groups or whole / len(groups) < limits.clipped_share:
        return stats, []
    return stats, [
        Finding(
            0,
            "preflight_cut",
            f"{sum(cut)} of {len(cut)} samples cut at max_completion_length ({budget}); no sample ended in {whole} of "
            f"{len(groups)} groups",
            "the model writes more than the budget holds before it ends its reply, so no group shows what ending earns",
            LENGTH_REMEDY,
        )
    ]


def budget_verdict(exchanges: list, budget: int) -> list[Finding]:
    """Findings from the worked exchanges of ``data.examples`` (``rollouts.worked_exchanges``) against ``budget``:
    a warning when a call and its result pass it (TRL would drop the result of every call made as the examples make
    them), else when the exchange with its answer does (the answer would be cut). The shipped examples fit:
    recipes/arith-tools.yaml's take 57 tokens through the result and 63 in all of 64, recipes/guess.yaml's 159 and
    166 of 224 (SmolLM2's tokenizer)."""
    worst = max(exchanges, key=lambda e: e.whole, default=None)
    if worst is None or worst.whole <= budget:
        return []
    through = next((t for t in worst.through_results if t > budget), None)
    if through is not None:
        symptom = (
            f"a worked call of data.examples and its result take {through} tokens after the question, more than "
            f"max_completion_length ({budget}): TRL will drop the result of a call made as the examples make it"
        )
    else:
        symptom = (
            f"a worked exchange of data.examples takes {worst.whole} tokens after the question, more than "
            f"max_completion_length ({budget}): its call and result fit, and the answer after them is cut"
        )
    return [
        Finding(
            0,
            "preflight_tool_budget",
            symptom,
            RESULTS_DROPPED_CAUSE,
            f"raise training.max_completion_length to {worst.whole} or more (the worked exchange with its answer), "
            "shorten the tool's output, or make the examples' calls and answers shorter",
        )
    ]


def marks(reward_funcs: list) -> tuple[frozenset[str], dict[str, str]]:
    """(the rewards that are judges, reward name → the reward that gives partial credit towards it), by metric name,
    from what each reward declares (``said``, ``partial_credit``): ``verdicts``' ``judges`` and ``partial_credit``."""
    infos = {fn.__name__: api.describe(fn) for fn in reward_funcs}
    judges = frozenset(name for name, info in infos.items() if info.said is not None)
    return judges, {name: info.partial_credit for name, info in infos.items() if info.partial_credit is not None}


def sample_and_score(
    model,
    tokenizer,
    rows: list[dict],
    reward_funcs: list,
    weights: list[float],
    training: Training,
    s,
    *,
    chat: bool,
    limits: Health,
    shared: bool = False,
):
    """Sample ``num_generations`` completions per row as training would, score each with every reward.

    ``s``: the run's eval settings (seed, precision, batch size), resampled at training's temperature and length
    and with its ``generation_kwargs``. With ``shared``, every process of a run samples its share of the rows and the
    main process scores them all (``run.shares``); the others return None.
    Returns (stats, findings, seconds spent).
    """
    t0 = time.monotonic()
    group = training.effective("num_generations")
    s = sampling.as_training(s, training, group)
    with sampling.random_state_kept():  # step 1 then samples what it would have without the pre-flight
        with sampling.precision(model, s):
            completions, ids = sampling.sample(model, tokenizer, [r["prompt"] for r in rows], s, shared=shared)
        if shared and not launch.is_main():
            return None
        prompts, flat, extra = scoring.reward_inputs(rows, completions, chat=chat, completion_ids=ids)
        per_reward, seconds = {}, {}
        for fn in reward_funcs:
            started = time.monotonic()
            per_reward[fn.__name__] = list(fn(prompts=prompts, completions=flat, **extra))
            seconds[fn.__name__] = time.monotonic() - started
    judges, partial = marks(reward_funcs)
    stats, findings = verdicts(per_reward, weights, group, seconds, limits, judges, partial)
    stops = rollouts.stop_ids(model, tokenizer)
    stats["cut"], cut = cut_verdict([rollouts.cut_short(x, stops) for per in ids for x in per], group, s.max_new_tokens, limits)
    return stats, findings + cut, round(time.monotonic() - t0, 1)


def sample_conversations(
    trainer, rows: list[dict], weights: list[float], training: Training, s, *, limits: Health, shared: bool = False
):
    """The pre-flight of a recipe with tools or an environment: ``num_generations`` conversations per row sampled by
    the trainer with its tool loop, at training's temperature and length (``run.rollouts``), scored as training
    scores them. Besides the reward verdicts: how often the model called a tool, wrote a call that could not be
    read, or got an error back, or had a result dropped, with a warning when it never called one, when most calls
    failed, or when most results were dropped; first, whether the worked examples' calls and results fit the budget.
    With ``shared``, every process of a run plays its share of the rows in step, and the main process judges them
    all; the others return None. Returns (stats, findings, seconds spent)."""
    t0 = time.monotonic()
    group = training.effective("num_generations")
    s = sampling.as_training(s, training, group)
    tokenizer = trainer.processing_class
    worked = {e for row in rows for e in rollouts.worked_exchanges(tokenizer, row["prompt"])}
    with sampling.random_state_kept():
        sampled = sampling.play(trainer, rows, s, shared=shared)  # s.samples is the group: as_training set it
    if shared and not launch.is_main():
        return None
    names = list(sampled.scores)
    judges, partial = marks(getattr(trainer, "reward_funcs", []))
    stats, findings = verdicts(
        sampled.scores, [*weights, *[1.0] * (len(names) - len(weights))], group, {}, limits, judges, partial
    )
    findings += budget_verdict(sorted(worked, key=lambda e: e.start), s.max_new_tokens)
    stats["tools"] = tools = sampled.tool_counts()
    if tools["called"] == 0:
        findings.append(
            Finding(
                0,
                "preflight_tools_unused",
                f"none of the {tools['samples']} samples called a tool"
                + (f" ({tools['unread_call']:.0%} wrote a call that could not be read)" if tools["unread_call"] else ""),
                TOOLS_UNUSED_CAUSE,
                TOOLS_UNUSED_REMEDY,
            )
        )
    elif tools["errors_per_call"] >= limits.tool_failure_share:
        findings.append(
            Finding(
                0,
                "preflight_tool_errors",
                f"{tools['errors_per_call']:.0%} of the tool calls got an error back",
                TOOLS_FAILING_CAUSE,
                TOOLS_FAILING_REMEDY,
            )
        )
    if tools["dropped"] and tools["dropped_per_call"] >= limits.tool_failure_share:
        findings.append(
            Finding(
                0,
                "preflight_results_dropped",
                f"{dropped_line(tools['dropped'], tools['budget'])}, {tools['dropped_per_call']:.0%} of the calls",
                RESULTS_DROPPED_CAUSE,
                RESULTS_DROPPED_REMEDY,
            )
        )
    stats["cut"], cut = cut_verdict(sampled.cut, group, s.max_new_tokens, limits)
    return stats, findings + cut, round(time.monotonic() - t0, 1)


def describe_tools(tools: dict) -> str:
    """``tools: 11 of 32 samples called one (34%), 2 wrote a call that could not be read, 1 got an error back; 1.2
    calls a sample``, and where TRL dropped results, ``; 4 tool results dropped: the conversation would pass
    max_completion_length (48)``."""
    n = tools["samples"]
    dropped = f"; {dropped_line(tools['dropped'], tools.get('budget'))}" if tools.get("dropped") else ""
    return (
        f"tools: {round(tools['called'] * n)} of {n} samples called one ({tools['called']:.0%}), "
        f"{round(tools['unread_call'] * n)} wrote a call that could not be read, {round(tools['error_back'] * n)} got an "
        f"error back; {tools['calls_per_sample']:.3g} calls a sample{dropped}"
    )


def describe(stats: dict) -> str:
    """``digit_exact mean 0.000 std 0.000 (100% of groups without spread, 0.2 ms/call); ...`` for the log line."""
    parts = []
    for name, r in [*stats["rewards"].items(), ("total", stats["total"])]:
        timed = name != "total" and r["seconds_per_call"] is not None
        extra = f", {r['seconds_per_call'] * 1000:.1f} ms/call" if timed else ""
        missing = f", {r['none']} None" if r["none"] else ""
        flat = f"{r['zero_spread_groups']:.0%} of groups without spread"
        parts.append(f"{name} mean {fmt(r['mean'])} std {fmt(r['std'])} ({flat}{missing}{extra})")
    return "; ".join(parts)
