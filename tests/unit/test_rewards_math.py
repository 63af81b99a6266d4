"""math_accuracy and math_closeness: tables of (completion, reference, score), plain text and chat alike, and the time limit."""

import contextlib
import os
import signal
import threading

import pytest

from grpo_ext.rewards import verify
from grpo_ext.rewards.maths import final_answer, math_accuracy, math_closeness, plain_number
from tests.helpers import best_beside, cpu_spin

CASES = [
    # completion, reference answer, expected score
    ("So the total is \\boxed{72}.", "72", 1.0),  # boxed
    ("So the total is \\boxed{71}.", "72", 0.0),  # boxed, wrong
    ("48 + 24 = 72\n#### 72", "72", 1.0),  # GSM8K marker
    ("<think>48+24</think><answer>72</answer>", "72", 1.0),  # answer tag
    ("She sold 48 and then 24, so 72 clips.", "72", 1.0),  # last number
    ("72 clips, or 70 if two broke.", "72", 0.0),  # the last number is the answer
    ("The answer is $1,250$.", "1250", 1.0),  # thousands separator
    ("\\boxed{\\frac{3}{4}}", "0.75", 1.0),  # fraction = decimal, fast path
    ("I think 3/4", "\\frac{6}{8}", 1.0),  # slash fraction = LaTeX fraction
    ("\\boxed{2.50}", "2.5", 1.0),  # trailing zero
    ("\\boxed{\\$18}", "18", 1.0),  # currency sign
    ("\\boxed{0.333333}", "\\frac{1}{3}", 1.0),  # math-verify's rounding to 6 places
    ("\\boxed{0.33}", "\\frac{1}{3}", 0.0),  # too coarse
    ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", 1.0),  # symbolic, via math-verify
    ("The final answer is $\\frac{1092}{94}$.", "\\frac{546}{47}", 1.0),  # inline math, not its last digit group
    ("so in the end there are \\frac{1500}{484}", "$\\frac{750}{242}$", 1.0),  # LaTeX without delimiters, last in the text
    ("so in the end there are \\sqrt{329}/2.", "$\\frac{\\sqrt{329}}{2}$", 1.0),  # ... symbolic
    ("\\boxed{\\sqrt{47}/2}", "\\frac{\\sqrt{46}}{2}", 0.0),  # different numbers, settled by evaluation
    ("\\boxed{x^2+1}", "1+x^2", 1.0),  # expression
    ("\\boxed{(1,2]}", "(1,2]", 1.0),  # interval, same text
    ("I don't know", "72", 0.0),  # no answer
    ("", "72", 0.0),  # empty completion
    ("\\boxed{", "72", 0.0),  # unclosed box
    ("\\boxed{72}", "Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", 1.0),  # GSM8K solution as reference
    ("\\boxed{72}", "", None),  # no reference: not judged
    ("\\boxed{72}", None, None),  # missing reference
    ("\\boxed{72}", "no answer here", None),  # unparseable reference
    ("so " + "9" * 5000, "72", 0.0),  # a number past Python's int() limit of 4300 digits is no answer (it raised)
    ("so 1/" + "9" * 5000, "72", 0.0),  # ... nor is a fraction with such a denominator
    ("so 72", "9" * 5000, None),  # a reference past that limit cannot be judged (it raised)
]


@pytest.mark.parametrize("completion,answer,expected", CASES)
def test_plain_text(completion, answer, expected):
    assert math_accuracy()([completion], answer=[answer]) == [expected]


@pytest.mark.parametrize("completion,answer,expected", CASES[:6])
def test_chat_messages(completion, answer, expected):
    assert math_accuracy()([[{"role": "assistant", "content": completion}]], answer=[answer]) == [expected]


def test_answer_column_is_configurable():
    reward = math_accuracy(answer_column="solution")
    assert reward(["#### 4"], solution=["4"], prompts=["p"]) == [1.0]
    with pytest.raises(ValueError, match="no 'solution' column reached the reward .*set args.answer_column"):
        reward(["#### 4"], answer=["4"])


@pytest.mark.parametrize(
    "text,expected",
    [
        ("\\boxed{1} then \\boxed{2}", ("boxed", "2")),  # the last box wins
        ("\\boxed{\\frac{1}{2}}", ("boxed", "\\frac{1}{2}")),  # nested braces
        ("#### 5\nmore text", ("marker", "5")),  # marker line only
        ("x" * 2000 + "\\boxed{" + "1" * 2000 + "}", None),  # an answer over the length limit is no answer
    ],
)
def test_final_answer(text, expected):
    assert final_answer(text) == expected


@pytest.mark.parametrize("text,expected", [("-7", -7), ("+7", None), ("1/0", None), ("\\dfrac{1}{2}", 0.5), ("12.", 12)])
def test_plain_number(text, expected):
    assert plain_number(text) == expected


