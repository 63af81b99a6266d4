"""Text answers: the completion's final answer against the row's reference, compared as words, for questions whose
answer is a name or a phrase (a capital, a date written out, a label) rather than a number.

Both sides are normalised the way reading-comprehension benchmarks do (SQuAD's rule): case folded, punctuation and
the articles a, an, the dropped, spaces collapsed; so ``The Eiffel Tower.`` answers ``eiffel tower``. A reference
column may hold one answer or a list of accepted ones (aliases).
"""

import re
import unicodedata

from grpo_ext.core.text import shown
from grpo_ext.rewards.api import ReferenceReward, completion_text
from grpo_ext.rewards.maths import final_answer
from grpo_ext.rewards.registry import register

# "Answer: Paris", "Final answer - Paris", "The answer is Paris." (the last such line wins); a dash only with a space
# after it, so that "the answer-key" is no answer line
_ANSWER_LINE = re.compile(r"(?im)^.*?\banswer\s*(?:is\b|[:：]|-(?=\s))\s*(\S.*?)\s*$")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
MODES = ("exact", "contains")


def normalized(text: str) -> str:
    """The words of ``text`` as compared: case folded, punctuation and articles dropped, spaces collapsed.

    >>> normalized("  The Eiffel-Tower, Paris! "), normalized("Ärzte"), normalized("U.S.A.")
    ('eiffeltower paris', 'ärzte', 'usa')
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c for c in text if not unicodedata.category(c).startswith("P"))
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_text(text: str, limit: int = 1000) -> str | None:
    """The final answer of a completion: its last ``<answer>`` tag or ``\\boxed{}``, else its last ``Answer: ...``
    line (or "the answer is ..."), else its last non-empty line; None when it has none or it is over ``limit``
    characters.

    >>> answer_text("Let me look.\\nAnswer: Paris"), answer_text("<answer>Tokyo</answer>"), answer_text("Nairobi.\\n")
    ('Paris', 'Tokyo', 'Nairobi.')
    >>> answer_text("The answer is Oslo."), answer_text("   "), answer_text("x" * 2000)
    ('Oslo.', None, None)
    """
    marked = final_answer(text, limit)
    if marked is not None and marked[0] in ("tag", "boxed"):
        return marked[1]
    lines = _ANSWER_LINE.findall(text)
    if not lines:
        lines = [line for line in text.splitlines() if line.strip()]
    answer = lines[-1].strip() if lines else ""
    return answer if answer and len(answer) <= limit else None


def references(value) -> list[str]:
    """The accepted answers a row gives, normalised: one value, or a list of aliases; empty when there are none.

    >>> references("The Nile"), references(["USA", "United States", None]), references(None), references(1969)
    (['nile'], ['usa', 'united states'], [], ['1969'])
    """
    values = value if isinstance(value, list | tuple) else [value]
    found = [normalized(str(v)) for v in values if v is not None and not isinstance(v, bool)]
    return [f for f in found if f]


class AnswerMatch(ReferenceReward):
    """The ``answer_match`` reward (see ``answer_match`` for what it scores); picklable."""

    __name__ = "answer_match"

    def __init__(self, answer_column: str = "answer", mode: str = "exact", max_answer_chars: int = 1000):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        super().__init__(answer_column, max_answer_chars)
        self.mode = mode

    def answer_of(self, completion) -> str | None:
        """The final answer as compared, for majority voting; None when the completion has none.

        >>> AnswerMatch().answer_of("Answer: the Nile."), AnswerMatch().answer_of("")
        ('nile', None)
        """
        found = answer_text(completion_text(completion), self.max_answer_chars)
        if found is None:
            return None
        return normalized(found) or None  # an answer of punctuation alone is no answer

    def why_none(self, row: dict, index: int = 0) -> str:
        """Why a completion of ``row`` scored None: the row has no reference text."""
        return f"the {self.answer_column!r} column holds no reference text ({shown(row.get(self.answer_column), 40)})"

    def score(self, text: str, gold_value) -> float | None:
        golds = references(gold_value)
        if not golds:
            return None  # nothing to compare with: the row is left out, as math_accuracy leaves out an unparsable one
        answer = self.answer_of(text)
        if answer is None:
            return 0.0
        if self.mode == "exact":
            return float(answer in golds)
        padded = f" {answer} "
        return float(any(f" {gold} " in padded for gold in golds))


@register("answer_match", factory=True)
def answer_match(answer_column: str = "answer", mode: str = "exact", max_answer_chars: int = 1000) -> AnswerMatch:
    """1.0 when the completion's final answer is the reference text (case, punctuation and articles aside), else 0.0.

    For answers that are words, not numbers (``math_accuracy`` is for those). The final answer is the last
    ``<answer>`` tag or ``\\boxed{}``, else the last ``Answer: ...`` line, else the last non-empty line; ask for one of
    these in the system prompt. The reference comes from the column ``answer_column``: one answer, or a list of
    accepted ones; a row without one scores None. ``mode: contains`` also accepts an answer that holds the
    reference as whole words (``Paris, France`` for ``Paris``): kinder to a small model, but a policy can learn to
    list several candidates, so watch the samples.

    >>> reward = answer_match()
    >>> reward(["Answer: The Nile.", "Answer: Amazon", "I think it is the Nile"], answer=["nile", "nile", "nile"])
    [1.0, 0.0, 0.0]
    >>> answer_match(mode="contains")(["Answer: Paris, France", "Answer: Parisian"], answer=[["Paris"], ["Paris"]])
    [1.0, 0.0]
    """
    return AnswerMatch(answer_column, mode, int(max_answer_chars))
