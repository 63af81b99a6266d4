"""Tools: the calculator's answers and refusals, look-up and search over files, the registry, and every rule of the
checks, each beside what transformers' chat-template renderer makes of the same function."""

import ast
import doctest
import enum
import functools
import inspect
import json
import pickle
import re
import typing
from pathlib import Path

import pytest
from transformers.utils import get_json_schema
from transformers.utils.chat_template_utils import render_jinja_template

from grpo_ext.settings import compat
from grpo_ext.tools import checks, library
from grpo_ext.tools.checks import check_environment, check_names, check_reset, check_tool
from grpo_ext.tools.library import MAX_CHARS, MAX_DIGITS, PASSAGE_CHARS, REGISTRY, calculator, find, lookup_table, search_folder

# --- calculator ---------------------------------------------------------------------------------------------------

ANSWERS = [
    # expression, result
    ("2 + 3 * 4", "14"),  # precedence
    ("(2 + 3) * 4", "20"),  # parentheses
    ("-7 / 2", "-3.5"),  # unary minus, true division
    ("7 // 2", "3"),
    ("-7 // 2", "-4"),  # floor division rounds down, as in Python
    ("7 % 3", "1"),
    ("2 ** 10", "1024"),
    ("-2 ** 2", "-4"),  # the power binds tighter than the minus, as in Python
    ("2 ** -1", "0.5"),  # a negative power is a float
    ("+5", "5"),  # unary plus
    ("0.1 + 0.2", "0.3"),  # 15 significant digits: no 0.30000000000000004
    ("1 / 3", "0.333333333333333"),
    ("4 / 2", "2"),  # a whole float reads as a whole number
    ("7.5 // 2", "3"),
    ("1e20", "1e+20"),
    ("1_000 * 2", "2000"),  # Python's digit separator
    (" 7 \n", "7"),  # surrounding whitespace
    (12, "12"),  # the model sent a JSON number, not a string
    ("10 ** 4299", "1" + "0" * 4299),  # the largest power that fits in MAX_DIGITS
    ("-" * 400 + "1", "1"),  # deep but short: the walk does not run out of stack
    ("(" * 150 + "1" + ")" * 150, "1"),
]


@pytest.mark.parametrize("expression,result", ANSWERS, ids=[str(e)[:30] for e, _ in ANSWERS])
def test_calculator_answers(expression, result):
    assert calculator(expression) == result


REFUSALS = [
    # expression, the error (whole, or what it starts with when it ends with "…")
    ("7 / 0", "error: division by zero"),
    ("7 // 0", "error: division by zero"),
    ("7 % 0", "error: division by zero"),
    ("0 ** -1", "error: division by zero"),  # Python's own ZeroDivisionError for a zero base
    ("9 ** 9 ** 9", f"error: the result would have more than {MAX_DIGITS} digits"),  # refused before it is computed
    ("10 ** 4300", f"error: the result would have more than {MAX_DIGITS} digits"),  # one digit too many
    ("(10 ** 4000) * (10 ** 4000)", f"error: the result would have more than {MAX_DIGITS} digits"),  # each step bounded
    ("10 ** 4000 / 3", "error: the result is out of range"),  # too large for a float
    ("2.0 ** 5000", "error: the result is out of range"),
    ("1e309", "error: the result is out of range"),  # a literal that is already infinite
    ("(-8) ** 0.5", "error: the result is not a real number"),  # Python would give a complex number
    ("True + 1", "error: True is not a number"),  # a bool is an int to Python only
    ("1j * 2", "error: 1j is not a number"),
    ("'a' * 3", "error: 'a' is not a number"),
    ("x + 1", "error: 'x' is a name, not a number; write the numbers themselves"),
    ("abs(-1)", "error: function calls are not allowed; …"),
    ("__import__('os').system('ls')", "error: function calls are not allowed; …"),  # nothing is ever looked up
    ("(1).real", "error: attributes are not allowed; …"),
    ("3 ^ 2", "error: '3 ^ 2' uses an operator that is not allowed; …"),  # ^ for a power: the hint says **
    ("~1", "error: '~1' uses an operator that is not allowed; …"),
    ("1 < 2", "error: '1 < 2' is not arithmetic; …"),
    ("[1, 2]", "error: '[1, 2]' is not arithmetic; …"),
    ("lambda: 1", "error: 'lambda: 1' is not arithmetic; …"),
    ("2 +", "error: '2 +' is not an arithmetic expression; …"),
    ("", "error: '' is not an arithmetic expression; …"),
    ("import os", "error: 'import os' is not an arithmetic expression; …"),  # a statement is not an expression
    ("1" * (MAX_CHARS + 1), f"error: the expression is longer than {MAX_CHARS} characters"),
]


