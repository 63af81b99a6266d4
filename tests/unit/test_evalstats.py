"""Eval statistics against hand-computed cases, and the 95% intervals' coverage on synthetic evals."""

import doctest
import math
import random

import pytest

from grpo_ext.results import evalstats, scoring
from grpo_ext.results.evalstats import Estimate


def test_docstring_examples():
    result = doctest.testmod(evalstats)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    "df, expected",
    [
        (1, 12.706),  # the textbook table's first row
        (7, 2.365),  # 8 prompts
        (30, 2.042),
        (10_000, 1.960),  # tends to the normal quantile
    ],
)
def test_t_quantile(df, expected):
    assert evalstats.t_quantile(df) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (8, 0, 1, 0.0),  # nothing passes: no k passes either
        (8, 2, 1, 0.25),  # pass@1 is the pass rate
        (8, 2, 4, 1 - 15 / 70),  # 1 - C(6,4)/C(8,4)
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (8, 5, 4, 1.0),  # only 3 fail: any 4 hold a pass
        (8, 1, 8, 1.0),  # k = n: passes when any sample passes
        (10, 3, 3, 1 - 35 / 120),  # 1 - C(7,3)/C(10,3)
    ],
)
def test_pass_at_k(n, c, k, expected):
    assert evalstats.pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("n, k", [(4, 5), (4, 0)])  # k beyond the samples, and k = 0
def test_pass_at_k_refuses_k_outside_1_to_n(n, k):
    with pytest.raises(ValueError, match="1 <= k <= n"):
        evalstats.pass_at_k(n, 0, k)


@pytest.mark.parametrize(
    "values, weights, expected",
    [
        # sd 0.1 over 3 prompts: 0.6 +- t(2) * 0.1 / sqrt(3)
        ([0.5, 0.7, 0.6], [8, 8, 8], (0.6, 0.6 - 4.3027 * 0.1 / math.sqrt(3), 0.6 + 4.3027 * 0.1 / math.sqrt(3))),
        # every prompt alike: no spread, a point
        ([0.25, 0.25], [4, 4], (0.25, 0.25, 0.25)),
        # one prompt: no spread to measure, no interval
        ([0.5], [8], (0.5, None, None)),
        # unequal samples: the pooled mean weights prompts by their samples (3*1 + 1*0) / 4
        ([1.0, 0.0], [3, 1], (0.75, None, None)),
    ],
)
def test_mean_interval(values, weights, expected):
    e = evalstats.mean_interval(values, weights)
    assert e.value == pytest.approx(expected[0])
    if expected[1] is None and len(values) == 1:
        assert e.low is None and e.high is None
    elif expected[1] is not None:
        assert (e.low, e.high) == pytest.approx(expected[1:], abs=1e-3)


def test_unequal_samples_give_the_cluster_robust_interval():
    # (3 x 1.0 + 1 x 0.0) / 4 = 0.75; variance k/(k-1) * sum (w (v - m))^2 / W^2 = 2 * (0.75^2 + 0.75^2) / 16
    e = evalstats.mean_interval([1.0, 0.0], [3, 1])
    half = 12.706 * math.sqrt(2 * (0.75**2 + 0.75**2) / 16)
    assert (e.low, e.high) == pytest.approx((0.75 - half, 0.75 + half), abs=1e-2)


def wilson(p: float, n: float, z: float) -> tuple[float, float]:
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize(
    "values, weights, expected",
    [
        # 0 of 64 passed: Wilson at n = 64 with t(7) = 2.3646, low 0, high z^2 / (n + z^2)
        ([0.0] * 8, [8] * 8, (0.0, 0.0, 2.3646**2 / (64 + 2.3646**2))),
        # 64 of 64
        ([1.0] * 8, [8] * 8, (1.0, 64 / (64 + 2.3646**2), 1.0)),
        # every prompt 4 of 8: no spread between prompts, the design effect is 1 (n = 64)
        ([0.5] * 8, [8] * 8, (0.5, *wilson(0.5, 64, 2.3646))),
        # four prompts always pass, four never: the 64 samples are worth 7 (design effect 64/7)
        ([1.0] * 4 + [0.0] * 4, [8] * 8, (0.5, *wilson(0.5, 7, 2.3646))),
    ],
)
def test_rate_interval(values, weights, expected):
    e = evalstats.rate_interval(values, weights)
    assert (e.value, e.low, e.high) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    "answers, passed, expected",
    [
        (["7", "3", "7", None], [True, False, True, False], True),  # 7 twice, and 7 is right
        (["3", "3", "7", "3"], [False, False, True, False], False),  # the right answer is outvoted
        (["3", "7", "7", "3"], [False, True, True, False], False),  # a tie: the answer seen first (3) wins
        ([None, None], [False, False], False),  # no sample gave an answer
    ],
)
def test_majority_passes(answers, passed, expected):
    assert evalstats.majority_passes(answers, passed) is expected


