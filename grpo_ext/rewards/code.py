"""Code run against tests: the ``code_tests`` reward.

A completion's program (``program_of``: its code blocks that define something, else its last block, else its whole
text) runs against the row's test cases, one sandboxed process per case (in the default provider of ``grpo_ext.sandbox``;
``sandbox/local.py`` says what is limited and isolated on this machine), a bounded pool of them at a time. Test cases
come from a data column, in one of two forms:

- Python: a string of statements (each top-level ``assert`` is one case; the other statements, imports and
  helpers, run before every case), or a list of strings, each one case;
- input and output: a list of ``{input: ..., output: ...}`` mappings, or ``{inputs: [...], outputs: [...]}``
  (the form of APPS and open-r1's code data); the program reads the input on stdin and passes when what it
  prints equals the output, line by line, trailing spaces and blank lines aside.
"""

import ast
import re
from dataclasses import dataclass

import yaml

from grpo_ext import sandbox
from grpo_ext.core.text import shown
from grpo_ext.core.values import kind_of
from grpo_ext.rewards.api import UNIT, column, completion_text
from grpo_ext.rewards.registry import register

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.S)
TEST_FORMS = "Python statements with top-level asserts, a list of such strings, or input/output pairs"


def _defines(block: str) -> bool:
    """Whether a block parses and defines something at its top level: a function, a class or an import."""
    try:
        body = ast.parse(block).body
    except SyntaxError:
        return False
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return any(isinstance(node, kinds) for node in body)


def program_of(text: str, tests: bool = True) -> str:
    """The program a completion means. Its ``python`` blocks (any fenced block when none is marked python), else its
    whole text. Against Python tests, the blocks that define something (a function, a class, an import) joined in
    order: a block that only runs code, the "example usage" or the asserts of its own that small models add, is
    left out, so it can neither break nor hide a right answer. For stdin and stdout cases, and when no block
    defines anything, the last block: the script that reads the input.

    >>> program_of("Here:\\n```python\\ndef f(x):\\n    return x + 1\\n```\\nUse it:\\n```python\\nprint(f(2))\\n```")
    'def f(x):\\n    return x + 1\\n'
    >>> program_of("```python\\nimport math\\n```\\n```python\\ndef r(x):\\n    return math.sqrt(x)\\n```")
    'import math\\n\\ndef r(x):\\n    return math.sqrt(x)\\n'
    >>> program_of("def f(x): return x")
    'def f(x): return x'
    """
    blocks = _FENCE.findall(text)
    python = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    chosen = python or [body for _, body in blocks] or [text]
    defining = [block for block in chosen if _defines(block)] if tests else []
    return "\n".join(defining) if defining else chosen[-1]


@dataclass(frozen=True)
class Case:
    """One test case: Python to run after the program, or an input and the output it must give."""

    tests: str = ""
    stdin: str | None = None
    expected: str | None = None


def cases_of(value) -> list[Case] | None:
    """The test cases a data cell holds, or None when it holds none in a form this reward reads.

    >>> [c.tests for c in cases_of("import math\\nassert f(1) == 2\\nassert f(2) == 3")]
    ['import math\\nassert f(1) == 2', 'import math\\nassert f(2) == 3']
    >>> cases_of({"inputs": ["1\\n"], "outputs": ["2\\n"]})
    [Case(tests='', stdin='1\\n', expected='2\\n')]
    >>> cases_of(42) is None, cases_of("") is None
    (True, True)
    """
    if isinstance(value, str):
        try:
            body = ast.parse(value).body
        except SyntaxError:
            return None
        setup = [ast.get_source_segment(value, node) for node in body if not isinstance(node, ast.Assert)]
        asserts = [ast.get_source_segment(value, node) for node in body if isinstance(node, ast.Assert)]
        return [Case("\n".join([*setup, check])) for check in asserts] or None
    if isinstance(value, dict) and isinstance(value.get("inputs"), list) and isinstance(value.get("outputs"), list):
        value = [{"input": i, "output": o} for i, o in zip(value["inputs"], value["outputs"], strict=False)]
    if isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            return [Case(v) for v in value]
        if all(isinstance(v, dict) and "input" in v and "output" in v for v in value):
            return [Case("", str(v["input"]), str(v["output"])) for v in value]
    return None


def _why_no_tests(value) -> str:
    """What a tests cell holds that ``cases_of`` does not read."""
    if not isinstance(value, str):
        return f"a {kind_of(value)} {shown(value, 40)}; tests are {TEST_FORMS}"
    if not value.strip():
        return "an empty text"
    try:
        ast.parse(value)
    except SyntaxError as exc:
        return f"read as Python: SyntaxError at line {exc.lineno}: {exc.msg}"
    if cases_of(_yaml(value)) is not None:  # pairs written out as text: the column holds a string, not a list
        return (
            "Python with no top-level assert, but the text of input/output pairs: give the pairs as a list, not as "
            "text (in rewards score, --column-yaml tests=...)"
        )
    return "Python with no top-level assert; each top-level assert is one test case"


