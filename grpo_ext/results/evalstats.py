"""How sure an eval figure is: intervals that respect prompts, pass@k, majority vote, paired differences.

An eval samples ``n`` completions for each of ``k`` prompts. The samples of one prompt are not independent
draws (a prompt the model finds easy passes most of its samples), so the unit of evidence is the prompt,
and every interval here is computed from per-prompt values with ``k - 1`` degrees of freedom:

- a mean score: the overall mean (all samples pooled) plus or minus Student's t times its cluster-robust
  standard error (the samples of a prompt form one cluster);
- a rate (pass rate, pass@k, maj@n): a Wilson score interval on the effective number of samples, that is
  the samples divided by the design effect (the cluster variance over the binomial one, at least 1), with
  the t quantile in place of the normal one (Korn and Graubard, 1998). Unlike the plain t interval it stays
  inside [0, 1] and is not empty at a rate of 0 or 1;
- a paired difference (after minus before, model B minus model A, on the same prompts and sampling seeds):
  the mean of the per-prompt differences plus or minus t times their cluster-robust standard error.

An eval figure gets no interval from fewer than ``MIN_PROMPTS`` prompts, and a mean's interval is cut to the
range of the reward's scores where the reward states it (``score_range``): a mean cannot leave that range.

A percentile bootstrap over 8 prompts is too narrow (it uses the normal spread of 8 values, about 89%
coverage at a nominal 95%); ``benchmarks/intervals.py`` measures the coverage of both on synthetic data.

pass@k is the unbiased estimator of Chen et al. (2021): from ``n`` samples of which ``c`` pass, the chance
that at least one of ``k`` drawn without replacement passes, ``1 - C(n - c, k) / C(n, k)``.

Pure Python (standard library only): reports and ``summary.json`` readers use it without torch.
"""

import functools
import math
from collections import Counter
from dataclasses import dataclass

LEVEL = 0.95
# The fewest judged prompts an eval figure gets an interval from. With two, Student's t has one degree of freedom
# (12.7 standard errors each side): two prompts that disagree give a mean of a [0, 1] reward 0.5 +- 6.35, and a rate
# most of [0, 1]. From three (t = 4.3) the interval narrows as the prompts agree.
MIN_PROMPTS = 3


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95% interval; ``low``/``high`` are None when one prompt gives no spread to measure."""

    value: float
    low: float | None
    high: float | None

    def as_dict(self, digits: int = 4) -> dict:
        rounded = lambda x: None if x is None else round(x, digits)  # noqa: E731
        return {"value": rounded(self.value), "low": rounded(self.low), "high": rounded(self.high)}


def _t_density(x: float, df: int) -> float:
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))


def _t_cdf_from_zero(x: float, df: int, steps: int = 2000) -> float:
    """P(0 < T < x) for Student's t with ``df`` degrees of freedom, by Simpson's rule."""
    h = x / steps
    total = _t_density(0.0, df) + _t_density(x, df)
    total += sum((4 if i % 2 else 2) * _t_density(i * h, df) for i in range(1, steps))
    return total * h / 3


@functools.lru_cache(maxsize=64)
def t_quantile(df: int, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t: ``t_quantile(7)`` is about 2.365.

    >>> round(t_quantile(7), 3), round(t_quantile(1000), 2)
    (2.365, 1.96)
    """
    target, low, high = level / 2, 0.0, 1.0
    while _t_cdf_from_zero(high, df) < target:
        high *= 2
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_cdf_from_zero(mid, df) < target else (low, mid)
    return (low + high) / 2


def _pooled(values: list[float], weights: list[float]) -> tuple[float, float | None]:
    """(weighted mean, its cluster-robust variance or None with fewer than two prompts)."""
    total = sum(weights)
    mean = sum(w * v for v, w in zip(values, weights, strict=True)) / total
    k = len(values)
    if k < 2:
        return mean, None
    spread = sum((w * (v - mean)) ** 2 for v, w in zip(values, weights, strict=True))
    return mean, k / (k - 1) * spread / total**2


def mean_interval(values: list[float], weights: list[float]) -> Estimate:
    """A mean over prompts (``values[i]`` the mean of prompt i, from ``weights[i]`` samples), with a t interval.

    >>> e = mean_interval([0.5, 0.7, 0.6], [8, 8, 8])   # sd 0.1 over 3 prompts: 0.6 +- 4.303 * 0.1 / sqrt(3)
    >>> round(e.value, 3), round(e.low, 3), round(e.high, 3)
    (0.6, 0.352, 0.848)
    """
    mean, var = _pooled(values, weights)
    if var is None:
        return Estimate(mean, None, None)
    half = t_quantile(len(values) - 1) * math.sqrt(var)
    return Estimate(mean, mean - half, mean + half)