@pytest.mark.parametrize("expression,error", REFUSALS, ids=[e[:30] for e, _ in REFUSALS])
def test_calculator_refusals(expression, error):
    out = calculator(expression)
    assert out.startswith(error[:-1]) if error.endswith("…") else out == error
    assert "\n" not in out


def test_calculator_never_evaluates_code():
    """The library walks the tree: no eval, exec or compile anywhere in it."""
    tree = ast.parse(Path(library.__file__).read_text(encoding="utf-8"))
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & {"eval", "exec", "compile", "__import__"}


# --- lookup -------------------------------------------------------------------------------------------------------

CAPITALS_CSV = 'country,capital\nFrance,Paris\n\n"Korea, South",Seoul\nJapan, Tokyo\n'
CAPITALS_JSON = {"France": "Paris", "Japan": {"capital": "Tokyo", "population": 125}, "Zero": 0}

LOOKUPS = [
    # file, key, answer
    ("csv", "France", "Paris"),
    ("csv", "  fRANCE ", "Paris"),  # case and surrounding spaces do not matter
    ("csv", "Korea, South", "Seoul"),  # a quoted key with a comma
    ("csv", "Japan", " Tokyo"),  # the value is returned as the file writes it
    ("csv", "country", "no entry for 'country'"),  # the header is not a row
    ("csv", "Frnace", "no entry for 'Frnace'; did you mean 'France'?"),  # the nearest key, as the file writes it
    ("csv", "Atlantis", "no entry for 'Atlantis'"),  # nothing near: no suggestion
    ("json", "france", "Paris"),
    ("json", "Japan", '{"capital": "Tokyo", "population": 125}'),  # a value that is not a string comes back as JSON
    ("json", "zero", "0"),
    ("json", "Paris", "no entry for 'Paris'"),  # values are not keys
]


@pytest.fixture
def tables(tmp_path) -> dict[str, Path]:
    (tmp_path / "capitals.csv").write_text(CAPITALS_CSV, encoding="utf-8")
    (tmp_path / "capitals.json").write_text(json.dumps(CAPITALS_JSON), encoding="utf-8")
    return {"csv": tmp_path / "capitals.csv", "json": tmp_path / "capitals.json"}


@pytest.mark.parametrize("kind,key,answer", LOOKUPS)
def test_lookup(tables, kind, key, answer):
    assert lookup_table(tables[kind])(key) == answer


BAD_TABLES = [
    # file name, its text (None: no file), the error it starts with
    ("missing.csv", None, "lookup: table "),
    ("capitals.txt", "France,Paris", "lookup: '"),  # neither .csv nor .json: ends "is not a .csv or .json file; …"
    ("three.csv", "a,b\nx,y,z\n", "lookup: three.csv line 2 has 3 columns; a table has two: key,value"),
    (
        "twice.csv",
        "k,v\nFrance,Paris\nfrance ,Lyon\n",
        "lookup: twice.csv has the keys 'France' and 'france' (line 2 and line 3)",
    ),
    ("twice.json", '{"France": "Paris", "FRANCE": "Lyon"}', "lookup: twice.json has the keys 'France' and 'FRANCE', "),
    ("list.json", '["France", "Paris"]', "lookup: list.json holds a JSON list; it must be an object of key: value"),
    ("broken.json", '{"France": ', "lookup: broken.json is not valid JSON: "),
]


@pytest.mark.parametrize("name,text,error", BAD_TABLES)
def test_bad_tables_fail_when_built(tmp_path, name, text, error):
    if text is not None:
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        lookup_table(tmp_path / name)
    assert str(info.value).startswith(error) and "\n" not in str(info.value)


