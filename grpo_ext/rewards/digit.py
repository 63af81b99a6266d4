"""Rewards for the digit task: answer with one integer from 0 to 9 and nothing else."""

import re

from grpo_ext.rewards.api import UNIT, completion_text
from grpo_ext.rewards.registry import register

_DIGIT = re.compile(r"[0-9]")


@register("digit_exact")
def digit_exact(completions, **kwargs) -> list[float]:
    """1.0 when the completion, stripped of surrounding whitespace, is exactly one digit 0–9; else 0.0.

    The strict rule of the task: it gives no signal until the model already answers correctly
    sometimes, so pair it with ``digit_shaped`` on a model that starts from zero.

    >>> digit_exact(["7", " 3\\n", "7.", "12", "seven"])
    [1.0, 1.0, 0.0, 0.0, 0.0]
    """
    return [1.0 if _is_single_digit(completion_text(c).strip()) else 0.0 for c in completions]


@register("digit_shaped")
def digit_shaped(completions, **kwargs) -> list[float]:
    """Partial credit on the way to one digit: 1.0 exact; 0.5 to 0.9 leads with a lone digit, more the less
    follows it; 0.2 has a digit; else 0.

    "Leads with a lone digit" means the stripped text starts with one digit not followed by another
    (``"7."``, ``"5 is my pick"``); it scores ``0.5 + 0.4 / (1 + n)`` for ``n`` characters after the
    digit (whitespace at the ends not counted), so a group that all lead with a digit still differs
    and keeps a gradient towards stopping after it. "Has a digit" is any digit anywhere
    (``"I pick 12"``). The steps give a small model a gradient towards the exact answer before it
    ever produces one.

    >>> digit_shaped(["7", "7.", "5 is my pick", "I pick 12", "no idea"])
    [1.0, 0.7, 0.5364, 0.2, 0.0]
    """
    scores = []
    for c in completions:
        text = completion_text(c).strip()
        if _is_single_digit(text):
            scores.append(1.0)
        elif text[:1] and text[:1] in "0123456789" and not _DIGIT.match(text[1:2]):
            scores.append(round(0.5 + 0.4 / (1 + len(text[1:].strip())), 4))
        elif _DIGIT.search(text):
            scores.append(0.2)
        else:
            scores.append(0.0)
    return scores


digit_exact.score_range = digit_shaped.score_range = UNIT
digit_exact.partial_credit = "digit_shaped"  # the pre-flight names it where digit_exact alone gives no gradient


def _is_single_digit(text: str) -> bool:
    return len(text) == 1 and text in "0123456789"
