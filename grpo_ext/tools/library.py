"""The shipped tools, and the registry a recipe names them from.

A tool answers the model in text: a call it cannot carry out (bad arithmetic, a name instead of a number) returns a
line starting with ``error:`` instead of raising, so that the model reads why and can try again; a look-up or a
search that finds nothing says so in plain words. A factory (``lookup_table``, ``search_folder``) reads its files
once, when the run builds it, and returns the tool: a bound method, which transformers renders like a function and
pickle can carry, named as the model calls it.

Each tool's example sits between its ``Args:`` and ``Returns:``: transformers reads what follows ``Returns:`` into
the schema the chat template shows the model, and it leaves an extra ``Args:`` entry out.
"""

import ast
import csv
import json
import math
import operator
from collections.abc import Callable
from pathlib import Path

from grpo_ext import sandbox
from grpo_ext.core import references
from grpo_ext.core.text import closest, shown

# A calculation a model means to make fits in a few lines; longer input is refused before it is parsed.
MAX_CHARS = 500
# Python refuses to write an int of more than 4300 digits as text (sys.get_int_max_str_digits()), and text is what a
# tool returns; bounding every step there also bounds the work (no 9**9**9).
MAX_DIGITS = 4300
MAX_BITS = int(MAX_DIGITS * math.log2(10))

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_ALLOWED = "numbers, + - * / // % ** and parentheses"


class _Refused(Exception):
    """Why an expression is not worked out; the text follows ``error:``."""


def calculator(expression: str) -> str:
    """Work out an arithmetic expression made of numbers, + - * / // % ** and parentheses, and return the result.

    Args:
        expression: The arithmetic to work out, for example "2 * (3 + 4) ** 2" or "-7 / 2".

    Examples:
        >>> calculator("2 * (3 + 4) ** 2"), calculator("-7 / 2"), calculator("0.1 + 0.2")
        ('98', '-3.5', '0.3')
        >>> calculator("7 / 0")
        'error: division by zero'

    Returns:
        The result as a number, or a line starting with "error:" that says why it was not worked out.
    """
    text = str(expression).strip()  # the model may send a bare number as a JSON number
    if len(text) > MAX_CHARS:
        return f"error: the expression is longer than {MAX_CHARS} characters"
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return f"error: {shown(text)} is not an arithmetic expression; use {_ALLOWED}"
    try:
        return _number_text(_value(tree.body))
    except _Refused as exc:
        return f"error: {exc}"
    except ZeroDivisionError:
        return "error: division by zero"
    except OverflowError:
        return "error: the result is out of range"


# A snippet a model runs to check a step: seconds, not minutes; what it prints comes back cut to what a turn can read.
PYTHON_LIMITS = sandbox.Limits(wall_seconds=5.0, cpu_seconds=5, memory_mb=512, file_mb=1, processes=16, open_files=32)
OUTPUT_CHARS = 1000
# what the sandbox's harness writes for a program that called sys.exit() with success: a finished program, for a tool
_EXITED_WELL = ("exited early (status 0)", "exited early (status None)")


# The docstring is what the model reads (transformers turns it into the tool's schema); what it does not need to
# know stays here: each call is one run of the default sandbox provider (grpo_ext.sandbox: an empty folder, the limits
# above, no network where the kernel allows namespaces), the sandbox the code_tests reward runs programs in.
def python(code: str) -> str:
    """Run a short Python program and return what it printed.

    Print every value you want to see. Each call starts afresh: nothing carries over from one call to the next.

    Args:
        code: The program, for example "print(sum(range(1, 101)))".

    Examples:
        "print(sum(range(1, 101)))" returns 5050; "print(1 / 0)" returns "error: ZeroDivisionError: division by zero".

    Returns:
        What the program printed, or a line starting with "error:" with the error it stopped on.
    """
    result = sandbox.provider().run(str(code), "", None, PYTHON_LIMITS)
    out = result.stdout.strip()
    if result.status == "passed" or result.stderr.strip() in _EXITED_WELL:
        return _cut_output(out) if out else "(the program printed nothing; print the values you want to see)"
    if result.status == "timeout":
        return f"error: the program ran longer than {PYTHON_LIMITS.wall_seconds:g} s and was stopped"
    if result.status == "killed":
        return "error: the program went over its memory or CPU limit and was stopped"
    if result.status == "error":
        return "error: this machine refused the sandbox, so the program did not run"
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    error = lines[-1].strip() if lines else "the program exited early"
    return _cut_output(f"{out}\nerror: {error}" if out else f"error: {error}")


