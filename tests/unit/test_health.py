"""Training health: every watchdog rule driven by synthetic metric streams (fires when it should, silent when it
should not), every pre-flight verdict from scripted rewards, and the doctor on run directories (tiny runs that
the pre-flight and the watchdog stop: tests/integration/test_health_tiny_runs.py)."""

import dataclasses
import json
import math

import pytest
import yaml

from grpo_ext.recipe import Training
from grpo_ext.results import preflight, watchdog
from grpo_ext.rewards.digit import digit_exact
from grpo_ext.verbs import doctor


def stream(n: int, **metrics) -> list[dict]:
    """``n`` metrics records; a metric is a constant, a list (one value per step) or a function of the step."""
    out = []
    for step in range(1, n + 1):
        record = {"step": step}
        for key, value in metrics.items():
            key = key.replace("__", "/")
            record[key] = value(step) if callable(value) else value[step - 1] if isinstance(value, list) else value
        out.append(record)
    return out


FAILING = {"reward": 0.5, "rewards__digit_exact__mean": 0.0, "rewards__digit_shaped__mean": 0.5, "loss": 0.01}
MOVING = {**FAILING, "reward": lambda s: 0.1 * s}  # a reward that is not flat, for the rules that do not read it
SOLVED = {"reward": 2.0, "rewards__digit_exact__mean": 1.0, "rewards__digit_shaped__mean": 1.0, "loss": 0.0}

# recipes/digit.yaml runs measured on TRL 1.16 (metrics.jsonl): training.learning_rate=1.0e-9, and digit-qlora.yaml
LR9_REWARD = [0.025, 0.025, 0.083, 0.159, 0.05, 0.038, 0.074, 0.038, 0.083, 0.05, 0.134, 0.132, 0.232, 0.1, 0.062, 0.094]
LR9_ENTROPY = [2.887, 3.139, 3.003, 3.521, 3.083, 3.588, 3.537, 2.905, 2.804, 3.261, 3.147, 3.076, 3.05, 3.008, 3.633, 3.021]
LR9_MEANS = {
    "rewards__digit_exact__mean": [0.0, 0.0, 0.0, 0.062, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.062, 0.0, 0.0, 0.0],
    "rewards__digit_shaped__mean": [
        0.025,
        0.025,
        0.083,
        0.096,
        0.05,
        0.038,
        0.074,
        0.038,
        0.083,
        0.05,
        0.134,
        0.132,
        0.17,
        0.1,
        0.062,
        0.094,
    ],
}
# recipes/guess.yaml, seed 2 (metrics.jsonl): the policy settled on one fixed game by step 8; from then on every group
# scored alike, and a step whose two secrets the fixed game happened to hit was won in full (steps 10 and 11). Skipped
# steps (no group with spread) log no entropy.
GUESS2_REWARD = [0.238, 0.715, 0.844, 0.578, 0.477, 0.664, 0.961, 0.719, 0.719, 1.0, 1.0, 0.406, 0.688, 0.637, 0.375]
GUESS2_FLAT = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0]
GUESS2_ENTROPY = [0.288, 0.071, 0.048, 0.076, 0.025, 0.016, 0.012, None, None, None, None, None, None, 0.01, None]
GUESS2_CALLS = [1.312, 3.75, 4.0, 3.812, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.938, 4.0]
GUESS2 = {
    "reward": GUESS2_REWARD,
    "rewards__GuessNumber__mean": GUESS2_REWARD,
    "frac_reward_zero_std": GUESS2_FLAT,
    "entropy": GUESS2_ENTROPY,
    "tools__call_frequency": GUESS2_CALLS,
}
# recipes/guess.yaml, seed 0, the first 16 steps (metrics.jsonl)
GUESS_REWARD = [0.242, 0.727, 0.742, 0.766, 0.695, 0.93, 0.738, 0.699, 0.93, 0.734, 0.805, 0.859, 0.926, 0.93, 0.824, 0.684]
GUESS_ENTROPY = [0.359, 0.057, 0.059, 0.064, 0.095, 0.055, 0.045, 0.042, 0.058, 0.046, 0.036, 0.037, 0.032, 0.026, 0.031, 0.077]
GUESS_CLIPPED = [0.312, 0.75, 0.562, 0.312, 0.625, 0.375, 0.688, 0.875, 0.625, 0.625, 0.75, 0.25, 0.125, 0.125, 0.312, 0.562]
GUESS_CALLS = [1.062, 3.75, 3.25, 2.688, 2.875, 3.0, 3.688, 3.812, 3.625, 3.375, 3.812, 3.125, 2.062, 3.125, 3.062, 3.375]
QLORA_REWARD = [0.05, 0.1, 0.12, 0.038, 0.129, 0.025, 0.175, 0.095, 0.045, 0.087, 0.192, 0.523, 0.529, 1.144, 1.731, 1.349]
QLORA_ENTROPY = [3.245, 2.895, 3.0, 2.996, 2.7, 3.292, 2.801, 2.584, 3.19, 3.166, 2.864, 2.377, 2.002, 1.432, 1.677, 1.374]
QLORA_MEANS = {
    "rewards__digit_exact__mean": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.062, 0.0, 0.0, 0.0, 0.0, 0.188, 0.062, 0.438, 0.812, 0.562],
    "rewards__digit_shaped__mean": [
        0.05,
        0.1,
        0.12,
        0.038,
        0.129,
        0.025,
        0.113,
        0.095,
        0.045,
        0.088,
        0.192,
        0.335,
        0.466,
        0.706,
        0.918,
        0.787,
    ],
}

