"""The ``python`` tool on real processes: what the model reads back for each kind of program it might send, within
the tool's limits, and that it is the same sandbox the code reward uses (nothing written outside its folder)."""

import time
from pathlib import Path

import pytest

from grpo_ext.sandbox import local
from grpo_ext.tools.library import OUTPUT_CHARS, PYTHON_LIMITS, find, python

# (the program the model sends, what it reads back)
ANSWERS = [
    ("print(sum(range(1, 101)))", "5050"),
    ("x = 6 * 7\nprint(x)\nprint(x + 1)", "42\n43"),
    ("print(1 / 0)", "error: ZeroDivisionError: division by zero"),
    ("print('so far')\nraise ValueError('bad input')", "so far\nerror: ValueError: bad input"),  # output before the error kept
    ("def f(:\n    pass", "error: SyntaxError: invalid syntax"),
    ("x = 1", "(the program printed nothing; print the values you want to see)"),
    ("print(2)\nimport sys\nsys.exit(0)", "2"),  # a program that ends itself with success has finished
    ("import sys\nsys.exit(3)", "error: exited early (status 3)"),
    ("while True:\n    pass", f"error: the program ran longer than {PYTHON_LIMITS.wall_seconds:g} s and was stopped"),
    ("x = bytearray(2 << 30)", "error: MemoryError"),  # past memory_mb: Python raises before the kernel kills it
]


@pytest.mark.parametrize("code,answer", ANSWERS)
def test_what_the_model_reads_back(code, answer):
    assert python(code) == answer


def test_long_output_is_cut():
    got = python("print('x' * 5000)")
    assert got == "x" * OUTPUT_CHARS + f"... ({5000 - OUTPUT_CHARS} more characters)"


def test_nothing_carries_over_and_nothing_is_left(tmp_path):
    before = set(local.base_folder().glob("grpo_ext_sandbox_*"))
    assert python("open('kept.txt', 'w').write('a')\nx = 5\nprint('written')") == "written"
    assert python("import os\nprint(os.path.exists('kept.txt'))\nprint('x' in globals())") == "False\nFalse"
    assert set(local.base_folder().glob("grpo_ext_sandbox_*")) <= before


def test_a_call_that_never_ends_is_stopped_at_its_wall_limit():
    """Liveness, not speed: a program that would sleep for 10 minutes is stopped by the tool's wall limit (5 s), which
    the message names, well inside ten times that limit: a slower interpreter start cannot come near the cap."""
    t0 = time.monotonic()
    answer = python("import time\ntime.sleep(600)")
    assert answer == f"error: the program ran longer than {PYTHON_LIMITS.wall_seconds:g} s and was stopped"
    assert time.monotonic() - t0 < 10 * PYTHON_LIMITS.wall_seconds


def test_the_recipe_names_it():
    tool, is_factory = find("python", Path("."))
    assert is_factory and tool() is python
