"""Samples a reward left unscored, counted wherever samples are counted (the eval's log line, its tables, the
pre-flight's words), and a judge that gives every sample one grade named as such by the pre-flight, with a remedy of
its own. Pure functions over scores and eval results; the same against a judge on localhost and in a tiny run:
tests/integration/test_judge_said.py."""

import pytest

from grpo_ext.results import preflight, report


def spread(i: int) -> float:
    return 0.1 * (i % 4)  # a partial-credit reward with a spread in every group of 4


# (scores per reward, the rewards that are judges, severity, what the symptom says, what the remedy says)
FLAT = [
    # a judge that gives every sample 0.5: it cannot tell them apart, and the remedy is its rubric, model or parsing
    (
        {"llm_judge": [0.5] * 16},
        {"llm_judge"},
        "warning",
        "llm_judge gave the grade 0.5 to all 16 samples: the judge cannot tell them apart, so GRPO gets no gradient from it",
        "check the rubric, the judge model and the grades it writes",
    ),
    # the same judge beside a reward with a spread: a note, still named as a judge
    (
        {"llm_judge": [0.5] * 16, "digit_shaped": [spread(i) for i in range(16)]},
        {"llm_judge"},
        "note",
        "llm_judge gave the grade 0.5 to all 16 samples: the judge cannot tell them apart",
        "check the rubric",
    ),
    # a judge that grades 2 of 16 samples alike: the count is of the samples it scored
    (
        {"llm_judge": [0.7, None, None, None, None, None, None, None] * 2},
        {"llm_judge"},
        "warning",
        "llm_judge gave the grade 0.7 to all 2 samples it scored (14 of 16 None): the judge cannot tell them apart",
        "check the rubric",
    ),
    # a rule reward at 0 with most samples None: too strict, counted over the samples it scored
    (
        {"digit_exact": [0.0, None, None, None] * 4},
        set(),
        "warning",
        "digit_exact scored 0 on all 4 samples it scored (12 of 16 None): every group has zero spread",
        "add a partial-credit reward (digit_shaped)",
    ),
    # the same 0.5 everywhere from a reward that is not a judge: the strict-reward words, as before
    ({"mine": [0.5] * 16}, set(), "warning", "mine scored 0.5 on all 16 samples: every group has zero spread", "partial-credit"),
]


@pytest.mark.parametrize(("per_reward", "judges", "severity", "symptom", "remedy"), FLAT)
def test_a_flat_judge_is_named_as_one(per_reward, judges, severity, symptom, remedy):
    partial = {"digit_exact": "digit_shaped"}  # as digit_exact declares (partial_credit)
    _, findings = preflight.verdicts(per_reward, [1.0] * len(per_reward), 4, {}, None, frozenset(judges), partial)
    (finding,) = [f for f in findings if f.rule == "preflight_no_gradient"]
    assert finding.severity == severity
    assert finding.symptom.startswith(symptom), finding.symptom
    assert remedy in finding.remedy, finding.remedy
    assert ("too strict" in finding.cause) == (not judges), finding.cause


def result(samples: int, **judged: int) -> dict:
    """An eval's result as scoring.summarize writes it, as far as the counts go."""
    return {
        "samples": samples,
        "prompts": 2,
        "rewards": {name: {"mean": 0.5, "pass_rate": 0.0, "judged": n} for name, n in judged.items()},
    }


# (the eval's result, the count its log line gives)
COUNTS = [
    (result(4, llm_judge=1), "4 samples, 3 of them not scored by llm_judge"),  # 3 of 4 without a grade
    (result(4, llm_judge=4, digit_exact=4), "4 samples"),  # every sample scored: the count alone, as before
    (
        result(8, llm_judge=6, math_accuracy=7),
        "8 samples, 2 of them not scored by llm_judge, 1 of them not scored by math_accuracy",
    ),
    (result(1, llm_judge=0), "1 sample, 1 of them not scored by llm_judge"),
]


@pytest.mark.parametrize(("scores", "line"), COUNTS)
def test_the_eval_line_counts_the_unscored(scores, line):
    assert report.sample_count(scores) == line


UNSCORED = "not scored (None), left out of the mean and pass rate: llm_judge 3 of 4 samples before, 1 of 4 samples after"


def test_the_score_tables_count_the_unscored():
    columns = {"before": result(4, llm_judge=1), "after": result(4, llm_judge=3)}
    assert report.score_table(columns)[-1] == UNSCORED  # the terminal's table
    assert report.score_markdown(columns)[-2:] == ["", UNSCORED]  # report.md's and eval.md's, a paragraph of its own
    every = {"before": result(4, llm_judge=4), "after": result(4, llm_judge=4)}
    assert not [line for line in report.score_table(every) + report.score_markdown(every) if "not scored" in line]