UNSCORED = {"reward": None, "reward_std": None, "frac_reward_zero_std": 0.0, "rewards__judge__mean": None, "loss": 0.01}

WATCHDOG_CASES = [
    # every reward None on every sample for 3 steps (TRL logs null means): no sample scored, at step 3
    (stream(3, **UNSCORED), [("unscored", 3)]),
    # the same as NaN, an older TRL's reward 0.0 beside it
    (stream(3, **{**UNSCORED, "reward": 0.0, "rewards__judge__mean": math.nan}), [("unscored", 3)]),
    # two unscored steps, then one scored: below unscored_steps, silent
    (stream(3, **{**UNSCORED, "rewards__judge__mean": [None, None, 0.5], "reward": [None, None, 0.5]}), []),
    # one reward None everywhere, the other scores: the samples have a score, silent
    (stream(3, **{**UNSCORED, "rewards__len__mean": 0.3, "reward": 0.3}), []),
    # every group flat for 6 steps, not solved: no learning signal at step 6
    (stream(6, frac_reward_zero_std=1.0, **FAILING), [("no_signal", 6)]),
    # every group flat because every completion is right: solved, silent
    (stream(12, frac_reward_zero_std=1.0, entropy=0.3, **SOLVED), []),
    # flat groups for 5 steps only: below no_signal_steps, silent
    (stream(5, frac_reward_zero_std=1.0, **FAILING), []),
    # half the groups still have a spread: silent
    (stream(12, frac_reward_zero_std=0.5, entropy=lambda s: 3.0 - 0.2 * s, **FAILING), []),
    # a TRL without frac_reward_zero_std: reward_std 0 means every group is flat
    (stream(6, reward_std=0.0, reward=0.0, **{"rewards/digit_exact": 0.0}), [("no_signal", 6)]),
    # reward flat within 0.05 for 8 steps while entropy stays flat too
    (
        stream(8, frac_reward_zero_std=0.2, entropy=1.0, **{**FAILING, "reward": lambda s: 0.5 + 0.005 * (s % 2)}),
        [("reward_flat", 8)],
    ),
    # reward flat but entropy falling: the policy moves, silent
    (stream(8, frac_reward_zero_std=0.2, entropy=lambda s: 3.0 - 0.3 * s, **FAILING), []),
    # completions cut at the length limit, 0.875 and 1.0 in turn (mean 0.94 over 8 steps; recipes/digit.yaml seed 3)
    (
        stream(
            8, **{"completions/clipped_ratio": lambda s: 1.0 if s % 2 else 0.875, "entropy": lambda s: 3 - 0.3 * s}, **FAILING
        ),
        [("length_pinned", 8)],
    ),
    # 15 of 16 cut for 7 steps, then most completions end (mean 0.83 over 8 steps, then less): silent
    (
        stream(
            10, **{"completions/clipped_ratio": lambda s: 0.9375 if s <= 7 else 0.1, "entropy": lambda s: 3 - 0.2 * s}, **FAILING
        ),
        [],
    ),
    # every completion cut from step 1 (a budget that holds no answer, in a run shorter than clipped_steps): at step 3
    (stream(5, **{"completions/clipped_ratio": 1.0, "entropy": lambda s: 3 - 0.3 * s}, **FAILING), [("length_pinned", 3)]),
    # every completion cut for 2 steps, then one in 16 ends: silent (a base model that rambles ends a few)
    (stream(6, **{"completions/clipped_ratio": [1.0, 1.0, 0.9375, 1.0, 1.0, 0.9375], "entropy": 2.0}, **MOVING), []),
    # every completion cut, and every reward at its pass mark (the answer comes before the cut): solved, silent
    (stream(4, **{"completions/clipped_ratio": 1.0, "entropy": 1.0}, **SOLVED), []),
    # entropy below the floor before the task is solved
    (stream(3, entropy=[1.0, 0.5, 0.01], **FAILING), [("entropy_collapse", 3)]),
    # entropy near 0 once solved: silent
    (stream(3, entropy=0.01, **SOLVED), []),
    # KL median above kl_max over 8 steps
    (stream(8, kl=2.0, entropy=lambda s: 3 - 0.3 * s, **MOVING), [("kl_rising", 8)]),
    # KL median grows from 0.01 to 0.2 (x20) between two windows of 8 steps
    (stream(16, kl=lambda s: 0.01 if s <= 8 else 0.2, entropy=lambda s: 3 - 0.1 * s, **MOVING), [("kl_rising", 16)]),
    # one KL spike among small values: the mean would jump, the median does not; silent
    (stream(8, kl=[0.01] * 7 + [50.0], entropy=lambda s: 3 - 0.3 * s, **MOVING), []),
    # NaN loss at step 3, named at step 3
    (stream(3, entropy=lambda s: 3 - 0.5 * s, **{**FAILING, "loss": [0.1, 0.1, math.nan]}), [("nonfinite", 3)]),
    # infinite grad norm
    (stream(2, grad_norm=[1.0, math.inf], entropy=[3.0, 2.5], **FAILING), [("nonfinite", 2)]),
    # reward rises while the completions grow from 18 to 50 tokens: possible reward hacking
    (
        stream(
            16,
            entropy=lambda s: 3 - 0.1 * s,
            completions__mean_length=lambda s: 4 * s,
            **{**FAILING, "reward": lambda s: 0.05 * s},
        ),
        [("reward_hacking", 16)],
    ),
    # reward rises while the format reward saturates alone and accuracy stays flat
    (
        stream(
            16,
            entropy=lambda s: 3 - 0.1 * s,
            reward=lambda s: 0.1 * min(s, 10),
            **{"rewards/format/mean": lambda s: min(1.0, 0.15 * s), "rewards/accuracy/mean": 0.1},
        ),
        [("reward_hacking", 16)],
    ),
    # both rewards rise to their pass mark together: learning, not hacking; silent
    (
        stream(
            16,
            entropy=lambda s: 3 - 0.1 * s,
            reward=lambda s: min(2.0, 0.2 * s),
            **{"rewards/a/mean": lambda s: min(1.0, 0.1 * s), "rewards/b/mean": lambda s: min(1.0, 0.1 * s)},
        ),
        [],
    ),
    # loss exactly 0 with groups that have a spread: a note that this is normal, not a warning
    (stream(2, frac_reward_zero_std=0.25, entropy=[3.0, 2.0], **{**FAILING, "loss": [0.1, 0.0]}), [("loss_zero", 2)]),
    # learning_rate=1e-9 on recipes/digit.yaml (weights that cannot move): the reward wanders 0.025-0.232 by sampling
    # noise, more than flat_reward, so only its trend says so: slope +0.005 a step, 3 standard errors reach below 0
    (stream(16, frac_reward_zero_std=0.8, entropy=LR9_ENTROPY, reward=LR9_REWARD, **LR9_MEANS), [("not_learning", 16)]),
    # the same for 15 steps: shorter than trend_steps, silent
    (stream(15, frac_reward_zero_std=0.8, entropy=LR9_ENTROPY, reward=LR9_REWARD, **LR9_MEANS), []),
    # recipes/guess.yaml seed 0 (224 tokens): rose from 0.24 to 0.73 at step 2, then wandered 0.68-0.93 while it learned
    # (held-out games won 0.16 -> 0.84); its slope over 16 steps is only 2.2 standard errors above 0, but it stands
    # well above where it began: silent
    (
        stream(
            16,
            reward=GUESS_REWARD,
            rewards__GuessNumber__mean=GUESS_REWARD,
            entropy=GUESS_ENTROPY,
            frac_reward_zero_std=lambda s: 0.5 if s in (7, 9, 12) else 0.0,
            completions__clipped_ratio=GUESS_CLIPPED,
            tools__call_frequency=GUESS_CALLS,
            tools__failure_frequency=lambda s: 0.059 if s == 1 else 0.0,
            loss=0.1,
        ),
        [],
    ),
    # the same rewards from a start as high as the plateau: not risen, so the slope decides, and it names the run
    (
        stream(16, reward=[0.8] + GUESS_REWARD[1:], rewards__GuessNumber__mean=[0.8] + GUESS_REWARD[1:], loss=0.1),
        [("not_learning", 16)],
    ),
    # recipes/guess.yaml seed 2: flat from step 8, two of those steps won in full; named at step 13, when 4 of the
    # last 6 flat steps fell short (the rule once waited for 6 unsolved in a row: step 20)
    (
        stream(15, **GUESS2, loss=lambda s: 0.0 if GUESS2_FLAT[s - 1] == 1.0 else 0.05),
        [("no_signal", 13)],
    ),
    # 6 flat steps, 3 of them solved: half the window solved, silent
    (stream(6, frac_reward_zero_std=1.0, **{k: (lambda s, v=v, w=SOLVED[k]: w if s % 2 else v) for k, v in FAILING.items()}), []),
    # 6 flat steps, 2 of them solved: named at step 6
    (
        stream(
            6, frac_reward_zero_std=1.0, **{k: (lambda s, v=v, w=SOLVED[k]: w if s in (2, 5) else v) for k, v in FAILING.items()}
        ),
        [("no_signal", 6)],
    ),
    # the slowest solving digit run measured (digit-qlora.yaml, seed 42): flat for 10 steps, then rising; silent
    (stream(16, frac_reward_zero_std=0.5, entropy=QLORA_ENTROPY, reward=QLORA_REWARD, **QLORA_MEANS), []),
    # a learning run (the shape of recipes/digit.yaml seed 0): silent
    (
        stream(
            16,
            frac_reward_zero_std=lambda s: 0.0 if s < 9 else 1.0,
            entropy=lambda s: max(0.25, 3.2 - 0.3 * s),
            completions__clipped_ratio=lambda s: max(0.0, 0.9 - 0.15 * s),
            reward=lambda s: min(2.0, 0.25 * s),
            rewards__digit_exact__mean=lambda s: min(1.0, 0.125 * s),
            rewards__digit_shaped__mean=lambda s: min(1.0, 0.125 * s),
            loss=0.1,
        ),
        [],
    ),
]


