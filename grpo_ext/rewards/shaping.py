"""Shaping rewards: a soft penalty for overlong completions, an n-gram repetition penalty, and
correctness scaled by length (cosine).

Lengths are in tokens when TRL passes ``completion_ids`` (as it does in training), else in characters
(for example under ``grpo-ext rewards score``).
"""

import math

from grpo_ext.rewards.api import completion_text, named
from grpo_ext.rewards.maths import MathAccuracy
from grpo_ext.rewards.registry import register


def _lengths(completions, completion_ids=None) -> list[int]:
    if completion_ids is not None:
        return [len(ids) for ids in completion_ids]
    return [len(completion_text(c)) for c in completions]


def _overlong(completions, max_length: int, soft_margin: int, completion_ids=None, **kwargs) -> list[float]:
    return [_overlong_one(n, max_length, soft_margin) for n in _lengths(completions, completion_ids)]


def _overlong_one(n: int, max_length: int, soft_margin: int) -> float:
    """No penalty up to ``max_length - soft_margin`` tokens, then a linear ramp to -1 at ``max_length``."""
    start = max_length - soft_margin
    if n <= start:
        return 0.0
    if n > max_length:
        return -1.0
    return -(n - start) / soft_margin


@register("overlong_penalty", factory=True, example={"max_length": 256, "soft_margin": 64})
def overlong_penalty(max_length: int, soft_margin: int):
    """0 up to ``max_length - soft_margin``, then falling linearly to -1 at ``max_length``; -1 beyond.

    A soft limit on length: the model hears about the limit before it is cut off there. Set
    ``max_length`` to ``training.max_completion_length``.

    >>> reward = overlong_penalty(max_length=10, soft_margin=4)
    >>> reward(["x" * 6, "x" * 8, "x" * 10, "x" * 12])
    [0.0, -0.5, -1.0, -1.0]
    """
    if not (isinstance(max_length, int) and isinstance(soft_margin, int) and 0 < soft_margin <= max_length):
        raise ValueError(
            f"need integers with 0 < soft_margin <= max_length, got max_length={max_length!r}, soft_margin={soft_margin!r}"
        )
    fn = named(_overlong, "overlong_penalty", max_length=max_length, soft_margin=soft_margin)
    fn.pass_threshold = 0.0  # a penalty's best score is 0: a sample passes when it is not penalised
    fn.score_range = (-1.0, 0.0)
    return fn


def _repetition(completions, ngram: int, max_penalty: float, **kwargs) -> list[float]:
    scores = []
    for c in completions:
        words = completion_text(c).lower().split()
        grams = [tuple(words[i : i + ngram]) for i in range(len(words) - ngram + 1)]
        scores.append(0.0 if len(set(grams)) == len(grams) else max_penalty * (1 - len(set(grams)) / len(grams)))
    return scores


@register("repetition_penalty", factory=True)
def repetition_penalty(ngram: int = 3, max_penalty: float = -1.0):
    """``max_penalty`` times the share of repeated word ``ngram``-grams: 0 for text that never repeats itself.

    Words are split on whitespace and lower-cased; a completion shorter than ``ngram`` words scores 0.

    >>> reward = repetition_penalty(ngram=2)
    >>> reward(["the cat sat on the mat", "go go go go go", "hi"])
    [0.0, -0.75, 0.0]
    """
    if not isinstance(ngram, int) or ngram < 1 or max_penalty > 0:
        raise ValueError(f"need an integer ngram >= 1 and max_penalty <= 0, got ngram={ngram!r}, max_penalty={max_penalty!r}")
    fn = named(_repetition, "repetition_penalty", ngram=ngram, max_penalty=float(max_penalty))
    fn.pass_threshold = 0.0  # a penalty's best score is 0: a sample passes when it is not penalised
    fn.score_range = (float(max_penalty), 0.0)
    return fn


def _cosine(
    completions,
    accuracy: MathAccuracy,
    max_length: int,
    correct: tuple[float, float],
    wrong: tuple[float, float],
    completion_ids=None,
    **kwargs,
) -> list[float | None]:
    scores = []
    for verdict, n in zip(accuracy(completions, **kwargs), _lengths(completions, completion_ids), strict=True):
        if verdict is None:
            scores.append(None)
            continue
        short, long = correct if verdict == 1.0 else wrong
        progress = min(n, max_length) / max_length
        scores.append(long + (short - long) * 0.5 * (1 + math.cos(math.pi * progress)))
    return scores


@register("cosine_accuracy", factory=True, example={"max_length": 256})
def cosine_accuracy(
    max_length: int,
    correct_short: float = 1.0,
    correct_long: float = 0.5,
    wrong_short: float = -1.0,
    wrong_long: float = -0.5,
    answer_column: str = "answer",
):
    """``math_accuracy`` scaled by length along a cosine: a short right answer earns most, a short wrong one loses most.

    A right answer scores from ``correct_short`` (empty) down to ``correct_long`` (at ``max_length``
    and beyond); a wrong one from ``wrong_short`` up to ``wrong_long``, so the model is nudged to
    think longer when wrong and to stop when right. None where ``math_accuracy`` gives None.

    >>> reward = cosine_accuracy(max_length=100)
    >>> [round(s, 3) for s in reward(["#### 7", "7 " * 50 + "#### 7", "#### 8"], answer=["7", "7", "7"])]
    [0.996, 0.5, -0.996]
    """
    if not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
    fn = named(
        _cosine,
        "cosine_accuracy",
        accuracy=MathAccuracy(answer_column),
        max_length=max_length,
        correct=(float(correct_short), float(correct_long)),
        wrong=(float(wrong_short), float(wrong_long)),
    )
    ends = (correct_short, correct_long, wrong_short, wrong_long)  # each score lies between the two ends of its kind
    fn.score_range = (float(min(ends)), float(max(ends)))
    fn.why_none = fn.keywords["accuracy"].why_none  # None exactly where math_accuracy gives None
    return fn