def _cut_output(text: str) -> str:
    return text if len(text) <= OUTPUT_CHARS else text[:OUTPUT_CHARS] + f"... ({len(text) - OUTPUT_CHARS} more characters)"


def _value(node: ast.AST) -> int | float:
    """The number ``node`` stands for, worked out by walking the tree; each step bounded by ``_checked``."""
    if isinstance(node, ast.Constant):
        # bool is an int to Python, not a number to a reader; complex is not a real number
        if type(node.value) not in (int, float):
            raise _Refused(f"{shown(node.value)} is not a number")
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and right > 0 and abs(left) > 1:
            # refused before it is computed: a big power takes time and memory to build, not just to print
            if right * math.log10(abs(left)) > MAX_DIGITS:
                raise _Refused(f"the result would have more than {MAX_DIGITS} digits")
        return _checked(_BINARY[type(node.op)](left, right))
    raise _Refused(_not_arithmetic(node))


def _not_arithmetic(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"{node.id!r} is a name, not a number; write the numbers themselves"
    if isinstance(node, ast.Call):
        return f"function calls are not allowed; use {_ALLOWED}"
    if isinstance(node, ast.Attribute):
        return f"attributes are not allowed; use {_ALLOWED}"
    if isinstance(node, ast.BinOp | ast.UnaryOp):  # ^ for a power is the likely one
        return f"{shown(ast.unparse(node))} uses an operator that is not allowed; use {_ALLOWED} (** for a power)"
    return f"{shown(ast.unparse(node))} is not arithmetic; use {_ALLOWED}"


def _checked(value: int | float | complex) -> int | float:
    if isinstance(value, complex):  # (-8) ** 0.5
        raise _Refused("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise OverflowError
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise _Refused(f"the result would have more than {MAX_DIGITS} digits")
    return value


def _number_text(value: int | float) -> str:
    # a float keeps 15 significant decimal digits faithfully: 0.1 + 0.2 reads 0.3, not 0.30000000000000004
    return str(value) if isinstance(value, int) else format(value, ".15g")


def _key(text: object) -> str:
    return str(text).strip().casefold()


class _Table:
    """The rows of one table file, by their normalised key; ``lookup`` is the tool."""

    def __init__(self, rows: dict[str, tuple[str, str]]):
        self.rows = rows  # normalised key -> (key as the file writes it, value)

    def lookup(self, key: str) -> str:
        """Look a key up in the table and return its value; case and surrounding spaces do not matter.

        Args:
            key: The key to look up, exactly as the table writes it apart from case, for example "France".

        Returns:
            The value for the key, or a line that says the key is not in the table and names the nearest key.
        """
        found = self.rows.get(_key(key))
        if found is not None:
            return found[1]
        hint = closest(_key(key), self.rows)
        more = f"; did you mean {self.rows[hint][0]!r}?" if hint else ""
        return f"no entry for {shown(str(key).strip())}{more}"


def lookup_table(path: str | Path) -> Callable[[str], str]:
    """A ``lookup(key)`` tool over a table file: a two-column CSV whose first row is its header, or a JSON object.

    Keys match exactly apart from case and surrounding spaces; a JSON value that is not a string is returned as JSON.
    A file that is missing, of another kind, or that writes one key twice raises ValueError when the tool is built.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     table = Path(folder, "capitals.csv")
    ...     _ = table.write_text("country,capital\\nFrance,Paris\\nJapan,Tokyo\\n")
    ...     lookup = lookup_table(table)
    >>> lookup.__name__, lookup(" FRANCE "), lookup("Japn")
    ('lookup', 'Paris', "no entry for 'Japn'; did you mean 'Japan'?")
    """
    path = Path(path)
    if path.suffix.lower() not in (".csv", ".json"):
        raise ValueError(f"lookup: {str(path)!r} is not a .csv or .json file; give a two-column CSV or a JSON object")
    if not path.is_file():
        raise ValueError(f"lookup: table {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"lookup: {path.name} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"lookup: {path.name} holds a JSON {type(data).__name__}; it must be an object of key: value")
        pairs = [("", str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in data.items()]
    else:
        pairs = []
        for number, cells in enumerate(list(csv.reader(text.splitlines()))[1:], start=2):  # the first row is the header
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != 2:
                raise ValueError(f"lookup: {path.name} line {number} has {len(cells)} columns; a table has two: key,value")
            pairs.append((f"line {number}", cells[0].strip(), cells[1]))
    rows: dict[str, tuple[str, str]] = {}  # normalised key -> (key as the file writes it, value)
    places: dict[str, str] = {}
    for place, key, value in pairs:
        if _key(key) in rows:
            lines = f" ({places[_key(key)]} and {place})" if place else ""
            raise ValueError(
                f"lookup: {path.name} has the keys {rows[_key(key)][0]!r} and {key!r}{lines}, "
                "which a look-up cannot tell apart; keep one"
            )
        rows[_key(key)], places[_key(key)] = (key, value), place
    return _Table(rows).lookup


# A passage longer than this is cut: TRL drops a tool's whole answer when it would push the completion past
# max_completion_length, so a long paragraph would reach the model as nothing at all (1000 characters ≈ 250 tokens).
PASSAGE_CHARS = 1000


class _Passages:
    """The paragraphs of a folder's text files and their BM25 index; ``search`` is the tool."""

    def __init__(self, passages: list[tuple[str, str]], k: int):
        import bm25s  # an optional dependency: only a run that searches needs it

        self.passages = passages  # (file name relative to the folder, paragraph)
        self.k = k
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize([p for _, p in passages], stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str) -> str:
        """Search the documents for passages about the query and return the best ones, each after its file name.

        Args:
            query: The words to search for, for example "boiling point of water".

        Returns:
            The best-matching passages, each as [file name] followed by the passage, or a line that says none matched.
        """
        import bm25s

        words = bm25s.tokenize(str(query), stopwords="en", return_ids=False, show_progress=False)[0]
        scores = self.index.get_scores(words) if words else []
        best = sorted((i for i, score in enumerate(scores) if score > 0), key=lambda i: -scores[i])[: self.k]
        if not best:
            return f"no passage matches {shown(str(query))}"
        return "\n\n".join(f"[{self.passages[i][0]}] {_cut(self.passages[i][1])}" for i in best)


def _cut(text: str) -> str:
    return text if len(text) <= PASSAGE_CHARS else text[: PASSAGE_CHARS - 1] + "…"


def search_folder(folder: str | Path, k: int = 3) -> Callable[[str], str]:
    """A ``search(query)`` tool over a folder's ``.txt`` and ``.md`` files (subfolders too), ranked by BM25 (bm25s).

    Each file is split into paragraphs at blank lines; ``search`` returns the ``k`` best that share a word with the
    query, English stop words left out. A folder with no text to index raises ValueError when the tool is built.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = Path(folder, "water.md").write_text("Water boils at 100 degrees.\\n\\nIce melts at 0 degrees.")
    ...     search = search_folder(folder, k=1)
    >>> search.__name__, search("when does water boil"), search("volcano")
    ('search', '[water.md] Water boils at 100 degrees.', "no passage matches 'volcano'")
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"search: folder {str(folder)!r} does not exist")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"search: k must be a whole number of passages, 1 or more, not {shown(k)}")
    passages = []
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".txt", ".md") and p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(folder).as_posix()
        passages += [(name, part.strip()) for part in text.replace("\r\n", "\n").split("\n\n") if part.strip()]
    if not passages:
        raise ValueError(f"search: {str(folder)!r} has no .txt or .md file with text in it")
    return _Passages(passages, k).search


# name -> factory, as in the reward registry: called with the recipe's args, it returns the tool.
REGISTRY: dict[str, Callable[..., Callable[..., str]]] = {
    "calculator": references.constant_factory(calculator),
    "python": references.constant_factory(python),
    "lookup": lookup_table,
    "search": search_folder,
}
KIND = references.Kind("tool", REGISTRY, "grpo_ext.tools", "grpo-ext tools ls")


def find(name: str, base_dir: Path) -> tuple[Callable, bool]:
    """The tool a recipe names: a library name, ``module:function``, ``file.py:function`` (relative to ``base_dir``)
    or an entry point in the ``grpo_ext.tools`` group. Returns (object, is_factory); raises LookupError with a
    one-line reason."""
    return references.find(KIND, name, base_dir)