@pytest.mark.parametrize(("records", "expected"), WATCHDOG_CASES)
def test_watchdog_rules(records, expected):
    dog = watchdog.Watchdog(pass_thresholds={"digit_shaped": 1.0})
    fired = [(f.rule, f.step) for record in records for f in dog.update(record)]
    assert fired == expected
    for finding in dog.findings:
        line = finding.line()
        assert line.startswith("health: ") and "remedy: " in line and "\n" not in line


def test_each_rule_fires_once():
    dog = watchdog.replay(stream(30, frac_reward_zero_std=1.0, entropy=1.0, **FAILING))
    assert [f.rule for f in dog.findings] == ["no_signal", "reward_flat"]  # flat also after 8 steps; each once in 30
    assert watchdog.verdict(dog.findings)["status"] == "unhealthy"


def test_no_signal_names_a_collapse():
    """Flat groups under the entropy floor are named a collapse, with the entropy and the step it was last logged at."""
    (finding,) = watchdog.replay(stream(15, **GUESS2)).findings
    assert "entropy 0.012 at step 7" in finding.symptom and "collapsed" in finding.cause
    assert finding.remedy.endswith("lower learning_rate")
    (plain,) = watchdog.replay(stream(6, frac_reward_zero_std=1.0, entropy=1.0, **FAILING)).findings
    assert "entropy" not in plain.symptom and "collapsed" not in plain.cause