def test_summarize_pass_at_and_majority():
    # prompt 1: 1 of 4 passes, with the majority answer wrong; prompt 2: 3 of 4 pass, majority right; prompt 3: none
    # passes, and its tied answers go to the one seen first (wrong)
    scores = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], [0.0] * 4]
    answers = [["5", "4", "4", "3"], ["8", "8", "8", "9"], ["1", "1", "2", "2"]]
    out = evalstats.summarize(scores, 1.0, [1, 2, 4, 8], answers)
    assert out["pass_rate_ci"]["value"] == round(4 / 12, 4)
    assert out["pass_at"]["1"]["value"] == round(4 / 12, 4)
    assert out["pass_at"]["2"]["value"] == pytest.approx((0.5 + 1.0 + 0.0) / 3, abs=1e-4)  # 1 - C(3,2)/C(4,2) = 0.5
    assert out["pass_at"]["4"]["value"] == round(2 / 3, 4)
    # k = n: one draw of 4 per prompt, three prompts (1, 1, 0): their spread leaves 2 effective draws, Wilson at n = 2
    # with t(2), not at the 12 samples
    assert out["pass_at"]["4"]["low"] == pytest.approx(wilson(2 / 3, 2, 4.3027)[0], abs=1e-3)
    assert "8" not in out["pass_at"]  # more than the 4 samples a prompt has
    assert out["maj"]["n"] == 4 and out["maj"]["value"] == round(1 / 3, 4)


@pytest.mark.parametrize(
    "diff, expected",
    [
        (Estimate(0.34, 0.21, 0.47), "better: +0.34 [+0.21, +0.47]"),  # the interval is above 0
        (Estimate(-0.2, -0.35, -0.05), "worse: -0.20 [-0.35, -0.05]"),  # below 0
        (Estimate(0.1, -0.02, 0.22), "no detectable difference: +0.10 [-0.02, +0.22]"),  # straddles 0
        (Estimate(0.0, 0.0, 0.0), "no detectable difference: +0.00 [+0.00, +0.00]"),  # identical samples
        (Estimate(0.5, None, None), "no interval (one prompt): +0.50"),  # one prompt
        (None, "not compared (no prompt scored on both sides)"),
    ],
)
def test_verdict(diff, expected):
    assert evalstats.verdict(diff) == expected


def test_verdict_names_its_unit():
    # the seeds benchmark pairs runs by seed: one seed has no spread, and saying "one prompt" would mislead
    assert evalstats.verdict(Estimate(0.45, None, None), "seed") == "no interval (one seed): +0.45"
    assert evalstats.verdict(None, "seed") == "not compared (no seed scored on both sides)"


def result(per_prompt: list[list[float]], threshold: float = 1.0) -> dict:
    """An eval result as scoring.score writes it, reduced to what a paired comparison reads."""
    return {"prompts": len(per_prompt), "rewards": {"r": {"per_prompt": per_prompt, "pass_threshold": threshold}}}


@pytest.mark.parametrize(
    "before, after, expected",
    [
        # every prompt goes from 0 of 4 to 4 of 4
        ([[0.0] * 4] * 4, [[1.0] * 4] * 4, "better: +1.00 [+1.00, +1.00]"),
        # per-prompt changes +0.5, +0.75, +0.25, +0.5: mean 0.5, sd 0.204, t(3) = 3.182 -> +-0.325
        (
            [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]],
            [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]],
            "better: +0.50 [+0.18, +0.82]",
        ),
        # the same change the other way
        (
            [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]],
            [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]],
            "worse: -0.50 [-0.82, -0.18]",
        ),
        # changes +1, -0.25, +0.25, 0: mean 0.25, sd 0.540, t(3) * sd / 2 = 0.859: not detectable (clipped at +1)
        (
            [[0, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]],
            [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]],
            "no detectable difference: +0.25 [-0.61, +1.00]",
        ),
        # a score below the threshold is no pass, whatever its size
        ([[0.9] * 2] * 3, [[1.0] * 2] * 3, "better: +1.00 [+1.00, +1.00]"),
    ],
)
def test_paired_change(before, after, expected):
    changes = scoring.change(result(before), result(after))
    assert changes["r"]["verdict"] == expected


