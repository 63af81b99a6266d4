"""answer_match: text answers against a reference column, as words."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_ext.core.errors import RecipeError
from grpo_ext.rewards import build
from grpo_ext.rewards.answers import AnswerMatch, normalized

CALLED = [  # a tool conversation: only the assistant's own words are the answer
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": {"key": "France"}}}]},
    {"role": "tool", "name": "lookup", "content": "Paris"},
    {"role": "assistant", "content": "The capital is Paris.\nAnswer: Paris"},
]
TOOL_SAID_IT = [CALLED[0], CALLED[1], {"role": "assistant", "content": "I do not know."}]


@pytest.mark.parametrize(
    "completion,reference,mode,expected",
    [
        ("Answer: Paris", "Paris", "exact", 1.0),
        ("answer:   PARIS!", "paris", "exact", 1.0),  # case and punctuation aside
        ("Answer: The Nile", "Nile", "exact", 1.0),  # articles aside
        ("Let me think.\nThe answer is Oslo.\nDone thinking? no", "Oslo", "exact", 1.0),  # the last answer line
        ("Answer: Rome\nAnswer: Paris", "Rome", "exact", 0.0),  # the last one counts
        ("Final answer - Lima", "Lima", "exact", 1.0),
        ("See the answer-key\nLima", "Lima", "exact", 1.0),  # a hyphenated word is no answer line
        ("<answer>Tokyo</answer> and then Kyoto", "Tokyo", "exact", 1.0),
        ("so \\boxed{Nairobi}", "Nairobi", "exact", 1.0),
        ("Nairobi", "Nairobi", "exact", 1.0),  # no marker: the last line
        ("Answer: Paris, France", "Paris", "exact", 0.0),
        ("Answer: Paris, France", "Paris", "contains", 1.0),
        ("Answer: Parisian", "Paris", "contains", 0.0),  # whole words only
        ("Answer: New York City", "New York", "contains", 1.0),
        ("Answer: USA", ["United States", "USA"], "exact", 1.0),  # a list of aliases
        ("Answer: U.S.A.", ("usa",), "exact", 1.0),
        ("Answer: 1969", 1969, "exact", 1.0),  # a number in the column
        ("", "Paris", "exact", 0.0),
        ("Answer: ...", "Paris", "exact", 0.0),  # punctuation alone is no answer
        ("Answer: Paris", None, "exact", None),  # no reference: left out
        ("Answer: Paris", [], "exact", None),
        ("Answer: Paris", "  ", "exact", None),
        (CALLED, "Paris", "exact", 1.0),
        (TOOL_SAID_IT, "Paris", "exact", 0.0),  # the tool's result is not the model's answer
    ],
)
def test_answer_match_table(completion, reference, mode, expected):
    assert build("answer_match", {"mode": mode}, Path("."), "rewards[0]")([completion], answer=[reference]) == [expected]


def test_answer_column_and_its_absence():
    reward = build("answer_match", {"answer_column": "capital"}, Path("."), "rewards[0]")
    assert reward.columns == ("capital",)  # the data check before any model loads reads this
    assert reward(["Answer: Lima"], capital=["Lima"]) == [1.0]
    with pytest.raises(ValueError, match=r"no 'capital' column reached the reward \(dataset columns: answer\)"):
        reward(["Answer: Lima"], answer=["Lima"])


def test_a_mode_it_does_not_know_is_one_line():
    with pytest.raises(RecipeError, match=r"mode must be one of exact, contains, got 'fuzzy'"):
        build("answer_match", {"mode": "fuzzy"}, Path("."), "rewards[0]")


def test_answers_vote_in_their_compared_form():
    reward = AnswerMatch()
    assert {reward.answer_of(t) for t in ["Answer: The Nile.", "answer: nile", "<answer>NILE</answer>"]} == {"nile"}
    assert reward.answer_of("   ") is None


LINE = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=40).filter(
    lambda t: "answer" not in t.casefold() and "\\boxed" not in t and "\\fbox" not in t and "\n" not in t
)


@given(LINE)
def test_any_answer_written_on_its_line_matches_itself(text):
    expected = 1.0 if normalized(text) else None  # a reference with no words is no reference
    assert AnswerMatch()([f"Answer: {text}"], answer=[text]) == [expected]
    assert normalized(normalized(text)) == normalized(text)


def test_it_survives_pickling_with_its_settings():
    """TRL may send rewards to other processes; the copy scores as the original does."""
    import pickle

    reward = build("answer_match", {"mode": "contains", "answer_column": "capital"}, Path("."), "rewards[0]")
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "answer_match" and copy.columns == ("capital",)
    assert copy(["Answer: Paris, France"], capital=["Paris"]) == [1.0]