def test_recipe_thresholds_change_the_rules():
    records = stream(3, frac_reward_zero_std=1.0, **FAILING)
    assert [f.rule for f in watchdog.replay(records, watchdog.limits_of({"no_signal_steps": 3})).findings] == ["no_signal"]
    assert watchdog.replay(records).findings == []


def test_note_is_not_a_problem():
    dog = watchdog.replay(stream(1, frac_reward_zero_std=0.0, **{**FAILING, "loss": 0.0}))
    assert [f.severity for f in dog.findings] == ["note"] and dog.problems == []
    assert watchdog.verdict(dog.findings)["status"] == "healthy"


def scores(groups: list[list]) -> list:
    return [s for g in groups for s in g]


# reward name -> the reward that gives partial credit towards it, as the rewards declare it: {"digit_exact": "digit_shaped"}
PARTIAL_CREDIT = preflight.marks([digit_exact])[1]


PREFLIGHT_CASES = [
    # the strict reward alone, 0.0 on every sample: no gradient, with the partial-credit reward to add
    ({"digit_exact": scores([[0.0] * 8] * 8)}, [1.0], [("preflight_no_gradient", "warning", "digit_shaped")]),
    # the strict reward flat, the shaped one with a spread: a note, not a warning
    (
        {"digit_exact": scores([[0.0] * 8] * 8), "digit_shaped": scores([[0.2, 0.5] * 4] * 8)},
        [1.0, 1.0],
        [("preflight_no_gradient", "note", "digit_exact")],
    ),
    # two rewards, each constant within every group (but not across groups): the sum gives no gradient
    (
        {"a": scores([[float(i)] * 4 for i in range(4)]), "b": scores([[1.0] * 4] * 4)},
        [1.0, 1.0],
        [("preflight_no_gradient", "warning", "a"), ("preflight_no_gradient", "warning", "b")],
    ),
    # a reward that judges nothing
    ({"judge": [None] * 8, "len": [0.1 * i for i in range(8)]}, [1.0, 1.0], [("preflight_none", "warning", "judge")]),
    # NaN scores
    ({"r": [0.0, math.nan, 1.0, 0.5]}, [1.0], [("preflight_nan", "warning", "r")]),
    # spreads 100x apart: rewards on very different scales
    (
        {"small": [0.01 * (i % 2) for i in range(16)], "big": [5.0 * (i % 3) for i in range(16)]},
        [1.0, 1.0],
        [("preflight_scales", "warning", "big")],
    ),
    # the strict reward alone, one group of 8 with a spread (88% flat): little gradient, a warning as for several rewards
    (
        {"digit_exact": scores([[0.0] * 8] * 7 + [[1.0, 0.0] * 4])},
        [1.0],
        [("preflight_no_gradient", "warning", "digit_shaped")],
    ),
    # 5 of 8 groups flat (62%): below health.preflight_flat_share, no finding
    ({"digit_exact": scores([[0.0] * 8] * 5 + [[1.0, 0.0] * 4] * 3)}, [1.0], []),
    # partial credit with a spread in every group: no finding
    ({"digit_shaped": scores([[0.2, 0.5, 0.9, 0.2]] * 4)}, [1.0], []),
]


