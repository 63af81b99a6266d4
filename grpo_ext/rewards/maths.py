"""Math answer correctness: find the final answer in a completion and compare it with the reference.

The final answer is, in order of preference, the last ``\\boxed{...}``, the last ``<answer>...</answer>``,
the text after the last GSM8K marker ``#### ``, or else the last number in the completion. Plain
numbers and fractions (``72``, ``-1,250``, ``2.5``, ``3/4``, ``\\frac{3}{4}``) are compared exactly in
Python; anything else goes to math-verify in a worker process under a hard limit on CPU time (``verify.py``).
"""

import re
from fractions import Fraction

from grpo_ext.core.text import shown
from grpo_ext.rewards import verify
from grpo_ext.rewards.api import ReferenceReward, completion_text
from grpo_ext.rewards.registry import register

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"-?\d+/\d+|-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?|-?\.\d+")
_PLAIN = re.compile(r"(-?)(\d+(?:\.\d*)?|\.\d+)(?:/(\d+))?")
_FRAC = re.compile(r"(-?)\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_INLINE_MATH = re.compile(r"\$\$?([^$]{1,1000})\$\$?|\\\((.{1,1000}?)\\\)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?:\D|$))")
_WRAPPERS = re.compile(r"^\s*(?:\$+|\\\(|\\\[)|(?:\$+|\\\)|\\\])\s*$")
_UNIT = re.compile(r"\\text\s*\{[^{}]*\}|\\(?:mathrm|textbf|mathbf)\s*\{([^{}]*)\}")
# Digits of a plain number: Python's int() refuses more by default (sys.get_int_max_str_digits); no answer is that long.
_MAX_DIGITS = 4300


