"""Why a reward scored one completion None, for ``grpo-ext rewards score``, which owes its user a reason.

A built-in reward's reason is worked out from the same functions it scores by, for the one rule that gives it None:
``code_tests`` reads its tests with ``cases_of``, ``math_accuracy`` (and ``math_closeness``, ``cosine_accuracy``)
its reference with ``reference_answer``, ``answer_match`` with ``references``. A reward of the user's gives no
reason; its None is named as its own. Training gives no per-sample reason: None there leaves the sample out of its
group's baseline, and the watchdog speaks when every sample of several steps goes unscored.
"""

import ast
import functools

import yaml

from grpo_ext.core.text import shown
from grpo_ext.core.values import kind_of
from grpo_ext.rewards import answers, code, judge, maths

TEST_FORMS = "Python statements with top-level asserts, a list of such strings, or input/output pairs"


def reason(fn, row: dict, index: int = 0) -> str:
    """Why ``fn`` scored the completion of ``row`` (its columns, one value each) None; ``index``: which completion of
    the call it was, for a reward that keeps what it did for each (``llm_judge`` its replies).

    >>> reason(code.code_tests(), {"tests": "assert f(1) ==\\nassert f(2) == 3"})
    "the 'tests' column holds no test this reward reads (read as Python: SyntaxError at line 1: invalid syntax)"
    >>> reason(maths.math_accuracy(), {"answer": " "})
    "the 'answer' column holds no reference answer (' ')"
    """
    if isinstance(fn, functools.partial) and isinstance(fn.keywords.get("accuracy"), maths.MathAccuracy):
        fn = fn.keywords["accuracy"]  # cosine_accuracy scores None where math_accuracy does
    if isinstance(fn, code.CodeTests):
        return _code_tests(fn.tests_column, row.get(fn.tests_column))
    if isinstance(fn, maths.MathAccuracy):
        value = row.get(fn.answer_column)
        gold = maths.reference_answer(value)
        if gold is None:
            return f"the {fn.answer_column!r} column holds no reference answer ({shown(value, 40)})"
        return f"math-verify could not judge the answer against the reference {shown(gold, 40)} (unparsable, or out of time)"
    if isinstance(fn, answers.AnswerMatch):
        value = row.get(fn.answer_column)
        return f"the {fn.answer_column!r} column holds no reference text ({shown(value, 40)})"
    if isinstance(fn, judge.Judge):
        low, high = fn.settings["low"], fn.settings["high"]
        if index < len(fn.replies) and fn.replies[index] is None:
            return "the judge's request failed (the warning says why)"
        return f"the judge's reply held no grade from {low:g} to {high:g} for it"
    return "the reward returned None and gives no reason (training leaves such a sample out of its group's baseline)"


def _code_tests(column: str, value) -> str:
    if code.cases_of(value) is not None:  # readable tests: its other None is a case the sandbox could not run
        return "the sandbox could not run one of its test cases, so the row cannot be judged"
    return f"the {column!r} column holds no test this reward reads ({_why_no_tests(value)})"


def _why_no_tests(value) -> str:
    """What a tests cell holds that ``code.cases_of`` does not read."""
    if not isinstance(value, str):
        return f"a {kind_of(value)} {shown(value, 40)}; tests are {TEST_FORMS}"
    if not value.strip():
        return "an empty text"
    try:
        ast.parse(value)
    except SyntaxError as exc:
        return f"read as Python: SyntaxError at line {exc.lineno}: {exc.msg}"
    if code.cases_of(_yaml(value)) is not None:  # pairs written out as text: the column holds a string, not a list
        return (
            "Python with no top-level assert, but the text of input/output pairs: give the pairs as a list, not as "
            "text (in rewards score, --column-yaml tests=...)"
        )
    return "Python with no top-level assert; each top-level assert is one test case"


def _yaml(text: str):
    """``text`` read as YAML (JSON included), or None when it does not read."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None