@pytest.mark.parametrize(("per_reward", "weights", "expected"), PREFLIGHT_CASES)
def test_preflight_verdicts(per_reward, weights, expected):
    group = 8 if len(next(iter(per_reward.values()))) == 64 else 4
    stats, findings = preflight.verdicts(
        per_reward, weights, group, {name: 0.001 for name in per_reward}, partial_credit=PARTIAL_CREDIT
    )
    assert [(f.rule, f.severity) for f in findings] == [(rule, severity) for rule, severity, _ in expected]
    for finding, (_, _, word) in zip(findings, expected, strict=True):
        assert word in finding.symptom + finding.remedy
    assert set(stats["rewards"]) == set(per_reward)


def test_preflight_strict_reward_words():
    stats, findings = preflight.verdicts(
        {"digit_exact": [0.0] * 64}, [1.0], 8, {"digit_exact": 0.002}, partial_credit=PARTIAL_CREDIT
    )
    assert findings[0].symptom == (
        "digit_exact scored 0 on all 64 samples: every group has zero spread, so GRPO gets no gradient from it"
    )
    assert findings[0].remedy == "add a partial-credit reward (digit_shaped), raise temperature, or make the prompts easier"
    assert stats["rewards"]["digit_exact"] | {"seconds_per_call": 0} == {
        "samples": 64, "mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0, "zero_spread_groups": 1.0, "none": 0, "nan": 0,
        "seconds_per_call": 0,
    }  # fmt: skip


