"""What a program can do to pass tests it fails, and what tests can ask of an honest program: each row a program, the
tests it meets, and whether the sandbox passes it. Every forgery row fails; every honest row passes. Real processes,
the sandbox as training runs it (namespaces where the kernel allows them)."""

from textwrap import dedent

import pytest

from grpo_ext import sandbox

LIMITS = sandbox.Limits(wall_seconds=10, cpu_seconds=5, memory_mb=512)
ADD_TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4"
WRONG_ADD = "def add(a, b):\n    return a - b\n"


def wrong_add_then(code: str) -> str:
    return WRONG_ADD + dedent(code)


# (what the program tries, the program, its tests): each must fail
FORGERIES = [
    # the old harness's pass token and result pipe, read from argv and written back
    ("settings from /proc/self/cmdline", wrong_add_then("""
        import json, os
        args = open('/proc/self/cmdline', 'rb').read().split(b'\\0')
        s = json.loads(args[-2] or args[-1])
        os.write(s['fd'], s['token'].encode())
        os._exit(0)
        """), ADD_TESTS),
    ("the parent's argv", wrong_add_then("import os\nprint(open(f'/proc/{os.getppid()}/cmdline').read())"), ADD_TESTS),
    # the old harness's caller frame held the token and the descriptor
    ("the caller's frame", wrong_add_then("""
        import os, sys
        f = sys._getframe(1)
        while f:
            loc = f.f_locals
            if 'token' in loc and 'fd' in loc:
                os.write(loc['fd'], loc['token'].encode())
                os._exit(0)
            f = f.f_back
        """), ADD_TESTS),
    ("descriptors written by guess, then an exit", wrong_add_then("""
        import os
        for fd in range(3, 64):
            try:
                os.write(fd, b'\\0\\0\\0\\x02[]' * 4)
            except OSError:
                pass
        os._exit(0)
        """), ADD_TESTS),
    ("a reply forged on every pipe", wrong_add_then("""
        import os, struct
        for fd in range(3, 16):
            try:
                os.write(fd, struct.pack('>I', 6) + b'["ok"]')
            except OSError:
                pass
        """), ADD_TESTS),
    ("AssertionError replaced", wrong_add_then("""
        import builtins
        class Never(Exception):
            pass
        builtins.AssertionError = Never
        """), ADD_TESTS),
    ("sys.modules rewritten", wrong_add_then("import sys\nsys.modules['builtins'].__dict__['AssertionError'] = KeyError"),
     ADD_TESTS),
    ("a value equal to everything", dedent("""
        class Any:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def add(a, b):
            return Any()
        """), ADD_TESTS),
    ("an int equal to everything", dedent("""
        class I(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def add(a, b):
            return I(0)
        """), ADD_TESTS),
    ("a str equal to everything", dedent("""
        class S(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__
        def greet(n):
            return S('')
        """), "assert greet('Al') == 'Hello, Al'"),
    ("a value that orders below everything", dedent("""
        class Low:
            def __lt__(self, other):
                return True
        def cost(x):
            return Low()
        """), "assert cost(5) < 1"),
    ("a value that claims to be an int", dedent("""
        class Fake:
            __class__ = int
            def __eq__(self, other):
                return True
            def __index__(self):
                return 0
            def __int__(self):
                return 0
        def add(a, b):
            return Fake()
        """), ADD_TESTS),
    ("a truthy object for a falsy answer", dedent("""
        class T:
            def __bool__(self):
                return True
        def is_even(n):
            return T()
        """), "assert not is_even(3)"),
    ("an atexit handler", wrong_add_then("import atexit, os\natexit.register(lambda: os._exit(0))"), ADD_TESTS),
    ("sys.exit(0) before the tests", "def add(a, b):\n    return a + b\nimport sys\nsys.exit(0)", ADD_TESTS),
    ("os._exit(0) before the tests", "def add(a, b):\n    return a + b\nimport os\nos._exit(0)", ADD_TESTS),
    ("sys.exit(0) inside a call", "import sys\ndef add(a, b):\n    sys.exit(0)", ADD_TESTS),
    ("os._exit(0) inside a call", "import os\ndef add(a, b):\n    os._exit(0)", ADD_TESTS),
    ("SystemExit raised inside a call", "def add(a, b):\n    raise SystemExit(0)", ADD_TESTS),
    ("the tests read from its folder", dedent("""
        import os
        seen = [open('../' + n).read() for n in os.listdir('..') if n.endswith('.py')]
        def add(a, b):
            return 0
        """), ADD_TESTS),
    ("the tests read from stdin", dedent("""
        import sys
        seen = sys.stdin.read()
        def add(a, b):
            return int(seen.split('== ')[1][0])
        """), ADD_TESTS),
    ("every process killed", wrong_add_then("""
        import os, signal
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        """), ADD_TESTS),
    ("a thread that ends the process", wrong_add_then("""
        import os, threading, time
        threading.Thread(target=lambda: (time.sleep(0.05), os._exit(0))).start()
        """), ADD_TESTS),
]  # fmt: skip


@pytest.mark.parametrize("what,program,tests", FORGERIES, ids=[f[0] for f in FORGERIES])
def test_no_forgery_passes(what, program, tests):
    if "kill" in program and "user" not in sandbox.provider().isolation():
        pytest.skip("without a user id of its own, the program would kill every process of the user running the tests")
    result = sandbox.provider().run(program, tests, None, LIMITS)
    assert result.status != "passed", f"{what}: {result}"


