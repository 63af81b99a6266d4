"""GSM8K answer check: the completion's final number against the number after ``####`` in the answer."""

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def final_number(text: str) -> float | None:
    """The number after the last ``####``, else the last number in the text.

    >>> final_number("3 + 4 = 7 apples\\n#### 7")
    7.0
    >>> final_number("It costs $1,250.") is not None
    True
    """
    tail = text.rsplit("####", 1)[-1] if "####" in text else text
    found = _NUMBER.findall(tail)
    if not found:
        return None
    try:
        return float(found[-1 if "####" not in text else 0].replace(",", ""))
    except ValueError:
        return None


def gsm8k_correct(completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's final number equals the reference answer's, else 0.0."""
    scores = []
    for completion, ref in zip(completions, answer):
        text = completion[0]["content"] if isinstance(completion, list) else completion
        got, want = final_number(text), final_number(ref)
        scores.append(1.0 if got is not None and want is not None and abs(got - want) < 1e-6 else 0.0)
    return scores