def _yaml(text: str):
    """``text`` read as YAML (JSON included), or None when it does not read."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _same_output(printed: str, expected: str) -> bool:
    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip("\n").splitlines()]

    return lines(printed) == lines(expected)


class CodeTests:
    """The ``code_tests`` reward (see ``code_tests``); picklable."""

    __name__ = "code_tests"
    score_range = UNIT  # the share of a row's tests passed

    def __init__(
        self, tests_column: str, all_or_nothing: bool, workers: int, limits: sandbox.Limits, provider: str = sandbox.DEFAULT
    ):
        self.tests_column = tests_column
        self.columns = (tests_column,)
        self.all_or_nothing = all_or_nothing
        self.workers = workers
        self.limits = limits
        self.provider = provider  # a name in sandbox.PROVIDERS: a name pickles where a remote provider's client may not

    def passes(self, program: str, case: Case) -> bool | None:
        """Whether the program passes the case; None when the sandbox could not run it (nothing to judge)."""
        result = sandbox.provider(self.provider).run(program, case.tests, case.stdin, self.limits)
        if result.status == "error":
            return None
        if case.expected is None:
            return result.status == "passed"
        return result.status == "passed" and _same_output(result.stdout, case.expected)

    def why_none(self, row: dict, index: int = 0) -> str:
        """Why a completion of ``row`` scored None: the row's tests do not read, or the sandbox could not run one."""
        value = row.get(self.tests_column)
        if cases_of(value) is not None:  # readable tests: its other None is a case the sandbox could not run
            return "the sandbox could not run one of its test cases, so the row cannot be judged"
        return f"the {self.tests_column!r} column holds no test this reward reads ({_why_no_tests(value)})"

    def __call__(self, completions, **kwargs) -> list[float | None]:
        from concurrent.futures import ThreadPoolExecutor  # here: a command that only reads a recipe runs no program

        rows = [cases_of(cell) for cell in column(kwargs, self.tests_column, "tests_column")]
        jobs = [
            (i, program_of(completion_text(c), case.expected is None), case)
            for i, (c, cases) in enumerate(zip(completions, rows, strict=True))
            for case in cases or ()
        ]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            outcomes = list(pool.map(lambda job: (job[0], self.passes(job[1], job[2])), jobs))
        scores: list[float | None] = []
        for i, cases in enumerate(rows):
            if not cases:
                scores.append(None)  # no tests this reward can read: nothing to judge
                continue
            results = [ok for row, ok in outcomes if row == i]
            if None in results:  # a case the sandbox could not run: the row cannot be judged
                scores.append(None)
                continue
            passed = sum(results)
            scores.append(float(passed == len(cases)) if self.all_or_nothing else passed / len(cases))
        return scores


@register("code_tests", factory=True)
def code_tests(
    tests_column: str = "tests",
    all_or_nothing: bool = False,
    timeout: float = 10.0,
    cpu_seconds: int = 10,
    memory_mb: int = 1024,
    file_mb: int = 10,
    processes: int = 64,
    disk_mb: int = 64,
    workers: int = 2,
) -> CodeTests:
    """The share of its row's test cases that the completion's program passes, each case in a sandboxed process.

    1.0 or 0.0 with ``all_or_nothing``; None for a row whose ``tests_column`` holds no tests this reward reads.

    Each case runs in its own sandboxed process: ``timeout`` wall seconds, ``cpu_seconds`` of CPU,
    ``memory_mb`` of address space, files up to ``file_mb`` and ``disk_mb`` in all (where the kernel allows a
    tmpfs), at most ``processes`` processes where the kernel applies it; ``workers`` cases at a time. A row whose
    case the sandbox could not run scores None. A program that exits before its tests ran has not passed them; the
    tests run in a process of their own, so nothing the program does can pass them but the right values.
    Defence in depth for code a model writes, not a boundary against an attacker (``grpo_ext/sandbox/local.py``).

    >>> reward = code_tests()
    >>> reward(["```python\\ndef add(a, b):\\n    return a + b\\n```", "def add(a, b): return a - b"],
    ...        tests=["assert add(1, 2) == 3\\nassert add(0, 0) == 0", "assert add(1, 2) == 3\\nassert add(0, 0) == 0"])
    [1.0, 0.5]
    """
    positive = (
        ("timeout", timeout),
        ("cpu_seconds", cpu_seconds),
        ("memory_mb", memory_mb),
        ("file_mb", file_mb),
        ("disk_mb", disk_mb),
    )
    for name, value in positive:
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if processes < 1 or workers < 1:
        raise ValueError(f"processes and workers must be at least 1, got {processes} and {workers}")
    limits = sandbox.Limits(float(timeout), int(cpu_seconds), int(memory_mb), int(file_mb), int(processes), disk_mb=int(disk_mb))
    return CodeTests(tests_column, bool(all_or_nothing), int(workers), limits)