# (what the tests ask, an honest program, its tests): each must pass
HONEST = [
    ("a plain call", "def add(a, b):\n    return a + b", ADD_TESTS),
    ("a list sorted in place", "def sort_in_place(xs):\n    xs.sort()",
     "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]"),
    ("a dict filled in place", "def fill(d):\n    d['a'] = 1", "d = {}\nfill(d)\nassert d == {'a': 1}"),
    ("a class and its methods", dedent("""
        class Stack:
            def __init__(self):
                self.items = []
            def push(self, x):
                self.items.append(x)
            def pop(self):
                return self.items.pop()
            def __len__(self):
                return len(self.items)
        """), dedent("""
        s = Stack()
        s.push(1)
        s.push(2)
        assert len(s) == 2
        assert s.pop() == 2
        assert isinstance(s, Stack)
        assert s.items == [1]
        """)),
    ("a generator", "def squares(n):\n    for i in range(n):\n        yield i * i",
     "assert list(squares(4)) == [0, 1, 4, 9]\nassert sum(squares(1000)) == 332833500"),
    ("an exception the tests expect", dedent("""
        def root(x):
            if x < 0:
                raise ValueError('negative')
            return x ** 0.5
        """), dedent("""
        try:
            root(-1)
        except ValueError:
            pass
        else:
            raise AssertionError('no error')
        assert root(4) == 2.0
        """)),
    ("its own exception, a ValueError", dedent("""
        class Empty(ValueError):
            pass
        def first(xs):
            if not xs:
                raise Empty('empty')
            return xs[0]
        """), "try:\n    first([])\nexcept ValueError:\n    pass\nelse:\n    assert False"),
    ("a function of the tests' passed in", "def apply_twice(f, x):\n    return f(f(x))",
     "assert apply_twice(lambda v: v * 3, 2) == 18"),
    ("tuples, sets, bytes, None, floats", "def stats(xs):\n    return (min(xs), max(xs)), set(xs), bytes(xs), None, sum(xs) / 3",
     "assert stats([1, 2, 2]) == ((1, 2), {1, 2}, b'\\x01\\x02\\x02', None, 5 / 3)"),
    ("fractions", "from fractions import Fraction\ndef half(x):\n    return Fraction(x, 2)",
     "from fractions import Fraction\nassert half(3) == Fraction(3, 2)\nassert half(4) == 2"),
    ("a namedtuple is a tuple", "from collections import namedtuple\nP = namedtuple('P', 'x y')\norigin = lambda: P(0, 0)",
     "assert origin() == (0, 0)"),
    ("a Counter is a dict", "from collections import Counter\ndef count(s):\n    return Counter(s)",
     "assert count('aab') == {'a': 2, 'b': 1}"),
    ("a big integer and a float", "def big():\n    return 2 ** 4000, 0.1 + 0.2", "assert big() == (2 ** 4000, 0.1 + 0.2)"),
    ("helpers and imports in the tests", "def add(a, b):\n    return a + b", dedent("""
        import math
        def check(x):
            return add(x, x) == 2 * x
        assert all(check(i) for i in range(50))
        assert math.isclose(add(0.1, 0.2), 0.3)
        """)),
    ("a constant the program defines", "LIMIT = 10\ndef under(x):\n    return x < LIMIT", "assert LIMIT == 10\nassert under(3)"),
    ("two objects compared by the program's own __eq__", dedent("""
        class P:
            def __init__(self, x):
                self.x = x
            def __eq__(self, other):
                return isinstance(other, P) and other.x == self.x
        """), "assert P(1) == P(1)\nassert P(1) != P(2)"),
    ("str and repr of an object", "class P:\n    def __repr__(self):\n        return 'P()'",
     "assert repr(P()) == 'P()'\nassert str(P()) == 'P()'"),
    ("a file it wrote", "def save(name):\n    open(name, 'w').write('hi')\n    print('saved')",
     "save('x.txt')\nassert open('x.txt').read() == 'hi'"),
]  # fmt: skip


@pytest.mark.parametrize("what,program,tests", HONEST, ids=[h[0] for h in HONEST])
def test_honest_programs_pass(what, program, tests):
    result = sandbox.provider().run(program, tests, None, LIMITS)
    assert result.status == "passed", f"{what}: {result}"


def test_a_failed_test_names_its_line():
    result = sandbox.provider().run(WRONG_ADD, ADD_TESTS, None, LIMITS)
    assert result.status == "failed"
    assert "tests.py line 1: assert add(1, 2) == 3: AssertionError" in result.stderr


def test_the_command_line_cannot_be_forged(capsys):
    """The forgery as a user meets it: ``rewards score`` of a program that reads the harness's settings."""
    from grpo_ext import cli

    forged = FORGERIES[0][1]
    assert cli.main(["rewards", "score", "code_tests", "--completion", forged, "--column", "tests=assert False"]) == 0
    assert capsys.readouterr().out.strip().startswith("code_tests: 0.0")


@pytest.mark.timing
@pytest.mark.parametrize("tests", ["assert f() == 1", ""], ids=["with tests", "a script"])
def test_a_run_past_its_wall_limit_ends_at_the_limit(tests):
    """At its wall limit the harness kills and reaps what is left and ends: the time past the limit is about one
    quick run's (the start and the teardown), measured beside it."""
    quick = min(sandbox.provider().run("def f():\n    return 1", tests, None, LIMITS).seconds for _ in range(3))
    limits = sandbox.Limits(wall_seconds=2, cpu_seconds=5, memory_mb=512)
    took = sandbox.provider().run("import time\ntime.sleep(60)\ndef f():\n    return 1", tests, None, limits).seconds
    assert took < limits.wall_seconds + 3 * quick + 0.5, f"{took:.2f} s at a limit of 2 s; a quick run took {quick:.2f} s"