def test_preflight_samples_with_training_generation_settings(monkeypatch):
    """The pre-flight samples as training will: its temperature, length, group size and generation_kwargs."""
    from grpo_ext.run import sampling

    seen = []

    def fake_sample(model, tokenizer, prompts, s, shared=False):  # shared: each process its share (a run's pre-flight)
        seen.append(s)
        return [["7"] * s.samples for _ in prompts], [[[55]] * s.samples for _ in prompts]

    monkeypatch.setattr(sampling, "sample", fake_sample)
    monkeypatch.setattr(sampling, "precision", lambda model, s: __import__("contextlib").nullcontext())
    given = {"num_generations": 4, "temperature": 0.7, "max_completion_length": 5}
    training = Training({**given, "generation_kwargs": {"exponential_decay_length_penalty": [1, 1.3]}})
    base = sampling.Settings(samples=8, max_new_tokens=32, temperature=1.0, batch_size=64, pass_threshold=1.0, seed=3)
    reward = lambda completions, **kw: [1.0] * len(completions)  # noqa: E731
    reward.__name__ = "one"
    stats, _, _ = preflight.sample_and_score(
        None, None, [{"prompt": "p"}], [reward], [1.0], training, base, chat=False, limits=watchdog.DEFAULTS
    )
    (s,) = seen
    assert (s.samples, s.temperature, s.max_new_tokens, s.seed) == (4, 0.7, 5, 3)
    assert dict(s.generation) == {"exponential_decay_length_penalty": [1, 1.3]}
    assert "generation" in s.key() and "generation" not in base.key()  # an eval's key is unchanged
    assert stats["rewards"]["one"]["samples"] == 4


CUT_CASES = [
    # (cut per sample, group, findings): a warning when no sample ended in clipped_share (0.9) or more of the groups
    ([True] * 64, 8, ["preflight_cut"]),  # a budget no answer fits: every sample of every group cut
    # recipes/digit-lora.yaml's base model at 8 tokens: 55 of 64 cut, an ending in 6 of 8 groups (it learns to end)
    ([i not in {0, 8, 9, 16, 24, 32, 33, 40, 41} for i in range(64)], 8, []),
    ([True] * 56 + [False] + [True] * 7, 8, []),  # one ending sample in 8 groups: 7 of 8 without (88%)
    ([True] * 19 * 8 + [False] + [True] * 7, 8, ["preflight_cut"]),  # 19 of 20 groups without one (95%)
    ([False] * 64, 8, []),
    ([], 8, []),
]


@pytest.mark.parametrize(("cut", "group", "rules"), CUT_CASES)
def test_preflight_names_a_budget_no_sample_ends_within(cut, group, rules):
    stats, findings = preflight.cut_verdict(cut, group, 48)
    assert [f.rule for f in findings] == rules
    assert stats["samples"] == sum(cut) and stats["budget"] == 48
    for finding in findings:
        assert finding.symptom.startswith(f"{sum(cut)} of {len(cut)} samples cut at max_completion_length (48)")
        assert "raise max_completion_length" in finding.remedy


def exchange(*through, whole):
    from grpo_ext.run.rollouts import Exchange

    return Exchange(0, through, whole)


BUDGET_CASES = [
    # (worked exchanges, max_completion_length, the start of the finding's symptom or None)
    # a 38-token call and its 23-token result at 48: TRL drops the result
    ([exchange(61, whole=70)], 48, "a worked call of data.examples and its result take 61 tokens"),
    # recipes/arith-tools.yaml on SmolLM2: 57 through the result, 63 in all, at 64: fits
    ([exchange(57, whole=63), exchange(56, whole=61)], 64, None),
    # the same at 60: the result fits and the answer is cut
    ([exchange(57, whole=63)], 60, "a worked exchange of data.examples takes 63 tokens"),
    # recipes/guess.yaml: three guesses, 51, 102 and 159 tokens through their answers, 166 in all, at 224: fits
    ([exchange(51, 102, 159, whole=166)], 224, None),
    # at 128 the third guess's answer is dropped (the recipe as it was: "128 cut the third call")
    ([exchange(51, 102, 159, whole=166)], 128, "a worked call of data.examples and its result take 159 tokens"),
    ([], 48, None),  # no examples with a call
]


