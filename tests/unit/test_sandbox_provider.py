"""The sandbox's provider interface (``grpo_ext/sandbox/``): the table of providers and its default, that the
``code_tests`` reward and the ``python`` tool run their programs through the provider it gives (a stand-in here, so
no process starts), and that the local provider's harness finds the file it imports beside it."""

import ast
import sys
from pathlib import Path

import pytest

from grpo_ext import sandbox
from grpo_ext.rewards import code
from grpo_ext.sandbox import local
from grpo_ext.tools.library import PYTHON_LIMITS, python


class StandIn:
    """A provider that runs nothing: it records each call and ends every run as ``result`` says."""

    def __init__(self, result: sandbox.Result):
        self.result = result
        self.calls: list[tuple] = []

    def run(self, program, tests="", stdin=None, limits=sandbox.contract.DEFAULT_LIMITS):
        self.calls.append((program, tests, stdin, limits))
        return self.result

    def isolation(self):
        return ("stand-in",)


def test_the_table_holds_the_local_provider_as_the_default():
    assert sandbox.PROVIDERS == {"local": local} and sandbox.DEFAULT == "local"
    assert sandbox.provider() is sandbox.provider("local") is local
    assert all(isinstance(p, sandbox.Provider) for p in sandbox.PROVIDERS.values())  # run and isolation, a module too
    with pytest.raises(ValueError, match="no sandbox provider 'e2b'; the providers are local"):
        sandbox.provider("e2b")


# (how the provider ends the run, the code_tests score of one Python case, what the python tool answers)
ENDINGS = [
    (sandbox.Result("passed", "3\n", "", 0.1), 1.0, "3"),  # ran to its end
    (sandbox.Result("failed", "", "AssertionError", 0.1), 0.0, "error: AssertionError"),  # a test or the program failed
    (sandbox.Result("timeout", "", "", 5.0), 0.0, "error: the program ran longer than 5 s and was stopped"),
    (sandbox.Result("killed", "", "", 0.1), 0.0, "error: the program went over its memory or CPU limit and was stopped"),
    (sandbox.Result("error", "", "", 0.0), None, "error: this machine refused the sandbox, so the program did not run"),
]


@pytest.mark.parametrize("result,score,answer", ENDINGS, ids=[e[0].status for e in ENDINGS])
def test_the_reward_and_the_tool_run_through_the_provider(monkeypatch, result, score, answer):
    stand_in = StandIn(result)
    monkeypatch.setitem(sandbox.PROVIDERS, "local", stand_in)
    reward = code.code_tests(timeout=2.0)
    assert reward(["def f():\n    return 3"], tests=["assert f() == 3"]) == [score]
    assert python("print(3)") == answer
    (program, tests, stdin, limits), tool_call = stand_in.calls
    assert (program, tests, stdin, limits.wall_seconds) == ("def f():\n    return 3", "assert f() == 3", None, 2.0)
    assert tool_call == ("print(3)", "", None, PYTHON_LIMITS)


def test_the_harness_imports_the_calls_file_beside_it_by_its_name():
    """The harness runs as a script (``python -I -S harness.py``), not as part of the package: what it imports beyond
    the standard library is a file of its own folder, named as it is imported."""
    assert local.HARNESS.is_file() and local.HARNESS.parent == Path(local.__file__).parent
    tree = ast.parse(local.HARNESS.read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    beside = imported - set(sys.stdlib_module_names)
    assert beside == {"calls"} and all((local.HARNESS.parent / f"{name}.py").is_file() for name in beside)
