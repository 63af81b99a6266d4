"""``grpo-ext rewards score`` judges a score as training does (the guard's checks and its one line, exit 1), keeps a
``--column`` value's text as given, and says why a reward scored None (in-process; a reward that calls
``os._exit``, and rewards whose None needs the sandbox or math-verify: tests/integration/test_rewards_score_processes.py)."""

import pytest

from grpo_ext.core.errors import RunError
from grpo_ext.rewards.guard import Guarded
from tests.helpers import run_cli

REWARDS = """
import sys

def exits(completions, **kwargs):
    sys.exit(0)

def nan(completions, **kwargs):
    return [float("nan")] * len(completions)

def word(completions, **kwargs):
    return ["good"] * len(completions)

def fewer(completions, **kwargs):
    return []

def raises(completions, **kwargs):
    raise ValueError("cannot judge")

def unscored(completions, **kwargs):
    return [None] * len(completions)

def lines(completions, value, **kwargs):
    # the column's value as the reward receives it: its line count when it is text, -1 when it is not
    return [float(len(v.splitlines())) if isinstance(v, str) else -1.0 for v in value]
"""


@pytest.fixture
def rewards_file(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(REWARDS)
    monkeypatch.chdir(tmp_path)


# (reward, the one line training stops with, which rewards score prints after "error: ")
REFUSED = [
    # sys.exit(0) in the reward: not a silent success
    ("exits", "reward 'exits' raised SystemExit: 0 on a batch of 1 completions; a reward returns scores and never exits: "),
    # NaN, a word, a wrong count: training's checks of a score
    ("nan", "reward 'nan' gave nan for sample 0 of 1 (completion 'hi'); a score is a finite number or None"),
    ("word", "reward 'word' gave 'good' for sample 0 of 1 (completion 'hi'); a score is a finite number or None"),
    ("fewer", "reward 'fewer' returned 0 scores for 1 completions; return one score per completion"),
    # a raising reward: the sample, the start of its completion, the fix
    ("raises", "reward 'raises' raised ValueError: cannot judge on sample 0 of 1 (completion 'hi'); fix the reward or set "),
]


@pytest.mark.parametrize(("name", "line"), REFUSED)
def test_a_score_training_refuses_is_refused_with_its_line(name, line, rewards_file, capsys):
    assert run_cli(["rewards", "score", f"./mine.py:{name}", "--completion", "hi"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith(f"error: {line}")
    # the very line the guard gives in training (where the reward's recipe key stands, rewards[i] here)
    namespace: dict = {}
    exec(REWARDS, namespace)
    with pytest.raises(RunError) as training:
        Guarded(namespace[name], name, timeout=120.0)(completions=["hi"], prompts=[""])
    assert err == f"error: {training.value}\n"


COLUMNS = [
    # a line break in a value is kept (YAML would fold the two lines into one)
    (["--column", "value=assert f(2) == 4\nassert f(0) == 0"], "lines: 2.0"),
    # text that YAML would read as a list stays text
    (["--column", "value=[1, 2]"], "lines: 1.0"),
    # an '=' in the value belongs to the value
    (["--column", "value=a=b"], "lines: 1.0"),
    # --column-yaml reads the value as YAML: a list
    (["--column-yaml", "value=[1, 2]"], "lines: -1.0"),
]


@pytest.mark.parametrize(("options", "expected"), COLUMNS)
def test_a_column_value_is_its_text_as_given(options, expected, rewards_file, capsys):
    assert run_cli(["rewards", "score", "./mine.py:lines", "--completion", "x", *options]) == 0
    assert capsys.readouterr().out == expected + "\n"


def test_a_column_without_a_name_is_refused(rewards_file, capsys):
    assert run_cli(["rewards", "score", "./mine.py:lines", "--completion", "x", "--column", "novalue"]) == 2
    assert capsys.readouterr().err == "error: --column 'novalue': give NAME=TEXT, e.g. --column topic=cats\n"


UNSCORED = [
    # tests that do not parse as Python: where and why
    (
        ["code_tests", "--column", "tests=assert area(2, 3) == 6\nassert area(0, 5) = 0"],
        "code_tests: None; the 'tests' column holds no test this reward reads (read as Python: SyntaxError at line 2: "
        "invalid syntax)",
    ),
    # Python without an assert
    (
        ["code_tests", "--column", "tests=x = 1"],
        "code_tests: None; the 'tests' column holds no test this reward reads (Python with no top-level assert; each "
        "top-level assert is one test case)",
    ),
    # input/output pairs given as text (--column), not as a list (--column-yaml): Python with no assert, and said so
    (
        ["code_tests", "--column", "tests=[{input: '2 3', output: '5'}]"],
        "code_tests: None; the 'tests' column holds no test this reward reads (Python with no top-level assert, but the "
        "text of input/output pairs: give the pairs as a list, not as text (in rewards score, --column-yaml tests=...))",
    ),
    # YAML that is no test form
    (
        ["code_tests", "--column-yaml", "tests={cases: 3}"],
        "code_tests: None; the 'tests' column holds no test this reward reads (a dict {'cases': 3}; tests are Python "
        "statements with top-level asserts, a list of such strings, or input/output pairs)",
    ),
    # no reference answer
    (["math_accuracy", "--answer", ""], "math_accuracy: None; the 'answer' column holds no reference answer ('')"),
    (["answer_match", "--answer", " "], "answer_match: None; the 'answer' column holds no reference text (' ')"),
    # a reward of the user's: its None is its own
    (
        ["./mine.py:unscored"],
        "unscored: None; the reward returned None and gives no reason (training leaves such a sample out of its group's "
        "baseline)",
    ),
]


@pytest.mark.parametrize(("argv", "expected"), UNSCORED)
def test_none_comes_with_its_reason(argv, expected, rewards_file, capsys):
    assert run_cli(["rewards", "score", argv[0], "--completion", "def area(w, h): return w * h", *argv[1:]]) == 0
    assert capsys.readouterr().out == expected + "\n"