def test_lookup_survives_pickle(tables):
    lookup = pickle.loads(pickle.dumps(lookup_table(tables["csv"])))
    assert lookup.__name__ == "lookup" and lookup("france") == "Paris"


# --- search -------------------------------------------------------------------------------------------------------


@pytest.fixture
def notes(tmp_path) -> Path:
    (tmp_path / "water.md").write_text("# Water\n\nWater boils at 100 degrees.\n\nIce melts at 0 degrees.\n")
    (tmp_path / "planets").mkdir()
    (tmp_path / "planets" / "mars.txt").write_text("Mars is red.\r\n\r\nMars has two moons and thin air.\r\n")
    (tmp_path / "code.py").write_text("water = 'boils'\n")  # not a .txt or .md file: not searched
    (tmp_path / "long.txt").write_text("volcano " * 500)
    return tmp_path


SEARCHES = [
    # query, k, answer
    ("when does water boil", 1, "[water.md] # Water"),  # words match as written: boil is not boils, the heading wins
    ("water boils", 1, "[water.md] Water boils at 100 degrees."),
    ("moons of Mars", 1, "[planets/mars.txt] Mars has two moons and thin air."),  # a file in a subfolder, by its path
    ("mars", 2, "[planets/mars.txt] Mars is red.\n\n[planets/mars.txt] Mars has two moons and thin air."),  # k passages
    # only those that match, best first: the shorter paragraph says more about the word
    ("degrees", 5, "[water.md] Ice melts at 0 degrees.\n\n[water.md] Water boils at 100 degrees."),
    ("unicorn", 3, "no passage matches 'unicorn'"),
    ("the of and", 3, "no passage matches 'the of and'"),  # English stop words only
    ("", 3, "no passage matches ''"),
    ("volcano", 1, "[long.txt] " + ("volcano " * 500)[: PASSAGE_CHARS - 1] + "…"),  # a long paragraph is cut
]


@pytest.mark.parametrize("query,k,answer", SEARCHES)
def test_search(notes, query, k, answer):
    assert search_folder(notes, k=k)(query) == answer


@pytest.mark.parametrize(
    "files,k,error",
    [
        (None, 3, "search: folder "),  # no folder
        ({"code.py": "x = 1"}, 3, "search: "),  # ends "has no .txt or .md file with text in it"
        ({"blank.md": "\n\n  \n"}, 3, "search: "),  # only blank lines
        ({"a.md": "text"}, 0, "search: k must be a whole number of passages, 1 or more, not 0"),
        ({"a.md": "text"}, "3", "search: k must be a whole number of passages, 1 or more, not '3'"),
        ({"a.md": "text"}, True, "search: k must be a whole number of passages, 1 or more, not True"),
    ],
)
def test_bad_folders_fail_when_built(tmp_path, files, k, error):
    folder = tmp_path / "docs"
    if files is not None:
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
    with pytest.raises(ValueError) as info:
        search_folder(folder, k=k)
    assert str(info.value).startswith(error) and "\n" not in str(info.value)


def test_search_survives_pickle(notes):
    search = pickle.loads(pickle.dumps(search_folder(notes, k=1)))
    assert search.__name__ == "search" and search("boils").startswith("[water.md]")


# --- the registry -------------------------------------------------------------------------------------------------

FINDS = [
    # name, is_factory, what it finds: the registry's entry, or the function of that name
    ("calculator", True, None),  # a factory that takes no arguments
    ("lookup", True, None),
    ("search", True, None),
    ("tools.py:shout", False, "shout"),  # a file beside the recipe
    ("json:dumps", False, "dumps"),  # an importable module
]


@pytest.mark.parametrize("name,is_factory,function", FINDS)
def test_find(tmp_path, name, is_factory, function):
    (tmp_path / "tools.py").write_text(inspect.getsource(shout))
    obj, factory = find(name, tmp_path)
    assert factory is is_factory
    assert obj is REGISTRY[name] if is_factory else obj.__name__ == function


@pytest.mark.parametrize(
    "name,error",
    [
        ("calculater", "unknown tool 'calculater'; did you mean 'calculator'?"),
        ("zzz", "unknown tool 'zzz'; see `grpo-ext tools ls` for the names"),
        ("os:system", "'os:system' comes from os, a standard-library module"),  # the reward registry's refusal, reused
        ("missing.py:fn", "does not exist; give a path relative to the recipe's folder"),
    ],
)
def test_find_errors(tmp_path, name, error):
    with pytest.raises(LookupError) as info:
        find(name, tmp_path)
    assert error in str(info.value) and "\n" not in str(info.value)