def rate_interval(values: list[float], weights: list[float]) -> Estimate:
    """A rate over prompts (``values[i]`` in [0, 1], prompt i's rate from ``weights[i]`` samples), with a
    Wilson interval on the effective sample size.

    >>> e = rate_interval([0.0] * 8, [8] * 8)   # nothing passed in 64 samples: up to about 0.08
    >>> e.value, e.low, round(e.high, 3)
    (0.0, 0.0, 0.08)
    """
    p, var = _pooled(values, weights)
    if var is None:
        return Estimate(p, None, None)
    n = float(sum(weights))
    binomial = p * (1 - p) / n
    effective = n if var <= 0 or binomial <= 0 else min(n, n * binomial / var)
    z = t_quantile(len(values) - 1)
    centre = (p + z * z / (2 * effective)) / (1 + z * z / effective)
    half = z / (1 + z * z / effective) * math.sqrt(p * (1 - p) / effective + z * z / (4 * effective**2))
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half))


def within(e: Estimate, bounds: tuple[float, float] | None) -> Estimate:
    """``e`` with its interval cut to ``bounds`` (low, high), the range its figure cannot leave; as it is without.

    >>> within(Estimate(0.5, -5.853, 6.853), (0.0, 1.0)), within(Estimate(0.5, -5.853, 6.853), None).high
    (Estimate(value=0.5, low=0.0, high=1.0), 6.853)
    """
    if bounds is None or e.low is None:
        return e
    return Estimate(e.value, max(e.low, bounds[0]), min(e.high, bounds[1]))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` of ``n`` samples (``c`` of them passing) passes, drawn without
    replacement: the unbiased pass@k estimator.

    >>> pass_at_k(8, 0, 4), pass_at_k(8, 8, 1), pass_at_k(4, 1, 2), pass_at_k(8, 5, 4)
    (0.0, 1.0, 0.5, 1.0)
    """
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def majority_passes(answers: list[str | None], passed: list[bool]) -> bool:
    """Whether the most common answer among a prompt's samples passes (maj@n); no answer at all fails.
    A tie goes to the answer seen first.

    >>> majority_passes(["7", "3", "7", None], [True, False, True, False])
    True
    >>> majority_passes(["3", "7", "7", "3"], [False, True, True, False])
    False
    """
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return False
    top = max(counts.values())
    winner = next(a for a in answers if a is not None and counts[a] == top)
    return any(ok for a, ok in zip(answers, passed, strict=True) if a == winner)


def summarize(
    scores: list[list[float]],
    threshold: float,
    ks: list[int],
    answers: list[list[str | None]] | None = None,
    bounds: tuple[float, float] | None = None,
) -> dict:
    """Mean, pass rate, pass@k (each k no larger than the fewest samples of a prompt) and, with ``answers``,
    maj@n of one reward, each with its interval (none from fewer than ``MIN_PROMPTS`` prompts; the mean's cut to
    ``bounds``, the reward's range, when it has one). ``scores[i]`` are prompt i's judged scores (None left out);
    prompts with no judged score are left out."""
    kept = [i for i, s in enumerate(scores) if s]
    if not kept:
        return {}

    def shown(e: Estimate) -> dict:
        return (e if len(kept) >= MIN_PROMPTS else Estimate(e.value, None, None)).as_dict()

    per_prompt = [scores[i] for i in kept]
    counts = [len(s) for s in per_prompt]
    passed = [[x >= threshold for x in s] for s in per_prompt]
    out = {
        "mean_ci": shown(within(mean_interval([sum(s) / len(s) for s in per_prompt], counts), bounds)),
        "pass_rate_ci": shown(rate_interval([sum(p) / len(p) for p in passed], counts)),
        "pass_at": {},
    }
    for k in ks:
        if k <= min(counts):
            values = [pass_at_k(len(p), sum(p), k) for p in passed]
            # n samples hold n // k disjoint draws of k: what the estimate is worth when it cannot vary (0 or 1)
            out["pass_at"][str(k)] = shown(rate_interval(values, [c // k for c in counts]))
    if answers is not None:
        votes = [float(majority_passes(answers[i], [x >= threshold for x in scores[i]])) for i in kept]
        out["maj"] = {"n": min(counts), **shown(rate_interval(votes, [1] * len(votes)))}
    return out


def paired(before: list[float | None], after: list[float | None], weights: list[float]) -> Estimate | None:
    """``after`` minus ``before`` (per-prompt values on the same prompts and seeds), with a paired t interval;
    prompts missing a value on either side are left out; None when none is left."""
    kept = [(b, a, w) for b, a, w in zip(before, after, weights, strict=True) if b is not None and a is not None and w > 0]
    if not kept:
        return None
    return mean_interval([a - b for b, a, _ in kept], [w for _, _, w in kept])


def verdict(diff: Estimate | None, unit: str = "prompt") -> str:
    """One line: ``better: +0.34 [+0.21, +0.47]``, ``worse: ...`` or ``no detectable difference: ...``; ``unit`` names
    what the difference was paired over (prompts of an eval, seeds of a benchmark).

    >>> verdict(Estimate(0.34, 0.21, 0.47)), verdict(Estimate(0.05, -0.1, 0.2))
    ('better: +0.34 [+0.21, +0.47]', 'no detectable difference: +0.05 [-0.10, +0.20]')
    """
    if diff is None:
        return f"not compared (no {unit} scored on both sides)"
    if diff.low is None:
        return f"no interval (one {unit}): {diff.value:+.2f}"
    word = "better" if diff.low > 0 else "worse" if diff.high < 0 else "no detectable difference"
    return f"{word}: {diff.value:+.2f} [{diff.low:+.2f}, {diff.high:+.2f}]"
