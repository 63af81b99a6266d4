"""Why a reward scored one completion None, for ``grpo-ext rewards score``, which owes its user a reason.

The reward says why, where it can (its ``why_none``, ``api.py``): a built-in reward works its reason out from the
same functions it scores by, for the one rule that gives it None (``code_tests`` reads its tests with
``cases_of``, ``math_accuracy``, ``math_closeness`` and ``cosine_accuracy`` their reference with
``reference_answer``, ``answer_match`` with ``references``). A reward that gives no reason, a user's plain function
among them, has its None named as its own. Training gives no per-sample reason: None there leaves the sample out of
its group's baseline, and the watchdog speaks when every sample of several steps goes unscored.
"""

from grpo_ext.rewards.api import describe

NO_REASON = "the reward returned None and gives no reason (training leaves such a sample out of its group's baseline)"


def reason(fn, row: dict, index: int = 0) -> str:
    """Why ``fn`` scored the completion of ``row`` (its columns, one value each) None; ``index``: which completion of
    the call it was, for a reward that keeps what it did for each (``llm_judge`` its replies).

    >>> from grpo_ext.rewards import code, maths
    >>> reason(code.code_tests(), {"tests": "assert f(1) ==\\nassert f(2) == 3"})
    "the 'tests' column holds no test this reward reads (read as Python: SyntaxError at line 1: invalid syntax)"
    >>> reason(maths.math_accuracy(), {"answer": " "})
    "the 'answer' column holds no reference answer (' ')"
    >>> reason(lambda completions, **kwargs: [None], {})
    "the reward returned None and gives no reason (training leaves such a sample out of its group's baseline)"
    """
    explain = describe(fn).why_none
    return (explain(row, index) if explain is not None else None) or NO_REASON