@pytest.mark.parametrize(("exchanges", "budget", "symptom"), BUDGET_CASES)
def test_preflight_holds_the_worked_examples_against_the_budget(exchanges, budget, symptom):
    findings = preflight.budget_verdict(exchanges, budget)
    assert [f.symptom[: len(symptom)] for f in findings] == ([symptom] if symptom else [])
    for finding in findings:
        assert finding.rule == "preflight_tool_budget" and f"max_completion_length ({budget})" in finding.symptom
        assert finding.remedy.startswith(f"raise training.max_completion_length to {max(e.whole for e in exchanges)} or more")


def write_run(path, records: list[dict], status: str = "completed", health_cfg: dict | None = None, summary_extra=None):
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (path / "recipe.yaml").write_text(
        yaml.safe_dump({"health": health_cfg or {}, "eval": {"pass_threshold": 1.0}, "training": {"max_completion_length": 48}})
    )
    summary = {"status": status, "versions": {"trl": "0.19.1"}, **(summary_extra or {})}
    (path / "summary.json").write_text(json.dumps(summary))
    return path


DOCTOR_CASES = [
    # a run that learnt: healthy
    (
        "learnt",
        stream(10, frac_reward_zero_std=0.0, entropy=lambda s: 3 - 0.2 * s, reward=lambda s: 0.2 * s),
        "completed",
        {},
        True,
    ),
    # a run stuck without signal: its rule and remedy, not healthy
    ("stuck", stream(8, frac_reward_zero_std=1.0, **FAILING), "completed", {}, False),
    # a run killed at step 2 (summary never closed, no process holds its lock): killed, not healthy
    ("killed", stream(2, frac_reward_zero_std=0.0, entropy=[3.0, 2.0], reward=[0.1, 0.3]), "running", {}, False),
    # a run where no sample scored: its finding, not healthy
    ("unscored", stream(4, **UNSCORED), "completed", {}, False),
    # the run's own thresholds are used: 3 flat steps are a finding with no_signal_steps 3
    ("strict", stream(3, frac_reward_zero_std=1.0, **FAILING), "completed", {"no_signal_steps": 3}, False),
    # a failed run is not healthy whatever its metrics
    ("failed", [], "failed", {}, False),
    # a tool run whose every result TRL dropped (its failure_frequency 0, tool_success 0): named, not healthy
    (
        "dropped",
        stream(
            3,
            reward=0.0,
            rewards__tool_success__mean=0.0,
            tools__call_frequency=1.0,
            tools__failure_frequency=0.0,
            tools__dropped_results=16,
            tools__dropped_frequency=1.0,
            frac_reward_zero_std=0.0,
            entropy=lambda s: 3 - 0.5 * s,
        ),
        "completed",
        {},
        False,
    ),
    # a budget that cut every completion of a 4-step run, below clipped_steps (8): named, not healthy
    ("cut", stream(4, completions__clipped_ratio=1.0, entropy=lambda s: 3 - 0.5 * s, **MOVING), "completed", {}, False),
]


@pytest.mark.parametrize(("name", "records", "status", "cfg", "healthy"), DOCTOR_CASES)
def test_doctor_reads_run_directories(tmp_path, name, records, status, cfg, healthy):
    run = write_run(tmp_path / name, records, status, cfg)
    lines, ok = doctor.diagnose(run)
    assert ok is healthy
    assert lines[-1].startswith("verdict: healthy" if healthy else "verdict: not healthy")
    if name == "stuck":
        assert any("no learning signal" in line or "zero reward spread" in line for line in lines)
        assert any("add a partial-credit reward" in line for line in lines)
    if name == "dropped":
        assert "health: warning at step 1: 16 tool results dropped over the last 1 step, 100% of the calls" in "\n".join(lines)
        assert (
            "tools: 48 tool results dropped: the conversation would pass max_completion_length (48) (48 in training); "
            "remedy: raise training.max_completion_length" in "\n".join(lines)
        )
    if name == "cut":
        assert any("every completion cut at max_completion_length for 3 steps in a row" in line for line in lines)


