"""The ``code_tests`` reward and its sandbox, on real processes: a table of programs a model might write, each
ending within its limits with the score it deserves, nothing left running and nothing written outside."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_ext import cli
from grpo_ext.rewards import code
from grpo_ext.sandbox import Limits, local
from tests.helpers import best_beside

FULL = ("net", "pid", "mount", "user")
ISOLATED = local.isolation() == FULL


def kernel_allows_namespaces() -> bool:
    """Whether this machine lets root make the namespaces, asked of util-linux's unshare, not of grpo_ext."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--net", "--pid", "--mount", "--fork", "true"], capture_output=True).returncode == 0


LIMITS = dict(timeout=3.0, cpu_seconds=2, memory_mb=512, file_mb=10, processes=32)
TESTS = "def check(n):\n    return n\nassert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 0) == 0"
OUTSIDE = Path("/work") if Path("/work").is_dir() else Path.home()  # a folder outside every sandbox's own

# (what the model wrote, the score, how many of its cases may run to the wall timeout, 3 s, before they are stopped)
CASES = [
    ("def add(a, b):\n    return a + b", 1.0, 0),  # right
    ("def add(a, b):\n    return a * b", 2 / 3, 0),  # wrong, but right for 2 + 2 and 0 + 0
    ("def add(a, b) return a + b", 0.0, 0),  # a syntax error
    ("def add(a, b):\n    while True:\n        pass", 0.0, 3),  # an infinite loop: the CPU limit (2 s), or the wall one
    ("import os\nwhile True:\n    os.fork()\ndef add(a, b):\n    return a + b", 0.0, 3),  # a fork bomb
    ("x = bytearray(4 << 30)\ndef add(a, b):\n    return a + b", 0.0, 0),  # a memory hog, past memory_mb
    ("open('big', 'wb').write(b'x' * (100 << 20))\ndef add(a, b):\n    return a + b", 0.0, 0),  # a 100 MB write
    ("import sys\ndef add(a, b):\n    return a + b\nsys.exit(0)", 0.0, 0),  # exits 0 before its tests run
    ("import os\nos._exit(0)", 0.0, 0),  # leaves at once, status 0
    ("def add(a, b):\n    return a + b\nimport time\ntime.sleep(60)", 0.0, 3),  # past the wall timeout
]


@pytest.mark.parametrize("program,score,timeouts", CASES)
def test_each_program_gets_its_score(program, score, timeouts):
    (got,) = code.code_tests(workers=2, **LIMITS)([f"```python\n{program}\n```"], tests=[TESTS])
    assert got == pytest.approx(score)


@pytest.mark.timing
@pytest.mark.parametrize("program,score,timeouts", CASES)
def test_each_program_ends_within_its_limits(program, score, timeouts):
    """Three cases, two workers: each case ends by its CPU or wall limit (a kill included). Measured beside the right
    program run the same way (the start of the same processes, which a busy machine slows alike): at most five times
    that, plus, for each case that runs into the wall timeout, twice the timeout (the limit and the harness's grace
    to end it), a wall-clock time that load does not stretch."""
    reward = code.code_tests(workers=2, **LIMITS)
    work, reference = best_beside(
        lambda: reward([f"```python\n{program}\n```"], tests=[TESTS]),
        lambda: reward([f"```python\n{CASES[0][0]}\n```"], tests=[TESTS]),
    )
    assert work < 5 * reference + timeouts * 2 * LIMITS["timeout"], f"{work:.2f} s against {reference:.2f} s"


# (program, what must hold after it ran) for what the sandbox isolates where the kernel lets it
ESCAPES = [
    f"import os\nos.system('touch {OUTSIDE}/grpo_ext_escape_1')",
    f"open('{OUTSIDE}/grpo_ext_escape_2', 'w').write('x')",
    "open('/tmp/grpo_ext_escape_3', 'w').write('x')",
    "import subprocess\nsubprocess.Popen(['sleep', '317.25'])",  # a duration no other process on the machine uses
]


@pytest.mark.parametrize("program", ESCAPES)
def test_nothing_is_written_outside_and_nothing_left_running(program):
    result = local.run(program, "", None, Limits(wall_seconds=3))
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", "sleep 317.25"], capture_output=True, text=True).stdout.split()
    assert not left, "a process the program started outlived it"
    if ISOLATED or kernel_allows_namespaces():
        assert ISOLATED, f"the kernel allows namespaces and the sandbox has only {local.isolation()}"
        for n in (1, 2, 3):
            assert not (OUTSIDE / f"grpo_ext_escape_{n}").exists() and not Path(f"/tmp/grpo_ext_escape_{n}").exists()
    assert result.status in ("passed", "failed")


@pytest.mark.skipif(not ISOLATED, reason="needs network and mount namespaces: Linux, as root")
@pytest.mark.parametrize(
    "program,error",
    [
        ("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)", "Network is unreachable"),
        ("import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint(s.getsockname())", None),
        (f"print(open('{Path.home()}/.bashrc').read())" if (Path.home() / ".bashrc").exists() else "open('/root/x')", "Error"),
    ],
)
def test_isolated_runs_reach_no_network_and_no_home(program, error):
    result = local.run(program, "", None, Limits(wall_seconds=5))
    if error is None:
        assert result.status == "passed", result.stderr  # loopback inside its own namespace works
    else:
        assert result.status == "failed" and error in result.stderr, result.stderr


def test_input_output_cases_and_all_or_nothing():
    reward = code.code_tests(all_or_nothing=True, **LIMITS)
    cases = [{"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"]}] * 2 + [None]
    assert reward(["print(int(input()) * 2)", "print(4)", "print(1)"], tests=cases) == [1.0, 0.0, None]


def test_the_command_line_scores_one_completion(capsys):
    argv = ["rewards", "score", "code_tests", "--completion", "def f(x):\n    return x * 2", "--column", "tests=assert f(2) == 4"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.strip() == "code_tests: 1.0"
    assert cli.main(["rewards", "score", "code_tests", "--completion", "x"]) == 2
    assert "pass --column tests=VALUE" in capsys.readouterr().err


def test_no_sandbox_folder_is_left():
    before = set(local.base_folder().glob("grpo_ext_sandbox_*"))
    local.run("open('x', 'w').write('y')", "", None, Limits(wall_seconds=3))
    assert set(local.base_folder().glob("grpo_ext_sandbox_*")) <= before


def test_docstring_examples():
    import doctest

    result = doctest.testmod(code)
    assert result.attempted > 0 and result.failed == 0