def build_all(folder: Path) -> list:
    """Every registry tool, built as a recipe would: the factory called with its args."""
    (folder / "t.json").write_text('{"a": "b"}')
    (folder / "n.md").write_text("some notes")
    args = {"calculator": {}, "python": {}, "lookup": {"path": folder / "t.json"}, "search": {"folder": folder}}
    assert set(args) == set(REGISTRY), "a registry tool without args here"
    tools = [REGISTRY[name](**kwargs) for name, kwargs in args.items()]
    assert tools[0] is calculator
    return tools


def test_library_tools_pass_the_checks_and_transformers(tmp_path):
    for i, tool in enumerate(build_all(tmp_path)):
        assert check_tool(tool, f"tools[{i}]") == []
        schema = get_json_schema(tool)["function"]
        # the example in each docstring stays out of what the model reads
        assert ">>>" not in json.dumps(schema) and schema["description"] and schema["parameters"]["required"]
    assert check_names({f"tools[{i}]": t.__name__ for i, t in enumerate(build_all(tmp_path))}) == []


@pytest.mark.parametrize("module", [library, checks])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# --- check_tool ---------------------------------------------------------------------------------------------------


def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say.
    """
    return text.upper()


def no_doc(text: str) -> str:
    return text


def no_hint(text) -> str:
    """Say it.

    Args:
        text: What to say.
    """
    return text


def no_return_hint(text: str):
    """Say it.

    Args:
        text: What to say.
    """
    return text


def undocumented(text: str, times: int) -> str:
    """Say it again.

    Args:
        text: What to say.
    """
    return text * times


def star_args(*words: str) -> str:
    """Join words.

    Args:
        words: The words.
    """
    return " ".join(words)


def star_kwargs(**fields: str) -> str:
    """Show fields.

    Args:
        fields: The fields.
    """
    return str(fields)


def positional_only(text: str, /) -> str:
    """Say it.

    Args:
        text: What to say.
    """
    return text


def bad_choices(drink: str) -> str:
    """Order a drink.

    Args:
        drink: What to drink. (choices: tea, coffee)
    """
    return drink


class Point:
    pass


def custom_hint(where: Point) -> str:
    """Go there.

    Args:
        where: The place.
    """
    return str(where)


def single_tuple(pair: tuple[int]) -> str:
    """Show it.

    Args:
        pair: The pair.
    """
    return str(pair)


def unresolved(text: "Missing") -> str:  # noqa: F821  (a hint naming what does not exist is the case)
    """Say it.

    Args:
        text: What to say.
    """
    return str(text)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def rich_hints(
    colour: Colour,
    mode: typing.Literal["fast", "slow"],
    tags: list[str],
    scores: dict[str, float],
    pair: tuple[int, str],
    note: str | None = None,
    size: typing.Optional[int] = None,  # noqa: UP045  (the old spelling must pass too)
) -> str:
    """Everything JSON schema can state.

    Args:
        colour: A colour.
        mode: How fast.
        tags: Some tags.
        scores: Scores by name.
        pair: A number and a word.
        note: A note.
        size: A size.
    """
    return ""


class Speaker:
    def say(self, text: str) -> str:
        """Say it.

        Args:
            text: What to say.
        """
        return text

    def __call__(self, text: str) -> str:
        return text


TOOL_CASES = [
    # function, the problems check_tool finds (each after "tools[0]: "), whether transformers renders it
    (shout, [], True),
    (rich_hints, [], True),  # Enum, Literal, list, dict, tuple, unions and Optional
    (Speaker().say, [], True),  # a bound method: self is not an argument
    (calculator, [], True),
    (3, ["3 is not a function but an int; name a function (def)"], False),
    (functools.partial(shout), ["functools.partial(<function shout …"], False),  # transformers refuses a partial
    (Speaker(), ["<…Speaker object at … is a …Speaker; transformers shows the model only functions …"], False),
    (Speaker, ["<class '…Speaker'> is a type; …"], False),  # a class is not a tool
    (lambda text: text, ["a lambda has no name the model can call; write it as a def with a docstring"], False),
    (no_doc, ["no_doc has no docstring; write what it does, then Args: with a line for each argument"], False),
    (no_hint, ["argument 'text' of no_hint has no type hint; write text: str (or int, float, bool, ...)"], False),
    # transformers renders it; TRL's docs ask for the return hint, and it tells the model what comes back
    (no_return_hint, ["no_return_hint has no return type hint; write -> str (the model reads the result as text)"], True),
    (undocumented, ["argument 'times' of undocumented has no line in its docstring's Args:; add 'times: ...'"], False),
    # transformers renders these two, but a call cannot reach *words or the keys of **fields as the schema says
    (star_args, ["star_args takes *words, which a tool call cannot fill; name each argument"], True),
    (star_kwargs, ["star_kwargs takes **fields, which a tool call cannot fill; name each argument"], True),
    # rendered, then every call fails: TRL calls tool(text=...)
    (positional_only, ["argument 'text' of positional_only is positional-only; TRL passes arguments by name"], True),
    (custom_hint, ["argument 'where' of custom_hint is typed Point, which JSON schema cannot state; …"], False),
    (single_tuple, ["argument 'pair' of single_tuple is typed tuple[int], which JSON schema cannot state; …"], False),
    # transformers reads the choices with json.loads at the first prompt, and fails
    (bad_choices, ["argument 'drink' of bad_choices: (choices: tea, coffee) is not a JSON list; write …"], False),
    (unresolved, ["the type hints of unresolved do not resolve (NameError: name 'Missing' is not defined); fix them"], False),
]


# the renderer contract checked here is transformers 5's, the only one TRL runs tools on (compat.TOOLS_NEED)
TOOLS_RENDER = compat.tools_problem("tools") is None


def renders(fn) -> bool:
    """Whether transformers' chat-template renderer, which TRL's prompts go through, takes ``fn`` as a tool."""
    try:
        render_jinja_template([[{"role": "user", "content": "hi"}]], tools=[fn], chat_template="{{ tools | tojson }}")
    except Exception:
        return False
    return True


def like(found: list[str], expected: list[str]) -> bool:
    """``found`` is ``expected``, line by line, where "…" in an expected line stands for any text."""
    return len(found) == len(expected) and all(
        re.fullmatch(".*".join(map(re.escape, e.split("…"))), f) for f, e in zip(found, expected, strict=True)
    )


@pytest.mark.parametrize("fn,problems,rendered", TOOL_CASES, ids=[getattr(c[0], "__name__", repr(c[0])[:20]) for c in TOOL_CASES])
def test_check_tool(fn, problems, rendered):
    found = check_tool(fn, "tools[0]")
    assert like(found, [f"tools[0]: {p}" for p in problems]), found
    if TOOLS_RENDER:
        assert renders(fn) is rendered


def test_all_problems_at_once():
    def bare(a, *rest):
        return a

    assert like(
        check_tool(bare, "tools[2]"),
        [
            "tools[2]: bare has no docstring; …",
            "tools[2]: argument 'a' of bare has no type hint; …",
            "tools[2]: bare takes *rest, which a tool call cannot fill; …",
            "tools[2]: bare has no return type hint; …",
        ],
    )


# --- check_environment --------------------------------------------------------------------------------------------


class Counter:
    """Counts; the model adds."""

    def reset(self, **kwargs) -> None:
        self.n = 0

    def add(self, amount: int) -> str:
        """Add to the count and return it.

        Args:
            amount: How much to add.
        """
        self.n += amount
        return str(self.n)

    @staticmethod
    def double(value: int) -> str:
        """Double a number.

        Args:
            value: The number.
        """
        return str(2 * value)

    @property
    def broken(self) -> int:
        raise RuntimeError("a property is never evaluated by the checks, as by TRL")

    @classmethod
    def make(cls):  # TRL lists functions on the class: a classmethod is not a tool
        return cls()

    def _helper(self):  # private: not a tool
        return None

    def get_reward(self) -> float:
        return float(self.n)


def make_counter() -> Counter:
    return Counter()


class NoReset:
    def add(self, amount: int) -> str:
        """Add.

        Args:
            amount: How much.
        """
        return str(amount)


class OnlyReset:
    def reset(self, **kwargs) -> None:
        pass

    def get_reward(self) -> float:
        return 0.0


class Sloppy:
    def reset(self, prompt) -> None:
        pass

    def act(self, move) -> str:
        """Act.

        Args:
            move: The move.
        """
        return str(move)

    def get_reward(self, judge) -> float:
        return 0.0


ENVIRONMENT_CASES = [
    # class, dataset columns, the problems
    (Counter, None, []),
    (Counter, ["prompt", "answer"], []),  # reset(**kwargs) takes any row
    (Counter(), None, ["env: an instance of Counter, not a class; name …"]),  # an instance, not its class
    (make_counter, None, ["env: make_counter is a function, not a class; name …"]),  # named, not <function … at 0x…>
    (NoReset, None, ["env: NoReset has no reset method; TRL calls reset(**row) before each rollout, …"]),
    (OnlyReset, None, ["env: OnlyReset has no public method besides reset and get_reward, so the model has no tool; add one"]),
    (Sloppy, ["prompt"], ["env: Sloppy.get_reward takes judge; TRL calls it with nothing, once a rollout ends", "env.act: …"]),
    (
        Sloppy,
        ["prompt", "answer"],  # TRL passes every column to reset
        [
            "env: Sloppy.get_reward …",
            "env.act: …",
            "env: Sloppy.reset takes no answer, and TRL passes it every column of the rows: prompt, answer; add **kwargs "
            "to reset, or drop answer from the rows",
        ],
    ),
    (Sloppy, [], ["env: Sloppy.get_reward …", "env.act: …", "env: Sloppy.reset needs prompt, which the rows lack …"]),
]


@pytest.mark.parametrize("cls,columns,problems", ENVIRONMENT_CASES)
def test_check_environment(cls, columns, problems):
    found = check_environment(cls, "env") + (check_reset(cls, columns, "the rows", "env") if columns is not None else [])
    assert like(found, problems), found


def test_environment_methods_are_checked_without_self():
    """Sloppy.act: its move has no hint; self is the instance, never reported."""
    found = [p for p in check_environment(Sloppy, "env") if p.startswith("env.act")]
    assert found == [
        "env.act: argument 'move' of act has no type hint; write move: str (or int, float, bool, ...)",
    ]


def test_environment_tools_are_what_trl_lists():
    """The tool methods are TRL's: public functions on the class other than reset and get_reward."""
    trl_tools = [
        n
        for n, _ in inspect.getmembers(Counter, predicate=inspect.isfunction)
        if n not in ("reset", "get_reward") and not n.startswith("_")
    ]
    assert trl_tools == ["add", "double"]
    if TOOLS_RENDER:
        assert all(renders(getattr(Counter(), name)) for name in trl_tools)