@pytest.mark.parametrize(
    "before, after",
    [
        (None, result([[1.0]])),  # no eval before
        (result([[1.0], [0.0]]), result([[1.0]])),  # not the same prompts
        ({"prompts": 1, "rewards": {"r": {"mean": 1.0}}}, result([[1.0]])),  # an eval from before per-prompt scores
    ],
)
def test_nothing_to_compare(before, after):
    assert not scoring.change(before, after)


def coverage(mean: float, trials: int, rng: random.Random, prompts: int = 8, samples: int = 8) -> tuple[float, float]:
    """Share of trials whose rate interval covers the true mean rate, and whose paired interval between two
    evals of an unchanged model on the same prompts covers 0. Prompt rates vary (Beta, alpha + beta = 4)."""
    covered = paired = 0
    for _ in range(trials):
        rates = [rng.betavariate(4 * mean, 4 * (1 - mean)) for _ in range(prompts)]
        first, second = ([sum(rng.random() < r for _ in range(samples)) / samples for r in rates] for _ in range(2))
        e = evalstats.rate_interval(first, [samples] * prompts)
        covered += e.low <= mean <= e.high
        d = evalstats.paired(first, second, [samples] * prompts)
        paired += d.low <= 0 <= d.high
    return covered / trials, paired / trials


@pytest.mark.parametrize("mean", [0.2, 0.5, 0.8])  # a rare pass, an even split, a mostly solved task
def test_intervals_cover_about_95_percent(mean):
    rate, diff = coverage(mean, 1500, random.Random(1))
    # 1500 trials: a true 95% lands within 0.94-0.96 nine times in ten; the interval rounds up near the edges
    assert 0.93 <= rate <= 0.985, rate
    assert 0.93 <= diff <= 0.985, diff


def alternating(prompts: int) -> list[list[float]]:
    """``prompts`` prompts of 8 samples: the first and every other one pass all 8, the rest none."""
    return [[1.0 if i % 2 == 0 else 0.0] * 8 for i in range(prompts)]


T2 = 4.3027 * math.sqrt(3 / 2 * (2 * (1 / 3) ** 2 + (2 / 3) ** 2) / 9)  # t(2) times the standard error of [1, 0, 1]
T29 = 2.0452 * math.sqrt(30 / 29 * 30 * 0.25 / 900)  # t(29) times the standard error of 15 ones and 15 zeros


@pytest.mark.parametrize(
    "prompts, bounds, mean_ci, pass_ci",
    [
        # (prompts judged, the reward's range, the mean's interval, whether the pass rate has one)
        (1, (0.0, 1.0), None, False),  # one prompt: no spread to measure
        (1, None, None, False),
        (2, (0.0, 1.0), None, False),  # two: t(1) = 12.7, the mean would be 0.5 +- 6.35: too few prompts for an interval
        (2, None, None, False),  # the same without a range: no interval rather than a meaningless one
        (3, (0.0, 1.0), (0.0, 1.0), True),  # 0.667 +- 1.43 cut to the reward's range
        (3, None, (2 / 3 - T2, 2 / 3 + T2), True),  # a reward without a range: the t interval as it is
        (30, (0.0, 1.0), (0.5 - T29, 0.5 + T29), True),  # inside the range: untouched
        (30, None, (0.5 - T29, 0.5 + T29), True),
    ],
)
def test_intervals_need_prompts_and_stay_in_the_rewards_range(prompts, bounds, mean_ci, pass_ci):
    out = evalstats.summarize(alternating(prompts), 1.0, [1], bounds=bounds)
    mean = out["mean_ci"]
    if mean_ci is None:
        assert (mean["low"], mean["high"]) == (None, None)
    else:
        assert (mean["low"], mean["high"]) == pytest.approx(mean_ci, abs=1e-3)
    for figure in (out["pass_rate_ci"], out["pass_at"]["1"]):
        assert (figure["low"] is not None) is pass_ci and 0.0 <= (figure["low"] or 0.0) <= (figure["high"] or 1.0) <= 1.0