ADVERSARIAL = [
    # completion, reference, score: each scored, on any thread, within the CPU limit of one check
    ("\\boxed{10^{10^{10^{10}}}}", "5", 0.0),  # exponent tower: evaluating it never ends (refused before math-verify)
    ("$10^{10^{10^{10}}}$", "5", 0.0),  # the same without a box
    ("\\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}", "1", 0.0),  # 10,000 nested parentheses
    ("$" + "(" * 10_000 + "1" + ")" * 10_000 + "$", "\\frac{1}{2}", 0.0),  # the same, symbolic reference
    ("The answer is 7. " * 61_700 + "\\boxed{7}", "7", 1.0),  # a 1 MB completion
    ("\\boxed{\\frac{{1}{2}\\sqrt[}{3}}", "\\frac{1}{2}", 0.0),  # invalid LaTeX
    ("$\\left( \\frac{1}{2 \\right]$ \\end{align}", "\\frac{1}{2}", 0.0),  # invalid LaTeX, unbalanced
    ("\\boxed{10^{100000000}+1}", "5", None),  # sympy computes the power for minutes: cut off at the CPU limit, not judged
]
ADVERSARIAL_IDS = ["tower", "tower-bare", "parens", "parens-symbolic", "1MB", "latex", "latex2", "huge-power"]


def _score(completion, answer, results):
    results.append(math_accuracy()([completion], answer=[answer]))


@pytest.mark.parametrize("completion,answer,score", ADVERSARIAL, ids=ADVERSARIAL_IDS)
def test_adversarial_is_scored_on_any_thread(completion, answer, score):
    """math-verify's own time limit (signal.alarm) works only on the main thread; the worker's works on any. The
    join's bound is liveness, not speed: past the checker's own backstop (verify.stall_seconds), only a hang fails it."""
    results = []
    _score(completion, answer, results)
    thread = threading.Thread(target=_score, args=(completion, answer, results))
    thread.start()
    thread.join(timeout=2 * verify.stall_seconds(0.5))
    assert results == [[score], [score]]


@pytest.mark.timing
@pytest.mark.parametrize("completion,answer,score", ADVERSARIAL, ids=ADVERSARIAL_IDS)
def test_adversarial_costs_no_more_than_the_cpu_limit(completion, answer, score):
    """A hostile answer costs at most what an ordinary symbolic check does plus the CPU limit of one check (0.5 s):
    measured beside that reference, a check of ordinary cost followed by 0.5 s of this process's own CPU time."""
    reward = math_accuracy(time_limit=0.5)
    reward(["\\boxed{\\sqrt{2}}"], answer=["\\sqrt{3}"])  # start the verify worker outside the timing
    work, reference = best_beside(
        lambda: reward([completion], answer=[answer]),
        lambda: (reward(["\\boxed{x^2+1}"], answer=["1+x^2"]), cpu_spin(0.5)),
    )
    assert work < 2 * reference, f"{work:.2f} s against {reference:.2f} s"


def test_an_answer_that_runs_out_of_time_is_counted_not_judged():
    """Under the guard training runs rewards in, a check cut off at its CPU limit is one sample scored None, counted
    in the step's reward_none/math_accuracy; the right answer beside it still scores 1.0."""
    from grpo_ext.rewards.guard import Guarded, reward_meter

    guarded = Guarded(math_accuracy(time_limit=0.5), "math_accuracy", timeout=60)
    scores = guarded(completions=["\\boxed{10^{100000000}+1}", "\\boxed{x^2+1}"], answer=["5", "1+x^2"])
    logs = {"reward": 1.0}
    reward_meter([guarded]).on_log(None, None, None, logs=logs)
    assert (scores, logs["reward_none/math_accuracy"]) == ([None, 1.0], 1)


def test_overrunning_check_is_not_judged_and_the_next_one_works():
    """A check that would run for minutes is killed at its CPU limit and scores None (not judged, not wrong); the
    pool keeps answering after it."""
    reward = math_accuracy(time_limit=0.5)
    assert reward(["\\boxed{10^{100000000}+1}", "\\boxed{x^2+1}"], answer=["5", "1+x^2"]) == [None, 1.0]
    assert reward(["\\boxed{\\frac{\\sqrt{2}}{2}}"], answer=["\\frac{1}{\\sqrt{2}}"]) == [1.0]


@contextlib.contextmanager
def workers_stopped(seconds: float | None):
    """Every idle verify worker stopped (SIGSTOP): a check sent to one waits, using no CPU, as it would on a machine
    whose cores are all taken, until it is resumed after ``seconds`` (never when None)."""
    pids = [worker.pid for worker in verify.checker().idle]
    assert pids, "no idle worker to stop"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    timers = [threading.Timer(seconds, os.kill, (pid, signal.SIGCONT)) for pid in pids] if seconds is not None else []
    for timer in timers:
        timer.start()
    try:
        yield
    finally:
        for timer in timers:
            timer.join()


BUSY = [
    # completion, reference: right answers that need math-verify (each takes it well under 0.5 s of CPU)
    ("\\boxed{x^2+1}", "1+x^2"),  # expression
    ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}"),  # symbolic
    ("so in the end there are \\sqrt{329}/2.", "$\\frac{\\sqrt{329}}{2}$"),  # LaTeX without delimiters
]


