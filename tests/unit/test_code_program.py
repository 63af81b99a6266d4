"""Which program ``code_tests`` runs for a completion: a table of the shapes small models write."""

import pytest

from grpo_ext.rewards.code import program_of

F = "```python\n{}\n```"
DEF = "def area(w, h):\n    return w * h"

# (the completion, whether its cases are Python tests, the program that runs)
CASES = [
    (F.format(DEF), True, DEF + "\n"),  # one block
    (DEF, True, DEF),  # no fence: the whole text
    # the right function, then an example of its use: the example is left out (it used to be the program, scoring 0.0)
    (f"Here it is:\n{F.format(DEF)}\nExample usage:\n{F.format('print(area(2, 3))  # 6')}", True, DEF + "\n"),
    # the right function, then asserts of its own that are wrong: they cannot fail the program
    (F.format(DEF) + "\nTests:\n" + F.format("assert area(2, 3) == 5"), True, DEF + "\n"),
    # a helper in one block, the function in the next: both, in order
    (F.format("def half(x):\n    return x / 2") + "\n" + F.format("def tri(b, h):\n    return half(b * h)"), True,
     "def half(x):\n    return x / 2\n\ndef tri(b, h):\n    return half(b * h)\n"),
    # an import in a block of its own
    (F.format("import math") + F.format("def r(x):\n    return x"), True, "import math\n\ndef r(x):\n    return x\n"),
    # a first try, then a corrected one: both run, the later definition wins
    (F.format("def f(x):\n    return x") + "Oops, fixed:\n" + F.format("def f(x):\n    return x + 1"), True,
     "def f(x):\n    return x\n\ndef f(x):\n    return x + 1\n"),
    # an interactive session (does not parse as a program) after the function
    (F.format(DEF) + F.format(">>> area(2, 3)\n6"), True, DEF + "\n"),
    # no python block, one unmarked block
    ("```\n" + DEF + "\n```", True, DEF + "\n"),
    # a python block before a shell block: the python one
    (F.format(DEF) + "```bash\npython area.py\n```", True, DEF + "\n"),
    # a script that reads stdin defines nothing: the last block is the program
    (F.format("n = int(input())\nprint(n * 2)"), True, "n = int(input())\nprint(n * 2)\n"),
    # stdin and stdout cases: the last block, whatever the others define
    (F.format(DEF) + F.format("print(area(*map(int, input().split())))"), False, "print(area(*map(int, input().split())))\n"),
]  # fmt: skip


@pytest.mark.parametrize("text,tests,program", CASES)
def test_the_program_a_completion_means(text, tests, program):
    assert program_of(text, tests) == program
