"""Intervals, pass@k and maj@n where users see them: the recipe key, the scored result, the tables, report.md."""

import pytest

from grpo_ext import recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.results import report, scoring
from grpo_ext.rewards.api import describe
from grpo_ext.run import sampling


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
        assert recipe.validate(digit_doc).eval.pass_at == pass_at
    else:
        with pytest.raises(RecipeError) as info:
            recipe.validate(digit_doc)
        assert any(problem in line for line in info.value.lines()), info.value.lines()


def test_settings_pass_at_defaults_to_1_and_samples(digit_doc):
    digit_doc["eval"]["samples"] = 4
    assert sampling.settings(recipe.validate(digit_doc), bf16=False).pass_at == (1, 4)
    digit_doc["eval"]["pass_at"] = [2, 1, 2]
    assert sampling.settings(recipe.validate(digit_doc), bf16=False).pass_at == (1, 2)  # sorted, once each


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


def sevens(completions, **kwargs):
    """A reward that says no range: the number of 7s."""
    return [float(c.count("7")) for c in completions]


@pytest.mark.parametrize(
    "prompts, rows, note",
    [
        # (prompts, the table's rows for digit_exact (range [0, 1]) and sevens (no range), the line under the table)
        (1, ["digit_exact 1.000 1.000", "sevens 1.000 1.000"], "too few prompts for an interval: 1 prompt judged"),
        (2, ["digit_exact 0.500 0.500", "sevens 0.500 0.500"], "too few prompts for an interval: 2 prompts judged"),
        (  # 0.667 +- 1.434: digit_exact's interval cut to its range, shown as [low, high]; sevens' as it is
            3,
            ["digit_exact 0.667 [0.00, 1.00] 0.667 [0.04, 0.99]", "sevens 0.667 ±1.434 0.667 [0.04, 0.99]"],
            None,
        ),
        (30, ["digit_exact 0.500 ±0.190 0.500 [0.32, 0.68]", "sevens 0.500 ±0.190 0.500 [0.32, 0.68]"], None),
    ],
)
def test_an_interval_never_leaves_the_rewards_range_nor_stands_on_too_few_prompts(prompts, rows, note):
    """A reward in [0, 1] on 2 prompts printed 0.500 ±6.353."""
    from grpo_ext.rewards.digit import digit_exact

    completions = [["7"] * 8 if i % 2 == 0 else ["x"] * 8 for i in range(prompts)]
    out = scoring.score([{"prompt": "?"}] * prompts, completions, [digit_exact, sevens], chat=False, pass_threshold=1.0)
    table = [" ".join(line.split()) for line in report.score_table({"before": out})]
    assert table[2:4] == rows
    assert [line for line in table[4:] if "interval" in line] == ([f"{note}; an interval takes at least 3"] if note else [])
    md = report.score_markdown({"before": out})
    assert (f"{note}; an interval takes at least 3" in md) is bool(note) and all("±" not in line or note is None for line in md)


@pytest.mark.parametrize(
    "name, args, expected",
    [
        # (a built-in reward, its args, the range of its scores an eval's mean interval is cut to)
        ("digit_exact", {}, (0.0, 1.0)),
        ("digit_shaped", {}, (0.0, 1.0)),  # partial credit, still 0 to 1
        ("math_accuracy", {}, (0.0, 1.0)),
        ("math_closeness", {}, (0.0, 1.0)),
        ("answer_match", {}, (0.0, 1.0)),
        ("code_tests", {}, (0.0, 1.0)),  # the share of tests passed
        ("think_answer_format", {}, (0.0, 1.0)),
        ("regex_match", {"pattern": "x"}, (0.0, 1.0)),
        ("tag_count", {}, (0.0, 1.0)),
        ("tool_success", {}, (0.0, 1.0)),
        ("overlong_penalty", {"max_length": 10, "soft_margin": 4}, (-1.0, 0.0)),
        ("repetition_penalty", {"max_penalty": -0.5}, (-0.5, 0.0)),  # from its args
        ("cosine_accuracy", {"max_length": 8, "wrong_short": -2.0}, (-2.0, 1.0)),  # the lowest and highest of its four ends
    ],
)
def test_built_in_rewards_state_their_range(name, args, expected, tmp_path):
    from grpo_ext.rewards import Guarded, build

    fn = build(name, args, tmp_path, "rewards[0]")
    assert describe(fn).score_range == expected
    assert Guarded(fn, name).info.score_range == expected  # as the eval holds it: under the guard


def test_a_reward_without_a_range_or_with_a_bad_one_is_not_cut():
    def own(completions, **kwargs):
        return [0.0] * len(completions)

    assert describe(own).score_range is None
    for bad in [(1, 0), (0, float("inf")), [0, 1], (0, "1"), (True, 2), (0,)]:
        own.score_range = bad
        assert describe(own).score_range is None, bad
