"""Format rewards: the think/answer tag structure, a regular expression, and counts of tags."""

import re

from grpo_ext.rewards.api import UNIT, completion_text, named
from grpo_ext.rewards.registry import register

_STRICT = re.compile(
    r"<think>\n(?:(?!</?think>|</?answer>).)*?\n</think>\n<answer>\n(?:(?!</?think>|</?answer>).)*?\n</answer>\n?", re.DOTALL
)
_LENIENT = re.compile(
    r"\s*<think>(?:(?!</?think>|</?answer>).)*</think>\s*<answer>(?:(?!</?think>|</?answer>).)*</answer>\s*", re.DOTALL
)


def _with_think(text: str) -> str:
    """Put back an opening ``<think>`` that the chat template wrote into the prompt (with or without its newline)."""
    if "</think>" in text and "<think>" not in text:
        return ("<think>" if text.startswith("\n") else "<think>\n") + text
    return text


def _think_answer(completions, strict: bool, **kwargs) -> list[float]:
    pattern = _STRICT if strict else _LENIENT
    return [1.0 if pattern.fullmatch(_with_think(completion_text(c))) else 0.0 for c in completions]


@register("think_answer_format", factory=True)
def think_answer_format(strict: bool = False):
    """1.0 when the completion is one ``<think>...</think>`` block followed by one ``<answer>...</answer>`` block; else 0.0.

    Lenient (the default) allows any whitespace between and around the blocks; ``strict: true``
    wants each tag on its own line (``<think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>``).
    Nested or repeated tags fail both. A completion without the opening ``<think>`` but with
    ``</think>`` counts as if it had one, since some chat templates write ``<think>`` into the prompt.

    >>> lenient, strict = think_answer_format(), think_answer_format(strict=True)
    >>> texts = ["<think>\\n3+4\\n</think>\\n<answer>\\n7\\n</answer>", "<think>3+4</think> <answer>7</answer>",
    ...          "3+4</think><answer>7</answer>", "<answer>7</answer>"]
    >>> lenient(texts), strict(texts)
    ([1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0])
    """
    fn = named(_think_answer, "think_answer_format_strict" if strict else "think_answer_format", strict=bool(strict))
    fn.score_range = UNIT
    return fn


def _regex(completions, pattern: str, full: bool, **kwargs) -> list[float]:
    compiled = re.compile(pattern, re.DOTALL)
    match = compiled.fullmatch if full else compiled.search
    return [1.0 if match(completion_text(c)) else 0.0 for c in completions]


@register("regex_match", factory=True, example={"pattern": r"\d+"})
def regex_match(pattern: str, full: bool = False, name: str = "regex_match"):
    """1.0 when the completion matches ``pattern`` (a Python regular expression; ``.`` matches newlines), else 0.0.

    With ``full: true`` the whole completion must match; otherwise a match anywhere counts. ``name``
    is the metric name TRL logs.

    >>> reward = regex_match(r"^\\d+$", full=True)
    >>> reward(["42", "42 apples", ""])
    [1.0, 0.0, 0.0]
    """
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    fn = named(_regex, name, pattern=pattern, full=bool(full))
    fn.score_range = UNIT
    return fn


def _tag_count(completions, tags: tuple[str, ...], **kwargs) -> list[float]:
    marks = [m for tag in tags for m in (f"<{tag}>", f"</{tag}>")]
    return [sum(_with_think(completion_text(c)).count(m) == 1 for m in marks) / len(marks) for c in completions]


@register("tag_count", factory=True)
def tag_count(tags: list[str] | tuple[str, ...] = ("think", "answer")):
    """The share of opening and closing ``tags`` that appear exactly once: partial credit towards the format.

    With the default tags ``think`` and ``answer`` each of the four marks is worth 0.25. A missing
    opening ``<think>`` counts as present when ``</think>`` is there (a template that pre-fills it).

    >>> reward = tag_count()
    >>> reward(["<think>a</think><answer>b</answer>", "<think>a</think>", "<answer>b</answer><answer>c</answer>", "b"])
    [1.0, 0.5, 0.0, 0.0]
    """
    if not tags or not all(isinstance(t, str) and re.fullmatch(r"[\w-]+", t) for t in tags):
        raise ValueError(f"tags must be a non-empty list of tag names such as [think, answer], got {tags!r}")
    fn = named(_tag_count, "tag_count", tags=tuple(tags))
    fn.score_range = UNIT
    return fn
