"""Values across the sandbox's boundary (``sandbox/calls.py``): what the program's process sends is rebuilt in the
judge as the standard types, whatever subclass it was, and anything malformed is a ProtocolError, never a value."""

import json
import math
from collections import Counter, OrderedDict, namedtuple
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_ext.sandbox import calls


def no_handles(value):
    raise AssertionError(f"{value!r} should have crossed as data")


def across(value):
    """``value`` as the judge sees it: encoded by the program's side, through JSON, decoded by the judge's."""
    wire = json.loads(json.dumps(calls.encode_data(value, no_handles)))
    return calls.decode_data(wire, no_handles)


PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.complex_numbers(allow_nan=False),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
        | st.frozensets(st.integers(), max_size=4)
    ),
    max_leaves=20,
)


@given(PLAIN)
def test_plain_values_cross_unchanged(value):
    got = across(value)
    assert got == value and type(got) is type(value)


Point = namedtuple("Point", "x y")


class Loud(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


# (what the program sends, what the judge gets): subclasses arrive as their standard type
SUBCLASSES = [
    (Point(1, 2), (1, 2)),  # a namedtuple is a tuple
    (Counter("aab"), {"a": 2, "b": 1}),  # a Counter is a dict
    (OrderedDict(a=1), {"a": 1}),
    (Loud(3), 3),  # an int that equals everything arrives as the int it is
    (True, True),  # a bool stays a bool, not an int
    (Fraction(1, 3), Fraction(1, 3)),
    (range(2, 10, 3), range(2, 10, 3)),
    (bytearray(b"ab"), bytearray(b"ab")),
    (float("inf"), float("inf")),
    (2**5000, 2**5000),  # past the decimal digits int() may print
]


@pytest.mark.parametrize("sent,got", SUBCLASSES)
def test_subclasses_arrive_as_standard_types(sent, got):
    value = across(sent)
    assert value == got and type(value) is type(got)
    assert not isinstance(value, Loud)


def test_nan_crosses():
    assert math.isnan(across(float("nan")))


def test_too_deep_crosses_as_a_handle():
    deep: list = []
    for _ in range(calls.MAX_DEPTH + 5):
        deep = [deep]
    answerer = calls.Answerer(-1, -1)  # the program's side: what cannot cross as data stays behind a handle
    assert answerer.encode(deep)[0] == "H" and answerer.objects[0] is deep


# what a damaged or hostile message may hold: each is refused as a ProtocolError
DAMAGED = [
    [],
    ["I"],
    ["I", "zz"],
    ["F", 3],
    ["L", "not a list"],
    ["D", [[["S", "k"]]]],
    ["Q", "0x1", "0x0"],  # a fraction over zero
    ["X", 1],  # no such tag
    "a string",
    ["H", 1, "obj"],  # a handle where none is expected
]


@pytest.mark.parametrize("item", DAMAGED)
def test_damaged_values_are_refused(item):
    def other(item):
        raise calls.ProtocolError("not a value")

    with pytest.raises(calls.ProtocolError):
        calls.decode_data(item, other)


# (the program's exception, as classes most derived first, and what the tests see)
EXCEPTIONS = [
    (["ValueError", "Exception", "BaseException", "object"], ValueError),
    (["Empty", "KeyError", "LookupError", "Exception", "BaseException", "object"], KeyError),
    (["Mine", "Exception", "BaseException", "object"], calls.ProgramError),
    (["SystemExit", "BaseException", "object"], calls.ProgramError),  # never raised in the judge as itself
    (["StopIteration", "Exception", "BaseException", "object"], StopIteration),
]


@pytest.mark.parametrize("names,kind", EXCEPTIONS)
def test_exceptions_arrive_as_the_nearest_builtin(names, kind):
    exc = calls.exception_of(["raise", names, "text"])
    assert type(exc) is kind and not isinstance(exc, SystemExit)
