"""Digit rewards: tables of completions and expected scores, plain text and chat messages alike."""

import pytest

from grpo_ext import rewards
from grpo_ext.rewards.digit import digit_exact, digit_shaped

CASES = [
    # completion, digit_exact, digit_shaped
    ("7", 1.0, 1.0),  # the answer
    ("0", 1.0, 1.0),  # zero is a digit too
    (" 3\n", 1.0, 1.0),  # surrounding whitespace is stripped (the seed's rule)
    ("7.", 0.0, 0.7),  # leads with a lone digit: 0.5 + 0.4 / (1 + characters after it)
    ("5 is my pick", 0.0, 0.5364),
    ("5 \n", 1.0, 1.0),
    ("5 \n\nok", 0.0, 0.6333),  # whitespace around the rest is not counted
    ("12", 0.0, 0.2),  # two digits: a number, not a digit
    ("I pick 4", 0.0, 0.2),  # a digit somewhere
    ("seven", 0.0, 0.0),
    ("", 0.0, 0.0),  # empty completion
    ("٣", 0.0, 0.0),  # an Arabic-Indic digit is not one of 0-9
    ("-1", 0.0, 0.2),
]


@pytest.mark.parametrize("text,exact,shaped", CASES)
def test_plain_text(text, exact, shaped):
    assert digit_exact([text]) == [exact]
    assert digit_shaped([text]) == [shaped]


@pytest.mark.parametrize("text,exact,shaped", CASES)
def test_chat_messages(text, exact, shaped):
    msg = [[{"role": "assistant", "content": text}]]
    assert digit_exact(msg) == [exact]
    assert digit_shaped(msg) == [shaped]


def test_accepts_trl_keyword_arguments():
    """TRL passes prompts, completion_ids, trainer_state, log_extra ... depending on its version."""
    out = digit_exact(
        prompts=["p", "p"],
        completions=["1", "x"],
        completion_ids=[[1], [2]],
        trainer_state=None,
        log_extra=lambda *a: None,
        log_metric=lambda *a: None,
    )
    assert out == [1.0, 0.0]


def test_registry_lists_digit_rewards():
    assert {"digit_exact", "digit_shaped"} <= set(rewards.known_names())


def test_registry_builds_by_name(tmp_path):
    fn = rewards.build("digit_exact", {}, tmp_path, "rewards[0]")
    assert fn(["4"]) == [1.0]
