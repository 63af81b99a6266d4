"""Intervals, pass@k and maj@n where users see them: the recipe key, the scored result, the tables, report.md."""

import pytest

from grpo_ext import recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.results import report, scoring


@pytest.mark.parametrize(
    "pass_at, problem",
    [
        (None, None),  # the default: 1 and eval.samples
        ([1, 4, 8], None),  # any k from 1 to samples
        ([16], "eval.pass_at: [16]: give whole numbers from 1 to eval.samples (8), e.g. [1, 8]"),  # more than sampled
        ([0, 2], "eval.pass_at: [0, 2]: give whole numbers"),  # k = 0 means nothing
        ([1.5], "eval.pass_at: [1.5]: give whole numbers"),  # not a count
        ([], "eval.pass_at: []: give whole numbers"),  # an empty list asks for nothing
    ],
)
def test_pass_at_key(pass_at, problem, digit_doc):
    digit_doc["eval"]["pass_at"] = pass_at
    if problem is None:
        assert recipe.validate(digit_doc).data["eval"]["pass_at"] == pass_at
    else:
        with pytest.raises(RecipeError) as info:
            recipe.validate(digit_doc)
        assert any(problem in line for line in info.value.lines()), info.value.lines()


def test_settings_pass_at_defaults_to_1_and_samples(digit_doc):
    digit_doc["eval"]["samples"] = 4
    assert scoring.settings(recipe.validate(digit_doc), bf16=False).pass_at == (1, 4)
    digit_doc["eval"]["pass_at"] = [2, 1, 2]
    assert scoring.settings(recipe.validate(digit_doc), bf16=False).pass_at == (1, 2)  # sorted, once each


class LastWord:
    """A reward that extracts an answer (the last word) and passes it when it is 'yes'."""

    __name__ = "last_word"

    def __call__(self, completions, **kwargs):
        return [1.0 if self.answer_of(c) == "yes" else 0.0 if self.answer_of(c) else None for c in completions]

    def answer_of(self, completion):
        words = completion.split()
        return words[-1] if words else None


def test_score_keeps_per_prompt_scores_and_adds_intervals():
    rows = [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}]
    completions = [["so yes", "yes", "no", "no"], ["yes", "no", "", "no"], ["yes", "yes", "yes", "no"]]
    out = scoring.score(rows, completions, [LastWord()], chat=False, pass_threshold=1.0, pass_at=(1, 2))
    r = out["rewards"]["last_word"]
    # an empty completion scores None: left out of its prompt, as of the pass rate
    assert r["per_prompt"] == [[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]
    assert r["pass_rate"] == round(6 / 11, 4) and r["pass_rate_ci"]["value"] == round(6 / 11, 4)
    assert r["pass_rate_ci"]["low"] < r["pass_rate"] < r["pass_rate_ci"]["high"]
    assert r["mean_ci"]["low"] < r["mean"] < r["mean_ci"]["high"]
    assert set(r["pass_at"]) == {"1", "2"}
    # majority answers: a tie yes/no goes to 'yes' (seen first); 'no' wins b; 'yes' wins c
    assert r["maj"]["n"] == 3 and r["maj"]["value"] == round(2 / 3, 4)


def test_no_majority_vote_for_a_reward_without_answers():
    out = scoring.score([{"prompt": "a"}, {"prompt": "b"}], [["1"], ["2"]], [len_reward], chat=False, pass_threshold=1.0)
    assert "maj" not in out["rewards"]["len_reward"]


def len_reward(completions, **kwargs):
    return [float(len(c)) for c in completions]


COLUMN = {
    "rewards": {
        "r": {
            "mean": 0.5,
            "pass_rate": 0.5,
            "mean_ci": {"value": 0.5, "low": 0.3, "high": 0.7},
            "pass_rate_ci": {"value": 0.5, "low": 0.25, "high": 0.75},
            "pass_at": {"1": {"value": 0.5, "low": 0.25, "high": 0.75}, "4": {"value": 0.9, "low": 0.6, "high": 0.98}},
            "maj": {"n": 4, "value": 0.5, "low": 0.2, "high": 0.8},
        }
    },
    "mean_length": 3.0,
}


def test_table_shows_intervals_pass_at_and_majority():
    rows = [" ".join(line.split()) for line in report.score_table({"before": COLUMN, "after": None})[2:]]
    assert rows == [
        "r 0.500 ±0.200 0.500 [0.25, 0.75] - -",  # mean ± half the interval; a rate with [low, high]
        "pass@4 0.900 [0.60, 0.98] -",  # pass@1 is the pass rate, not repeated
        "maj@4 0.500 [0.20, 0.80] -",
        "mean length (tokens) 3.0 -",
    ]
    md = report.score_markdown({"before": COLUMN})
    assert md[2:5] == [
        "| r | 0.500 ±0.200 | 0.500 [0.25, 0.75] |",
        "| r pass@4 |  | 0.900 [0.60, 0.98] |",
        "| r maj@4 |  | 0.500 [0.20, 0.80] |",
    ]


@pytest.mark.parametrize(
    "before_s, after_s, train_s, expected",
    [
        (5.0, 5.0, 90.0, "| eval share of eval + training time | 10% |"),  # 10 s of 100
        (None, 5.0, 45.0, "| eval share of eval + training time | 10% |"),  # resumed: no eval before timed
        (5.0, 5.0, None, None),  # no training time: no share
    ],
)
def test_report_shows_changes_and_eval_share(tmp_path, before_s, after_s, train_s, expected):
    before = {**COLUMN, "prompts": 8, "seconds": before_s}
    summary = {
        "status": "completed",
        "steps": 4,
        "train_seconds": train_s,
        "eval_before": before,
        "eval_after": {**COLUMN, "prompts": 8, "seconds": after_s},
        "eval_change": {"r": {"verdict": "better: +0.34 [+0.21, +0.47]"}},
    }
    text = report.report_markdown(tmp_path, summary, {"eval": {"samples": 4, "pass_threshold": 1.0}}, [])
    assert "- After vs before, pass rate of r: better: +0.34 [+0.21, +0.47]" in text
    assert "Intervals are 95% and count prompts" in text
    share = [line for line in text.splitlines() if "eval share" in line]
    assert share == ([expected] if expected else [])