# --- check_names --------------------------------------------------------------------------------------------------

NAME_CASES = [
    # where -> name, the problems
    ({"tools[0]": "calculator", "tools[1]": "lookup"}, []),
    ({}, []),
    (
        {"tools[0]": "lookup", "environment.lookup": "lookup"},  # a tool and an environment method
        ["tools[0] and environment.lookup are both named 'lookup'; a tool call reaches only one, so rename them"],
    ),
    (
        {"tools[0]": "search", "tools[1]": "search", "tools[2]": "search", "tools[3]": "calculator"},
        ["tools[0], tools[1] and tools[2] are all named 'search'; a tool call reaches only one, so rename them"],
    ),
]


@pytest.mark.parametrize("names,problems", NAME_CASES)
def test_check_names(names, problems):
    assert check_names(names) == problems


def test_a_module_name_for_a_file_beside_the_recipe_hints_at_the_file(tmp_path):
    (tmp_path / "mytools.py").write_text("def convert(x: int) -> str:\n    return str(x)\n")
    with pytest.raises(LookupError) as info:
        find("mytools:convert", tmp_path)
    assert str(info.value).endswith("mytools.py is a file beside the recipe: name it mytools.py:convert")
    with pytest.raises(LookupError) as info:
        find("othertools:convert", tmp_path)  # no such file either: no hint
    assert "beside the recipe" not in str(info.value)