def test_doctor_cli_exit_status(tmp_path, capsys):
    from grpo_ext import cli

    good = write_run(tmp_path / "good", stream(3, frac_reward_zero_std=0.0, entropy=[3.0, 2.0, 1.0], reward=[0.1, 0.2, 0.4]))
    bad = write_run(tmp_path / "bad", stream(6, frac_reward_zero_std=1.0, **FAILING))
    assert cli.main(["doctor", str(good)]) == 0
    assert cli.main(["doctor", str(bad)]) == 1
    assert cli.main(["doctor", str(tmp_path / "nothing")]) == 2
    assert "no_signal" not in capsys.readouterr().out  # the lines name symptoms, not rule ids


KNOWN_BAD_CASES = [
    # vLLM newer than the range TRL declares for its vllm extra
    ({"trl": "1.16.0", "vllm": "0.40.0"}, ['vllm<=0.31.0,>=0.22.0; extra == "vllm"'], ["vllm 0.40.0 is outside"]),
    # vLLM inside the range
    ({"trl": "1.16.0", "vllm": "0.30.0"}, ['vllm<=0.31.0,>=0.22.0; extra == "vllm"'], []),
    # a deepspeed-extra pin on transformers does not apply without deepspeed installed
    ({"trl": "1.16.0", "transformers": "5.1.0", "deepspeed": None}, ['transformers!=5.1.0; extra == "deepspeed"'], []),
    # ... and does with it
    (
        {"trl": "1.16.0", "transformers": "5.1.0", "deepspeed": "0.18.6"},
        ['transformers!=5.1.0; extra == "deepspeed"'],
        ["transformers 5.1.0"],
    ),
]


@pytest.mark.parametrize(("versions", "requires", "expected"), KNOWN_BAD_CASES)
def test_doctor_env_known_bad(versions, requires, expected):
    found = doctor.known_bad(versions, requires)
    assert len(found) == len(expected) and all(line.startswith(word) for line, word in zip(found, expected, strict=True))


def test_zero3_without_gathering_for_generation():
    zero3 = {"deepspeed_config": {"zero_stage": 3}}
    assert doctor.zero3_generation({"ds3_gather_for_generation": False}, zero3) is not None
    assert doctor.zero3_generation({}, zero3) is None  # TRL's default gathers
    assert doctor.zero3_generation({"ds3_gather_for_generation": False}, {}) is None  # no ZeRO-3


RECIPE_CASES = [
    # the defaults: warn before step 1, warn during training
    ([], None),
    # every threshold is a recipe key; `off` reads as YAML false and means off
    (["health.no_signal_steps=3", "health.on_problem=stop", "health.preflight=off"], None),
    # a mode that does not exist
    (["health.preflight=maybe"], "health.preflight: 'maybe' is not one of 'warn', 'fail', 'off', False"),
    # a misspelt threshold, with a suggestion
    (["health.no_signal_step=3"], "health.no_signal_step: unknown key; did you mean 'no_signal_steps'?"),
]


@pytest.mark.parametrize(("overrides", "error"), RECIPE_CASES)
def test_recipe_health_section(overrides, error):
    from grpo_ext import RecipeError, load_recipe

    if error is None:
        recipe = load_recipe("digit", overrides)
        # the thresholds, and the pre-flight's mode and size (null: scaled to a tool recipe's steps, recipe/quick.py)
        fields = {f.name for f in dataclasses.fields(recipe.health)}
        assert fields == set(watchdog.LIMITS) | {"preflight", "preflight_prompts", "on_problem"}
        return
    with pytest.raises(RecipeError) as info:
        load_recipe("digit", overrides)
    assert any(error in line for line in info.value.lines())


def test_curves_mark_warnings_only():
    from grpo_ext.results import plots

    records = [
        {"step": 1, "reward": 0.1},
        {"step": 2, "reward": 0.1, "health": [{"rule": "loss_zero", "severity": "note"}]},
        {"step": 3, "reward": 0.1, "health": [{"rule": "no_signal", "severity": "warning"}]},
    ]
    assert plots.health_marks(records) == {3: ["no_signal"]}
