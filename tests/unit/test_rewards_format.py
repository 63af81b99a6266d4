"""Format and shaping rewards: tables of completions and expected scores."""

import pytest

from grpo_ext.core.errors import RecipeError
from grpo_ext.rewards import build
from grpo_ext.rewards.formats import regex_match, tag_count, think_answer_format
from grpo_ext.rewards.shaping import cosine_accuracy, overlong_penalty, repetition_penalty

FORMAT = [
    # completion, lenient, strict
    ("<think>\n3+4\n</think>\n<answer>\n7\n</answer>", 1.0, 1.0),  # the canonical layout
    ("<think>\n3+4\n</think>\n<answer>\n7\n</answer>\n", 1.0, 1.0),  # a trailing newline
    ("<think>3+4</think> <answer>7</answer>", 1.0, 0.0),  # tags not on their own lines
    ("  <think>3+4</think>\n\n<answer>7</answer>  ", 1.0, 0.0),  # surrounding whitespace
    ("\n3+4\n</think>\n<answer>\n7\n</answer>", 1.0, 1.0),  # the template wrote '<think>' into the prompt
    ("3+4\n</think>\n<answer>\n7\n</answer>", 1.0, 1.0),  # ... or '<think>\n'
    ("<answer>7</answer>", 0.0, 0.0),  # no thinking
    ("<think>3+4</think>", 0.0, 0.0),  # no answer
    ("<answer>7</answer><think>3+4</think>", 0.0, 0.0),  # wrong order
    ("<think>a</think><answer>7</answer><answer>8</answer>", 0.0, 0.0),  # two answers
    ("<think><think>a</think></think><answer>7</answer>", 0.0, 0.0),  # nested
    ("<think>a</think>text between<answer>7</answer>", 0.0, 0.0),  # text outside the blocks
    ("", 0.0, 0.0),  # empty
]


@pytest.mark.parametrize("text,lenient,strict", FORMAT)
def test_think_answer_format(text, lenient, strict):
    assert think_answer_format()([text]) == [lenient]
    assert think_answer_format(strict=True)([[{"role": "assistant", "content": text}]]) == [strict]


@pytest.mark.parametrize(
    "pattern,full,text,expected",
    [
        (r"\d+", False, "about 42 of them", 1.0),  # a match anywhere
        (r"\d+", True, "about 42 of them", 0.0),  # full match required
        (r"\d+", True, "42", 1.0),
        (r"^A.*Z$", False, "A\nmiddle\nZ", 1.0),  # '.' spans lines
        (r"yes|no", False, "maybe", 0.0),
    ],
)
def test_regex_match(pattern, full, text, expected):
    assert regex_match(pattern, full=full)([text]) == [expected]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("<think>a</think><answer>b</answer>", 1.0),  # all four marks once
        ("a</think><answer>b</answer>", 1.0),  # pre-filled <think>
        ("<think>a</think>", 0.5),  # half the marks
        ("<think>a</think><think>b</think>", 0.0),  # repeated marks earn nothing
        ("plain text", 0.0),
    ],
)
def test_tag_count(text, expected):
    assert tag_count()([text]) == [expected]


@pytest.mark.parametrize("length,expected", [(0, 0.0), (6, 0.0), (7, -0.25), (8, -0.5), (10, -1.0), (50, -1.0)])
def test_overlong_penalty_in_characters(length, expected):
    assert overlong_penalty(max_length=10, soft_margin=4)(["x" * length]) == [expected]


def test_overlong_penalty_counts_tokens_when_given():
    reward = overlong_penalty(max_length=10, soft_margin=4)
    assert reward(["short text", "x"], completion_ids=[[1] * 8, [1] * 12]) == [-0.5, -1.0]


@pytest.mark.parametrize(
    "text,ngram,expected",
    [
        ("one two three four", 2, 0.0),  # no repeats
        ("go go go go go", 2, -0.75),  # 4 bigrams, 1 distinct
        ("Go go GO", 1, -2 / 3),  # case-insensitive
        ("hi", 3, 0.0),  # shorter than n
        ("", 1, 0.0),
    ],
)
def test_repetition_penalty(text, ngram, expected):
    assert repetition_penalty(ngram=ngram)([text]) == [pytest.approx(expected)]


@pytest.mark.parametrize(
    "text,answer,expected",
    [
        ("#### 7", "7", 0.9956),  # right, 6 chars: 0.5 + 0.5 * (1 + cos(0.06 pi)) / 2
        ("7 " * 60 + "#### 7", "7", 0.5),  # right but at the length limit
        ("#### 8", "7", -0.9956),  # wrong, 6 chars: the mirror image, near wrong_short
        ("8 " * 60 + "#### 8", "7", -0.5),  # wrong after long thought
        ("#### 7", "not a number", None),  # no reference: not judged
    ],
)
def test_cosine_accuracy(text, answer, expected):
    score = cosine_accuracy(max_length=100)([text], answer=[answer])[0]
    assert score == (None if expected is None else pytest.approx(expected, abs=1e-4))


@pytest.mark.parametrize(
    "name,args,expected",
    [
        ("overlong_penalty", {"max_length": 10}, "rewards[0].args: missing a required argument: 'soft_margin'"),
        ("overlong_penalty", {"max_length": 10, "soft_margin": 20}, "rewards[0].args: 'overlong_penalty' rejected its arguments"),
        ("regex_match", {"pattern": "("}, "is not a valid regular expression"),
        ("tag_count", {"tags": []}, "tags must be a non-empty list"),
        ("repetition_penalty", {"ngram": 0}, "need an integer ngram >= 1"),
        ("think_answer_format", {"strct": True}, "rewards[0].args: got an unexpected keyword argument 'strct'"),
    ],
)
def test_bad_arguments_are_recipe_errors(name, args, expected, tmp_path):
    with pytest.raises(RecipeError) as info:
        build(name, args, tmp_path, "rewards[0]")
    assert expected in info.value.problems[0]


def test_rewards_pickle():
    """TRL may pickle rewards (e.g. to send them to other processes); a factory's reward survives it."""
    import pickle

    for fn in (
        think_answer_format(),
        regex_match("x"),
        tag_count(),
        overlong_penalty(10, 2),
        repetition_penalty(),
        cosine_accuracy(10),
    ):
        assert pickle.loads(pickle.dumps(fn)).__name__ == fn.__name__