@pytest.mark.parametrize("completion,answer", BUSY)
def test_a_right_answer_is_right_on_a_busy_machine(completion, answer):
    """The check's worker gets no CPU for 1.5 s, three times its 0.5 s limit: a wall-clock limit scored these 0.0
    (as four tests did when the machine was busy); the limit counts the worker's own CPU time, so they score 1.0."""
    reward = math_accuracy(time_limit=0.5)
    assert reward([completion], answer=[answer]) == [1.0]  # a worker is idle and warm
    with workers_stopped(1.5):
        assert reward([completion], answer=[answer]) == [1.0]


def test_a_worker_that_never_answers_is_given_up_unjudged(monkeypatch):
    """A worker stopped for good: the check is given up at the wall-time backstop (here 1 s), not judged (None), and
    a new worker answers the next one."""
    monkeypatch.setattr(verify, "STALL_SECONDS", 1.0)
    reward = math_accuracy(time_limit=0.01)
    reward(["\\boxed{\\sqrt{2}}"], answer=["\\sqrt{3}"])
    with workers_stopped(None):
        assert reward(["\\boxed{x^2+1}"], answer=["1+x^2"]) == [None]
    assert math_accuracy()(["\\boxed{x^2+1}"], answer=["1+x^2"]) == [1.0]


def test_registered_with_arguments(tmp_path):
    from grpo_ext import rewards
    from grpo_ext.core.errors import RecipeError

    assert rewards.build("math_accuracy", {"answer_column": "gold"}, tmp_path, "rewards[0]")(["#### 3"], gold=["3"]) == [1.0]
    with pytest.raises(
        RecipeError, match="rewards\\[0\\].args: 'math_accuracy' rejected its arguments: .*time_limit must be positive"
    ):
        rewards.build("math_accuracy", {"time_limit": 0}, tmp_path, "rewards[0]")


CLOSENESS = [
    # completion, reference answer, expected score (defaults: near 0.5, tolerance 1.0)
    ("Ava has 7 + 3 = 10 apples.", "Ava has 7 + 3 = 10 apples.\n#### 10", 1.0),  # right
    ("Ava has 7 + 3 = 9 apples.", "10", 0.45),  # one off: 0.5 * (1 - 1/10)
    ("so 15", "10", 0.25),  # half the reference off
    ("so 25", "10", 0.0),  # farther than the reference itself: nothing
    ("so -2", "0", 0.0),  # a reference of 0 measures distance in units
    ("so 0.5", "0", 0.25),
    ("\\boxed{3/4}", "1", 0.375),  # fractions compare exactly
    ("I don't know", "10", 0.0),  # no answer
    ("\\boxed{x+1}", "10", 0.0),  # not a number
    ("\\boxed{x^2+1}", "1+x^2", 1.0),  # symbolic and right, as in math_accuracy
    ("\\boxed{7}", "no answer here", None),  # a reference that cannot be judged
    ("#### 1" + "0" * 400, "10", 0.0),  # a distance past a float's 1e308 is far: nothing (it raised OverflowError)
    ("so " + "9" * 5000, "10", 0.0),  # past Python's int() limit: no answer (it raised ValueError)
]


@pytest.mark.parametrize("completion,answer,expected", CLOSENESS)
def test_closeness(completion, answer, expected):
    reward = math_closeness(time_limit=5.0)  # the symbolic case goes to math-verify; room for a busy machine
    assert reward([completion], answer=[answer]) == [pytest.approx(expected) if expected is not None else None]


def test_closeness_keeps_every_right_answer_above_every_wrong_one():
    reward = math_closeness(near=0.9, tolerance=10.0)
    right, nearest = reward(["#### 1000", "#### 999"], answer=["1000", "1000"])
    assert right == 1.0 and nearest < 0.9
    assert math_closeness(tolerance=0.1)(["so 9", "so 8"], answer=["10", "10"]) == [0.0, 0.0]


def test_closeness_pass_rate_is_accuracy():
    """At the eval's pass threshold of 1.0 the two rewards pass exactly the same samples."""
    texts = [text for text, _, _ in CASES]
    answers = [answer for _, answer, _ in CASES]
    exact = math_accuracy(time_limit=5.0)(texts, answer=answers)
    close = math_closeness(time_limit=5.0)(texts, answer=answers)
    assert [s == 1.0 for s in exact] == [s == 1.0 for s in close]
    assert [s is None for s in exact] == [s is None for s in close]


@pytest.mark.parametrize(
    "args,message",
    [
        ({"near": 1.0}, "near must be between 0 and 1"),
        ({"near": 0}, "near must be between 0 and 1"),
        ({"tolerance": 0}, "tolerance must be positive"),
        ({"time_limit": -1}, "time_limit must be positive"),
    ],
)
def test_closeness_refuses_bad_arguments(tmp_path, args, message):
    from grpo_ext import rewards
    from grpo_ext.core.errors import RecipeError

    with pytest.raises(RecipeError, match=f"rewards\\[1\\].args: 'math_closeness' rejected its arguments: .*{message}"):
        rewards.build("math_closeness", args, tmp_path, "rewards[1]")
