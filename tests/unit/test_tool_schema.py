"""The tool schema read without transformers (grpo_ext/tools/schema.py) against transformers' own
``get_json_schema``, which TRL's chat template calls: for every function of the table, the library's tools and the
environment's methods, the same schema (keys in the same order), or a refusal of the same kind about the same
argument."""

import doctest
import enum
import json
import re
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.utils import get_json_schema
from transformers.utils.chat_template_utils import (
    DocstringParsingException,
    TypeHintParsingException,
    _parse_type_hint,
    parse_google_format_docstring,
)

from grpo_ext.tools import environments, library, schema
from grpo_ext.tools.schema import Docstring, SchemaProblem, hint_schema, read_docstring, tool_schema


def plain(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name, in English
    """
    return city


def defaults(city: str, days: int = 1, metric: bool = True) -> str:
    """Weather ahead.

    Args:
        city: the city
        days: how many days
        metric: Celsius or Fahrenheit
    """
    return city


def multi_line(city: str, days: int) -> str:
    """Weather
    over several lines of description.

    Args:
        city: the city's name,
            in English, as a
            traveller writes it
        days:   how many days,   spaced
            out
    """
    return city


def typed_args(city: str, days: int) -> str:
    """Weather.

    Args:
        city (str): the city
        days (int, optional): how many days
    """
    return city


def with_choices(drink: str, size: int, mood: str) -> str:
    """Order a drink.

    Args:
        drink: what to drink (choices: ["tea", " coffee "])
        size: a cup size (Choices: [1, 2, 3])
        mood: not a choice (choices: ["a"]) in the middle of the line
    """
    return drink


def bad_choices(drink: str) -> str:
    """Order a drink.

    Args:
        drink: what to drink (choices: tea, coffee)
    """
    return drink


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Mixed(enum.Enum):
    ONE = 1
    TEXT = "text"


class Empty(enum.Enum):
    pass


def rich_hints(
    colour: Colour,
    mixed: Mixed,
    mode: typing.Literal["fast", "slow"],
    flags: typing.Literal[1, "two", True, None],
    tags: list[str],
    ids: typing.List[int],  # noqa: UP006  (the old spelling is the case)
    nested: list[list[float]],
    scores: dict[str, float],
    anything: dict,
    pair: tuple[int, str],
    raw: tuple,
    note: str | None = None,
    size: typing.Optional[int] = None,  # noqa: UP045  (the old spelling is the case)
    number: int | float = 0,
    sequence: list | tuple = (),
    choice: int | list[int] = 0,
    maybe_mode: typing.Literal["a", "b"] | None = None,
    value: typing.Any = None,
) -> dict[str, int]:
    """Every hint JSON schema can state.

    Args:
        colour: a colour
        mixed: a mixed enum
        mode: how fast
        flags: a mixed literal
        tags: some tags
        ids: some ids
        nested: a matrix
        scores: scores by name
        anything: a mapping
        pair: a number and a word
        raw: a tuple of anything
        note: a note
        size: a size
        number: a number
        sequence: a sequence
        choice: one or many
        maybe_mode: an optional mode
        value: anything at all

    Returns:
        counts by name,
            over two lines
    """
    return {}


def no_args_section(city: str) -> str:
    """Weather, with no Args section at all."""
    return city


def no_arguments() -> str:
    """The time now, with no arguments."""
    return ""


def returns_and_raises(city: str) -> int:
    """Weather.

    Args:
        city: the city

    Returns:
        the temperature

    Raises:
        ValueError: on an unknown city
    """
    return 0


def raises_only(city: str) -> str:
    """Weather.

    Args:
        city: the city
    Raises:
        KeyError: never
    """
    return city


def returns_inline(city: str, days: int) -> str:
    """Weather.

    Args:
        city: the city; Returns: stops the block here
        days: so this one is never read
    """
    return city


def heading_with_text(city: str) -> str:
    """Weather.

    Args: city, the city
    """
    return city


def empty_line_first(city: str, days: int) -> str:
    """Weather.

    Args:
        city:
        days: read as city's description, as transformers reads it
    """
    return city


def empty_line_last(city: str, days: int) -> str:
    """Weather.

    Args:
        days: how many
        city:
    """
    return city


def deeper_entry(city: str, days: int) -> str:
    """Weather.

    Args:
        city: the city, for example
            Paris: a city
        days: how many
    Example: not an argument, but read as one
    """
    return city


def text_before_arguments(city: str) -> str:
    """Weather.

    Args:
      Each argument below.
        city: the city
    """
    return city


def no_return_hint(city: str):
    """Weather.

    Args:
        city: the city
    """
    return city


def set_return(city: str) -> set[str]:
    """A return hint JSON cannot state is left out of the schema.

    Args:
        city: the city
    """
    return {city}


def any_return(city: str) -> typing.Any:
    """An Any return.

    Args:
        city: the city

    Returns:
        whatever
    """
    return city


def none_return(city: str) -> None:
    """A None return.

    Args:
        city: the city
    """


def no_doc(city: str) -> str:
    return city


def blank_doc(city: str) -> str:
    """ """
    return city


def undocumented(city: str, days: int) -> str:
    """Weather.

    Args:
        city: the city
    """
    return city


def no_hint(city) -> str:
    """Weather.

    Args:
        city: the city
    """
    return city


class Point:
    pass


def custom_hint(where: Point) -> str:
    """Go there.

    Args:
        where: the place
    """
    return ""


def single_tuple(pair: tuple[int]) -> str:
    """A one-element tuple.

    Args:
        pair: the pair
    """
    return ""


def open_tuple(values: tuple[int, ...]) -> str:
    """An open tuple.

    Args:
        values: the values
    """
    return ""


def set_hint(values: set[int]) -> str:
    """A set.

    Args:
        values: the values
    """
    return ""


def empty_enum(colour: Empty) -> str:
    """An enum without members.

    Args:
        colour: a colour
    """
    return ""


def bytes_literal(mode: typing.Literal[b"x"]) -> str:
    """A literal JSON cannot write.

    Args:
        mode: the mode
    """
    return ""


def bad_in_union(value: int | Point) -> str:
    """A union holding a custom class.

    Args:
        value: the value
    """
    return ""


def unresolved(city: "Missing") -> str:  # noqa: F821  (a hint naming what does not exist is the case)
    """Weather.

    Args:
        city: the city
    """
    return ""


def star_args(*words: str, **fields: int) -> str:
    """Join words.

    Args:
        words: the words
        fields: the fields
    """
    return ""


class Shop:
    def order(self, drink: str, size: int = 1) -> str:
        """Order a drink.

        Args:
            drink: what to drink
            size: a cup size
        """
        return drink

    def typed_self(self: "Shop", drink: str) -> str:
        """A self with a hint is an argument.

        Args:
            drink: what to drink
        """
        return drink

    @classmethod
    def open(cls, hour: int) -> str:
        """Open the shop.

        Args:
            hour: the hour
        """
        return ""

    @staticmethod
    def price(drink: str) -> float:
        """A drink's price.

        Args:
            drink: what to drink
        """
        return 1.0


CASES = [
    # function, what transformers makes of it: None for a schema, else the kind of its refusal
    (plain, None),
    (defaults, None),  # required: only the arguments without a default
    (multi_line, None),  # descriptions over several lines joined with single spaces
    (typed_args, None),  # "name (type):" lines
    (with_choices, None),  # (choices: [...]) at the end is an enum, stripped; case aside; elsewhere it is text
    (bad_choices, "docstring"),  # choices that are not JSON
    (rich_hints, None),  # Enum, Literal, list, List, dict, tuple, unions, Optional, Any; a dict return with its Returns:
    (no_args_section, "docstring"),  # no Args: block, so no line for city
    (no_arguments, None),  # no parameters, no required
    (returns_and_raises, None),  # Returns: describes the return; Raises: ends the blocks
    (raises_only, None),
    (returns_inline, "docstring"),  # a "Returns:" inside a description ends the Args block there
    (heading_with_text, "docstring"),  # "Args:" with text after it is no heading
    (empty_line_first, "docstring"),  # "city:" alone takes the next line, so days has no line
    (empty_line_last, None),  # "city:" alone at the end: an empty description
    (deeper_entry, None),  # a deeper "Paris:" is description; "Example:" at the arguments' depth is read as an argument
    (text_before_arguments, None),  # text before the first argument is nobody's
    (no_return_hint, None),  # no return key
    (set_return, None),  # a return hint JSON cannot state: left out, not refused
    (any_return, None),  # an Any return with its description
    (none_return, None),
    (no_doc, "docstring"),
    (blank_doc, "docstring"),
    (undocumented, "docstring"),  # days has no line in Args:
    (no_hint, "type hint"),
    (custom_hint, "type hint"),
    (single_tuple, "type hint"),
    (open_tuple, "type hint"),
    (set_hint, "type hint"),
    (empty_enum, "type hint"),
    (bytes_literal, "type hint"),
    (bad_in_union, "type hint"),
    (unresolved, "NameError"),  # typing.get_type_hints raises, for both
    (star_args, None),  # transformers writes them as plain arguments (check_tool refuses them)
    (Shop.order, None),  # a method on its class: self without a hint is left out
    (Shop().order, None),  # a bound method, as TRL shows an environment's
    (Shop.typed_self, "type hint"),  # self with a hint is an argument, and a class JSON cannot state
    (Shop.open, None),  # a classmethod, bound to its class
    (Shop.price, None),  # a staticmethod
    (environments.GuessNumber.guess, None),  # the library environment's tool, on its class and on an instance
    (environments.GuessNumber().guess, None),
    (environments.GuessNumber.reset, "docstring"),  # TRL never shows these two: they have no docstring
    (environments.GuessNumber.get_reward, "docstring"),
    (library.calculator, None),
    (library.python, None),
]


def outcome(describe, fn) -> tuple:
    """("schema", its JSON with keys in order) or ("refused", the kind, the argument named or None)."""
    try:
        return "schema", json.dumps(describe(fn))
    except SchemaProblem as exc:  # ours
        return "refused", exc.part, exc.argument
    except (DocstringParsingException, json.JSONDecodeError) as exc:  # transformers': its choices are read with json.loads
        return "refused", "docstring", named(str(exc))
    except TypeHintParsingException as exc:
        return "refused", "type hint", named(str(exc))
    except Exception as exc:
        return "refused", type(exc).__name__, None


def named(message: str) -> str | None:
    """The argument a transformers refusal names: a hint's (``Argument x is missing``) or a docstring's (``'x'``);
    None for one about the whole function or about a hint alone."""
    found = re.search(r"Argument (\w+) is missing|the argument '(\w+)'", message)
    return next(g for g in found.groups() if g) if found else None


@pytest.mark.parametrize("fn,refused", CASES, ids=[c[0].__qualname__ for c in CASES])
def test_the_same_schema_as_transformers(fn, refused):
    theirs, ours = outcome(get_json_schema, fn), outcome(tool_schema, fn)
    assert (theirs[1] if theirs[0] == "refused" else None) == refused, theirs  # the case is what its comment says
    if theirs[0] == "schema" or theirs[2] is not None:
        assert ours == theirs
    else:  # transformers names no argument (a hint it cannot state, no docstring): the kind must agree
        assert ours[:2] == theirs[:2], ours


def test_the_library_tools_built_from_args(tmp_path):
    """lookup and search are built by factories from a file and a folder, as a recipe builds them."""
    (tmp_path / "t.json").write_text('{"a": "b"}')
    (tmp_path / "n.md").write_text("some notes")
    args = {"calculator": {}, "python": {}, "lookup": {"path": tmp_path / "t.json"}, "search": {"folder": tmp_path}}
    assert set(args) == set(library.REGISTRY), "a library tool without args here"
    for name, kwargs in args.items():
        tool = library.REGISTRY[name](**kwargs)
        assert json.dumps(tool_schema(tool)) == json.dumps(get_json_schema(tool)), name


def test_a_tensor_hint_reads_as_transformers_reads_it():
    """transformers writes torch.Tensor as audio when torch is installed; read without importing torch, since a hint
    naming it has imported it already."""
    torch = pytest.importorskip("torch")

    def listen(clip: torch.Tensor) -> str:
        """Listen.

        Args:
            clip: the sound
        """
        return ""

    assert tool_schema(listen) == get_json_schema(listen)


DOCSTRINGS = [
    # docstring, as transformers' parser reads it
    "Just a description.",
    "Args:\n    a: on the first line, no heading",
    "Do.\n\nArgs:\n    a: x\n        more\n    b (int): the b\n  Example: hey\nReturns:\n   r\n  two\nRaises: no",
    "Do.\nArgs:\na: at the heading's depth\nb: too",
    "Do.\n\nArgs:\n\ta: a tab\n\t\tdeeper\n\tb: next",
    "Do.\n\nArgs:\n    a:\n    b:\n    c: the c",
    "Do.\n\nArgs:\n    a: x\n\n\n    b: after blank lines\n\nReturns:\n\n    r\n\n    s",
    "Do Raises: inline.\n\nArgs:\n    a: x",
    "Do.\n\nArgs:\n    a: one Raises: two\n    b: never",
    "Do.\n\nReturns:\n    r\n\nArgs:\n    a: after Returns",
    "Do.\n\nArgs:\n    a: x\nReturns:",
    "Do.\n\nArgs:\n    a b: not a name\n    c(int): glued type\n    d (x(y)): nested parentheses\n    é: unicode",
    "Do.\n\n  Args:\n    a: an indented heading",
]


@pytest.mark.parametrize("doc", DOCSTRINGS)
def test_docstrings_read_as_transformers_reads_them(doc):
    assert read_docstring(doc) == Docstring(*parse_google_format_docstring(doc.strip()))


# Docstrings built from the pieces the reader decides on: headings, argument lines at several depths, section words
# inside text, blank lines and odd whitespace.
PIECES = ["Args:", "Returns:", "Raises:", "a", "x1", "é", ":", " ", "\t", "(int)", "(", ")", "text", "\n", "\n\n", "\xa0"]
INDENTS = st.sampled_from(["", " ", "    ", "\t", "        "])
LINES = st.one_of(
    st.builds(lambda indent, parts: indent + "".join(parts), INDENTS, st.lists(st.sampled_from(PIECES), max_size=6)),
    st.builds(
        lambda indent, name, kind, rest: f"{indent}{name}{kind}:{rest}",
        INDENTS,
        st.sampled_from(["a", "city", "x_1", "é"]),
        st.sampled_from(["", " (int)", "(str)", " (a, b)"]),
        st.sampled_from(["", " ", " the city", "  two  words ", " Returns: x", ' a (choices: ["x", 1])']),
    ),
    st.sampled_from(["Args:", "Returns:", "Raises:", "  Args:", "Args: x", "Args: ", ""]),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINES, max_size=10))
def test_any_docstring_reads_as_transformers_reads_it(lines):
    doc = "\n".join(lines).strip()
    assert read_docstring(doc) == Docstring(*parse_google_format_docstring(doc))


class Place:
    pass


def nested(children):
    """Hints holding ``children``: the containers and unions transformers reads, in both spellings."""
    return st.one_of(
        st.builds(lambda a: list[a], children),
        st.builds(lambda a: typing.List[a], children),  # noqa: UP006  (the old spelling is the case)
        st.builds(lambda a: dict[str, a], children),
        st.builds(lambda xs: tuple[tuple(xs)], st.lists(children, min_size=1, max_size=3)),  # one element: refused
        st.builds(lambda a: tuple[a, ...], children),  # refused
        st.builds(lambda xs: typing.Union[tuple(xs)], st.lists(children, min_size=1, max_size=3)),  # noqa: UP007
        st.builds(lambda a: a | None, children),
    )


LEAVES = [int, str, float, bool, type(None), typing.Any, list, tuple, dict, Mixed, Empty, Place, typing.Literal["x", 2]]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.sampled_from(LEAVES), nested, max_leaves=6))
def test_any_hint_reads_as_transformers_reads_it(hint):
    try:
        theirs = _parse_type_hint(hint)
    except TypeHintParsingException:
        theirs = "refused"
    try:
        ours = hint_schema(hint)
    except SchemaProblem:
        ours = "refused"
    assert json.dumps(ours) == json.dumps(theirs)


def test_docstring_examples():
    result = doctest.testmod(schema)
    assert result.attempted > 0 and result.failed == 0