def _brace_body(text: str, start: int, limit: int) -> str | None:
    """The text inside the brace opened just before ``start``, or None if it does not close within ``limit``."""
    depth = 1
    for i in range(start, min(len(text), start + limit)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def final_answer(text: str, limit: int = 1000) -> tuple[str, str] | None:
    """(how it was marked, the answer text) for a completion, or None when it has no answer.

    An answer longer than ``limit`` characters counts as no answer: nothing that long is a final answer,
    and it would only cost time to parse.

    >>> final_answer("So x = 4, and the total is \\\\boxed{12}.")
    ('boxed', '12')
    >>> final_answer("Natalia sold 48 + 24 = 72 clips.\\n#### 72")
    ('marker', '72')
    >>> final_answer("<think>3 + 4</think><answer>7</answer>")
    ('tag', '7')
    >>> final_answer("She has 3 apples, then buys 5 more: 8 apples.")
    ('number', '8')
    >>> final_answer("The final answer is $\\\\frac{3}{4}$.")
    ('math', '\\\\frac{3}{4}')
    >>> final_answer("so there are \\\\frac{3}{4}.")
    ('math', '\\\\frac{3}{4}')
    >>> final_answer("no idea") is None, final_answer("the total is " + "9" * 5000) is None
    (True, True)
    """
    boxed = list(_BOXED.finditer(text[-200_000:]))
    if boxed:
        tail = text[-200_000:]
        body = _brace_body(tail, boxed[-1].end(), limit)
        return ("boxed", body) if body is not None else None
    open_tag = text.rfind("<answer>")
    if open_tag >= 0:
        close = text.find("</answer>", open_tag)
        body = text[open_tag + 8 : close if close >= 0 else len(text)].strip()
        return ("tag", body) if body and len(body) <= limit else None
    marker = text.rfind("####")
    if marker >= 0:
        body = text[marker + 4 :].strip().split("\n", 1)[0].strip()
        return ("marker", body) if body and len(body) <= limit else None
    tail = text[-10_000:]
    numbers = list(_NUMBER.finditer(tail))
    if not numbers:
        return None
    last = numbers[-1]
    math = [m for m in _INLINE_MATH.finditer(tail) if m.end() >= last.end()]
    if math and math[0].start() <= last.start():
        return "math", (math[0].group(1) or math[0].group(2)).strip()
    start = max(tail.rfind(c, 0, last.start()) for c in " \n\t") + 1
    end = last.end() + len(re.match(r"\S*", tail[last.end() :]).group())
    token = tail[start:end].rstrip(".,;:!?")
    if "\\" in token:  # LaTeX without delimiters, such as \frac{3}{4} or \sqrt{2}/2
        return "math", token
    return ("number", last.group()) if len(last.group()) <= limit else None


def reference_answer(value) -> str | None:
    """The reference answer's text: GSM8K solutions keep only what follows ``#### ``.

    >>> reference_answer("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\\n#### 72")
    '72'
    >>> reference_answer(0.5)
    '0.5'
    """
    if value is None or isinstance(value, bool):
        return None
    text = str(value)
    if "####" in text:
        text = text.rsplit("####", 1)[1]
    text = text.strip()
    return text or None


def plain_number(text: str) -> Fraction | None:
    """A plain number or fraction as an exact Fraction, else None (left to math-verify).

    >>> [plain_number(t) for t in ["72", "$1,250.50", "-3/4", "\\\\frac{3}{4}", "50\\\\%", "x + 1", "9" * 5000]]
    [Fraction(72, 1), Fraction(2501, 2), Fraction(-3, 4), Fraction(3, 4), Fraction(50, 1), None, None]
    """
    if sum(c.isdigit() for c in text) > _MAX_DIGITS:
        return None
    text = _UNIT.sub(lambda m: m.group(1) or "", text)
    text = _WRAPPERS.sub("", text).strip().rstrip(".").strip()
    text = text.removeprefix("\\$").removeprefix("$").removesuffix("\\%").removesuffix("%").strip()
    text = _THOUSANDS.sub("", text)
    match = _PLAIN.fullmatch(text) or _FRAC.fullmatch(text)
    if not match:
        return None
    sign, num, den = match.groups()
    if den is not None and int(den) == 0:
        return None
    value = Fraction(num) / (int(den) if den is not None else 1)
    return -value if sign else value


_TOWER = re.compile(r"\^\s*(?:\{[^{}]*|\d+\s*)\^")
_BIG_FACTORIAL = re.compile(r"\d{4,}\s*!")


def _squash(text: str) -> str:
    return re.sub(r"\s+|\$", "", text)


def _decimals(text: str) -> int:
    match = re.search(r"\.(\d+)", text)
    return len(match.group(1)) if match else 0


class MathAccuracy(ReferenceReward):
    """The ``math_accuracy`` reward (see ``math_accuracy`` for what it scores); picklable."""

    __name__ = "math_accuracy"
    partial_credit = "math_closeness"  # the pre-flight names it where math_accuracy alone gives no gradient

    def __init__(self, answer_column: str = "answer", time_limit: float = 0.5, max_answer_chars: int = 1000):
        if time_limit <= 0:
            raise ValueError(f"time_limit must be positive, got {time_limit}")
        super().__init__(answer_column, max_answer_chars)
        self.time_limit = time_limit

    def answer_of(self, completion) -> str | None:
        """The final answer of a completion, numbers in one form (``0.50`` and ``1/2`` are one answer), for
        majority voting; None when it has none.

        >>> MathAccuracy().answer_of("so 2/4 of it: \\boxed{0.50}"), MathAccuracy().answer_of("no idea")
        ('1/2', None)
        """
        found = final_answer(completion_text(completion), self.max_answer_chars)
        if found is None:
            return None
        number = plain_number(found[1])
        return str(number) if number is not None else _squash(found[1])

    def score(self, text: str, gold_value) -> float | None:
        return self.judge(text, gold_value)[0]

    def why_none(self, row: dict, index: int = 0) -> str:
        """Why a completion of ``row`` scored None: its reference does not parse, or math-verify did not judge.

        >>> MathAccuracy().why_none({"answer": " "})
        "the 'answer' column holds no reference answer (' ')"
        """
        value = row.get(self.answer_column)
        gold = reference_answer(value)
        if gold is None:
            return f"the {self.answer_column!r} column holds no reference answer ({shown(value, 40)})"
        return f"math-verify could not judge the answer against the reference {shown(gold, 40)} (unparsable, or out of time)"

    def judge(self, text: str, gold_value) -> tuple[float | None, Fraction | None, Fraction | None]:
        """(score, the answer as a plain number, the reference as a plain number); a number is None where it
        is not a plain number or was not needed to decide."""
        gold = reference_answer(gold_value)
        if gold is None:
            return None, None, None
        found = final_answer(text, self.max_answer_chars)
        gold_number = plain_number(gold)
        if found is None or (found[0] == "number" and gold_number is None):
            if gold_number is not None:
                return 0.0, None, gold_number
            found = ("text", text[-self.max_answer_chars :])  # a symbolic reference: math-verify finds the answer
        kind, answer = found
        pred_number = plain_number(answer)
        if gold_number is not None and pred_number is not None:
            if gold_number == pred_number:
                return 1.0, pred_number, gold_number
            if max(_decimals(answer), _decimals(gold)) < 6:
                # beyond here math-verify's rounding to 6 places could still call them equal
                return 0.0, pred_number, gold_number
        if _squash(answer) == _squash(gold):
            return 1.0, pred_number, gold_number
        if _TOWER.search(answer) or _BIG_FACTORIAL.search(answer):
            # an exponent tower or a huge factorial: evaluating it could take hours, and no reference is one
            return 0.0, pred_number, gold_number
        pred = answer if kind == "text" else f"\\boxed{{{answer}}}"
        equal = verify.checker().check(gold, pred, self.time_limit)
        return (None if equal is None else float(equal)), pred_number, gold_number


@register("math_accuracy", factory=True)
def math_accuracy(answer_column: str = "answer", time_limit: float = 0.5, max_answer_chars: int = 1000) -> MathAccuracy:
    """1.0 when the completion's final answer equals the reference answer, 0.0 when not, None when it cannot be judged.

    The final answer is the last ``\\boxed{}``, ``<answer>`` tag, GSM8K ``#### n`` line, or else the last
    number. The reference comes from the dataset column ``answer_column`` (GSM8K solutions are reduced
    to the number after ``####``). Plain numbers and fractions are compared exactly in Python; other
    answers (``\\sqrt{2}/2``, ``x^2+1``, intervals) are checked by math-verify in a worker process that
    is killed once it has used ``time_limit`` seconds of CPU time: a busy machine gives a check more wall
    time, never another verdict. A sample is None (not judged, left out of its group) when its reference
    cannot be parsed or its check ran out of time. An answer longer than ``max_answer_chars`` scores 0.0
    without being parsed.

    >>> reward = math_accuracy()
    >>> reward(["The total is \\\\boxed{72}.", "#### 71", "I think 3/4", "no answer"], answer=["72", "71", "0.75", "5"])
    [1.0, 1.0, 1.0, 0.0]
    >>> reward(["\\\\boxed{\\\\frac{\\\\sqrt{2}}{2}}", "42"], answer=["\\\\frac{1}{\\\\sqrt{2}}", "not a number"])
    [1.0, None]
    >>> reward(["so " + "9" * 5000, "\\\\boxed{" + "9" * 5000 + "}"], answer=["7", "7"])  # past Python's int() limit
    [0.0, 0.0]
    """
    return MathAccuracy(answer_column, float(time_limit), int(max_answer_chars))


class MathCloseness(MathAccuracy):
    """The ``math_closeness`` reward (see ``math_closeness`` for what it scores); picklable."""

    __name__ = "math_closeness"
    partial_credit = None  # it is the partial credit

    def __init__(self, answer_column: str = "answer", near: float = 0.5, tolerance: float = 1.0, **kwargs):
        if not 0.0 < near < 1.0:
            raise ValueError(f"near must be between 0 and 1 (a right answer scores 1.0), got {near}")
        if tolerance <= 0:
            raise ValueError(f"tolerance must be positive, got {tolerance}")
        super().__init__(answer_column, **kwargs)
        self.near = near
        self.tolerance = tolerance

    def score(self, text: str, gold_value) -> float | None:
        exact, pred, gold = self.judge(text, gold_value)
        if exact != 0.0:
            return exact  # right (1.0), or a reference that cannot be judged (None)
        if gold is None or pred is None:
            return 0.0
        distance = abs(pred - gold) / max(abs(gold), 1) / Fraction(self.tolerance)  # exact: no float holds 1e400
        return self.near * (1.0 - float(distance)) if distance < 1 else 0.0


@register("math_closeness", factory=True)
def math_closeness(
    answer_column: str = "answer",
    near: float = 0.5,
    tolerance: float = 1.0,
    time_limit: float = 0.5,
    max_answer_chars: int = 1000,
) -> MathCloseness:
    """``math_accuracy`` with partial credit: 1.0 when right, up to ``near`` for a wrong number close to the reference.

    A wrong numeric answer scores ``near * (1 - d / tolerance)``, not below 0, where ``d`` is its distance
    from the reference relative to the reference (``|answer - reference| / max(|reference|, 1)``): with
    the defaults, 9 for 10 scores 0.45 and 0 or 20 for 10 score 0.0. A right answer always scores above
    every wrong one (``near`` must be below 1), so the pass rate at 1.0 is ``math_accuracy``'s. Where
    most samples of a group are wrong, the near ones still show which way is better, where a 0/1 reward
    gives the group no spread and GRPO no gradient. Answers that are not plain numbers score as in
    ``math_accuracy``.

    >>> reward = math_closeness()
    >>> reward(["#### 10", "so 9", "12 apples", "0", "no answer"], answer=["10", "10", "10", "10", "10"])
    [1.0, 0.45, 0.4, 0.0, 0.0]
    >>> reward(["#### 1" + "0" * 400, "so " + "9" * 5000], answer=["10", "10"])  # past a float's 1e308; past int()
    [0.0, 0.0]
    """
    return MathCloseness(
        answer_column, float(near), float(tolerance), time_limit=float(time_limit), max_answer_chars=int(max_answer_chars)
    )
