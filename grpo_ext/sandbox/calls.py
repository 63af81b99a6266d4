"""Calls across the sandbox's boundary: the program's process answers, the judge's process holds the tests.

A program's tests never enter the program's process. The judge (``harness.py`` starts it as a process of
its own, under another user id where the kernel allows) runs the tests; each name the program defined is a
``Remote`` there, and using one (a call, an attribute, an operator) is a message to the program's process, which
does it and answers with the value. Values cross as data, never as objects: None, bools, numbers, strings, bytes,
lists, tuples, sets, dicts, ranges, fractions, decimals and dates are rebuilt in the judge as the standard types, so
an ``==`` in a test compares two honest values. Anything else stays in the program's process and crosses as a
handle; a handle is never equal to a value (``Remote.__eq__``), so an object whose ``__eq__`` says yes to
everything passes no test. The program can still lie about a value, but to pass it must give the value the test
expects, which is what the test asks of it.

Semantics a test sees: arguments cross by copy, and a list, dict, set or bytearray the program changed in place is
copied back; a function of the test's passed to the program is called back in the judge; a program's exception
reaches the test as the nearest built-in exception class (``class Empty(ValueError)`` as ``ValueError``), others
as ``ProgramError``; a program that exits inside a call ends the tests (``ProgramEnded``, not catchable as an
``Exception``). Messages are length-prefixed JSON on two pipes. Standard library only: the harness imports it.
"""

import builtins
import json
import operator
import os
import struct
import sys

MAX_MESSAGE = 64 << 20  # bytes; a larger message is refused (the judge fails the case)
MAX_DEPTH = 100  # nesting of one value; deeper data crosses as a handle
MAX_ITEMS = 4_000_000  # elements of one value, all levels; larger data crosses as a handle
TAKE = 256  # items fetched at once when the judge iterates over the program's iterator

_HEADER = struct.Struct(">I")


class ProgramError(Exception):
    """An exception of the program's own that derives from no built-in exception class."""


class ProgramEnded(BaseException):
    """The program's process exited (``sys.exit``, ``os._exit``, a kill) while the tests used it: no pass."""


class ProtocolError(Exception):
    """A message that is not one this protocol sends."""


# -- framing --------------------------------------------------------------------------------------------------------


def send(fd: int, message) -> None:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"a message of {len(data)} bytes, over {MAX_MESSAGE}")
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _exactly(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def receive(fd: int):
    (size,) = _HEADER.unpack(_exactly(fd, _HEADER.size))
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes, over {MAX_MESSAGE}")
    return json.loads(_exactly(fd, size).decode("utf-8"))


# -- values as data -------------------------------------------------------------------------------------------------


class _Budget(Exception):
    """The value is too deep or too large to cross as data."""


def encode_data(value, other, depth: int = 0, count: list | None = None):
    """``value`` as JSON-able data; ``other(v)`` encodes what is not data (a handle, a callback), or raises."""
    count = count if count is not None else [0]
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
        raise _Budget

    def inner(v):
        return encode_data(v, other, depth + 1, count)

    if value is None:
        return ["N"]
    if isinstance(value, bool):
        return ["B", bool(value)]
    if isinstance(value, int):
        return ["I", hex(int(value))]
    if isinstance(value, float):
        return ["F", float(value).hex()]
    if isinstance(value, complex):
        return ["C", value.real.hex(), value.imag.hex()]
    if isinstance(value, str):
        return ["S", str.__str__(value)]
    if isinstance(value, bytearray):
        return ["A", bytes(value).hex()]
    if isinstance(value, bytes):
        return ["Y", bytes(value).hex()]
    # a value of these modules' types exists only once its module is imported: no import here for the others
    fractions, decimal, datetime = (sys.modules.get(name) for name in ("fractions", "decimal", "datetime"))
    if fractions and isinstance(value, fractions.Fraction):
        return ["Q", hex(value.numerator), hex(value.denominator)]
    if decimal and isinstance(value, decimal.Decimal):
        return ["M", str(value)]
    if datetime and isinstance(value, datetime.datetime):  # before date: a datetime is a date
        if value.tzinfo is not None:
            return other(value)
        return ["DT", value.isoformat()]
    if datetime and isinstance(value, datetime.date):
        return ["DA", value.isoformat()]
    if datetime and isinstance(value, datetime.timedelta):
        return ["TD", value.days, value.seconds, value.microseconds]
    if isinstance(value, range):
        return ["R", hex(value.start), hex(value.stop), hex(value.step)]
    if isinstance(value, list):
        return ["L", [inner(v) for v in list.__iter__(value)]]
    if isinstance(value, tuple):
        return ["T", [inner(v) for v in tuple.__iter__(value)]]
    if isinstance(value, frozenset):
        return ["Z", [inner(v) for v in frozenset.__iter__(value)]]
    if isinstance(value, set):
        return ["E", [inner(v) for v in set.__iter__(value)]]
    if isinstance(value, dict):
        return ["D", [[inner(k), inner(v)] for k, v in dict.items(value)]]
    return other(value)


def decode_data(item, other, depth: int = 0):
    """The value ``encode_data`` encoded, rebuilt from the standard types; ``other(item)`` for the rest."""
    if depth > MAX_DEPTH + 1 or not isinstance(item, list) or not item or not isinstance(item[0], str):
        raise ProtocolError("not a value")
    tag, args = item[0], item[1:]

    def inner(v):
        return decode_data(v, other, depth + 1)

    def items():
        if len(args) != 1 or not isinstance(args[0], list):
            raise ProtocolError("not a sequence")
        return args[0]

    try:
        if tag == "N":
            return None
        if tag == "B":
            return bool(args[0])
        if tag == "I":
            return int(args[0], 16)
        if tag == "F":
            return float.fromhex(args[0])
        if tag == "C":
            return complex(float.fromhex(args[0]), float.fromhex(args[1]))
        if tag == "S":
            return str(args[0])
        if tag == "Y":
            return bytes.fromhex(args[0])
        if tag == "A":
            return bytearray.fromhex(args[0])
        if tag == "Q":
            from fractions import Fraction

            return Fraction(int(args[0], 16), int(args[1], 16))
        if tag == "M":
            from decimal import Decimal

            return Decimal(str(args[0]))
        if tag in ("DT", "DA", "TD"):
            import datetime

            if tag == "TD":
                return datetime.timedelta(days=int(args[0]), seconds=int(args[1]), microseconds=int(args[2]))
            return (datetime.datetime if tag == "DT" else datetime.date).fromisoformat(str(args[0]))
        if tag == "R":
            return range(int(args[0], 16), int(args[1], 16), int(args[2], 16))
        if tag == "L":
            return [inner(v) for v in items()]
        if tag == "T":
            return tuple(inner(v) for v in items())
        if tag == "E":
            return {inner(v) for v in items()}
        if tag == "Z":
            return frozenset(inner(v) for v in items())
        if tag == "D":
            return {inner(k): inner(v) for k, v in items()}
    except (IndexError, TypeError, ValueError, ArithmeticError, OverflowError) as exc:
        raise ProtocolError(f"a damaged value: {exc}") from None
    return other(item)


def exception_of(message: list) -> BaseException:
    """The exception a test sees for the program's ``["raise", [class names, most derived first], text]``."""
    names, text = message[1], str(message[2])
    for name in names:
        kind = getattr(builtins, str(name), None)
        if isinstance(kind, type) and issubclass(kind, Exception) and kind is not Exception:
            try:
                return kind(text)
            except Exception:  # an exception class whose constructor wants other arguments
                continue
    return ProgramError(f"{names[0] if names else 'an exception'}: {text}")


def raised(exc: BaseException) -> list:
    """How an exception crosses: the names of its classes, most derived first, and its text."""
    try:
        text = str(exc)[:2000]
    except Exception:
        text = ""
    return ["raise", [k.__name__ for k in type(exc).__mro__], text]


# -- the program's side ---------------------------------------------------------------------------------------------

# What the judge may ask the program's process to do with its objects (nothing else is carried out).
OPERATIONS = {
    "getattr": getattr,
    "setattr": setattr,
    "delattr": delattr,
    "call": lambda f, *args, **kwargs: f(*args, **kwargs),
    "getitem": operator.getitem,
    "setitem": operator.setitem,
    "delitem": operator.delitem,
    "contains": operator.contains,
    "len": len,
    "iter": iter,
    "next": next,
    "truth": operator.truth,
    "repr": repr,
    "str": str,
    "format": format,
    "hash": hash,
    "dir": dir,
    "int": int,
    "float": float,
    "complex": complex,
    "index": operator.index,
    "round": round,
    "isinstance": isinstance,
    "issubclass": issubclass,
    "enter": lambda o: type(o).__enter__(o),
    "exit": lambda o, *a: type(o).__exit__(o, *a),
    **{
        name: getattr(operator, name)
        for name in (
            "eq ne lt le gt ge add sub mul truediv floordiv mod pow matmul lshift rshift and_ or_ xor neg pos abs invert"
        ).split()
    },
}
_MUTABLE = (list, dict, set, bytearray)


class Answerer:
    """The program's process: keeps its objects behind handles and carries out what the judge asks."""

    def __init__(self, requests: int, replies: int):
        self.requests, self.replies = requests, replies
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}  # id(object) -> handle, so one object keeps one handle

    def handle(self, value) -> list:
        key = self.ids.get(id(value))
        if key is None or self.objects.get(key) is not value:
            key = len(self.objects)
            self.objects[key] = value
            self.ids[id(value)] = key
        return ["H", key, type(value).__name__]

    def encode(self, value):
        try:
            return encode_data(value, self.handle)
        except (_Budget, RecursionError):
            return self.handle(value)

    def decode(self, item):
        def other(item):
            if item[0] == "H" and isinstance(item[1], int) and item[1] in self.objects:
                return self.objects[item[1]]
            if item[0] == "CB" and isinstance(item[1], int):
                return self.callback(item[1])
            raise ProtocolError(f"not a value: {item[0]!r}")

        return decode_data(item, other)

    def callback(self, key: int):
        def call(*args, **kwargs):
            send(self.replies, ["call", key, [self.encode(a) for a in args], {k: self.encode(v) for k, v in kwargs.items()}])
            return self.wait()

        return call

    def wait(self):
        """Serve the judge's requests until the answer to this process's own call comes back."""
        while True:
            message = receive(self.requests)
            if message[0] == "ok":
                return self.decode(message[1])
            if message[0] == "raise":
                raise exception_of(message)
            self.dispatch(message)

    def dispatch(self, message: list) -> None:
        if message and message[0] == "take":
            self.serve_take(message)
        else:
            self.serve(message)

    def serve(self, message: list) -> None:
        """Carry out one request, ``[operation, [args], {kwargs}]``, and send the answer."""
        try:
            name, args, kwargs = message
            operation = OPERATIONS[name]
            args = [self.decode(a) for a in args]
            kwargs = {str(k): self.decode(v) for k, v in kwargs.items()}
        except (ValueError, KeyError, TypeError, AttributeError, ProtocolError) as exc:
            send(self.replies, ["raise", ["ProtocolError"], f"a request this process does not carry out: {exc}"])
            return
        try:
            value = operation(*args, **kwargs)
            reply = ["ok", self.encode(value), self.changed(args, kwargs)]
        except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
            send(self.replies, ["ended", repr(exc)[:200]])
            raise
        except BaseException as exc:
            reply = raised(exc)
        send(self.replies, reply)

    def serve_take(self, message: list) -> None:
        """Send up to ``message[2]`` items of the iterator ``message[1]``, and how it stopped."""
        try:
            iterator = self.objects[message[1]]
            n = max(1, min(int(message[2]), TAKE))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            send(self.replies, ["raise", ["ProtocolError"], f"a request this process does not carry out: {exc}"])
            return
        try:
            items, error, done = _take(iterator, n)
        except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
            send(self.replies, ["ended", repr(exc)[:200]])
            raise
        send(self.replies, ["items", [self.encode(v) for v in items], raised(error) if error else None, done])

    def changed(self, args: list, kwargs: dict) -> dict:
        """The arguments that may have been changed in place, as they are now, to be copied back."""
        pairs = [*((str(i), a) for i, a in enumerate(args)), *kwargs.items()]
        return {k: self.encode(v) for k, v in pairs if type(v) in _MUTABLE}


def _take(iterator, n: int) -> tuple[list, BaseException | None, bool]:
    """Up to ``n`` items of ``iterator``: (items, the exception that stopped it early, whether it is exhausted)."""
    got = []
    try:
        for _ in range(n):
            got.append(next(iterator))
    except StopIteration:
        return got, None, True
    except (SystemExit, KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:
        return got, exc, True
    return got, None, False


def serve_forever(answerer: Answerer, names: dict) -> None:
    """Tell the judge the program's names (values as data, the rest as handles), then answer until it is done."""
    send(answerer.replies, ["ready", {k: answerer.encode(v) for k, v in names.items() if not k.startswith("__")}])
    while True:
        try:
            message = receive(answerer.requests)
        except EOFError:
            return
        answerer.dispatch(message)


# -- the judge's side -----------------------------------------------------------------------------------------------


class Judge:
    """The judge's end of the pipes: sends requests, rebuilds the answers, answers the program's callbacks."""

    def __init__(self, requests: int, replies: int):
        self.requests, self.replies = requests, replies
        self.callbacks: list = []

    def names(self) -> dict:
        """The program's top-level names, once it has run to its end; ProgramEnded when it did not."""
        message = self.receive()
        if message[0] != "ready" or not isinstance(message[1], dict):
            raise ProtocolError("the program's process did not start as it should")
        return {str(k): self.decode(v) for k, v in message[1].items()}

    def receive(self):
        try:
            message = receive(self.replies)
        except EOFError:
            raise ProgramEnded("the program's process ended") from None
        if not isinstance(message, list) or not message:
            raise ProtocolError("not a message")
        if message[0] == "ended":
            raise ProgramEnded(f"the program exited during the tests ({message[1]})")
        return message

    def encode(self, value):
        def other(v):
            if isinstance(v, Remote):
                return ["H", object.__getattribute__(v, "_remote_key")]
            if callable(v):
                self.callbacks.append(v)
                return ["CB", len(self.callbacks) - 1]
            raise TypeError(f"a {type(v).__name__} cannot be passed to the program (values cross as data)")

        try:
            return encode_data(value, other)
        except _Budget:
            raise TypeError("a value too large or too deep to pass to the program") from None

    def decode(self, item):
        def other(item):
            if item[0] == "H" and isinstance(item[1], int):
                return Remote(self, item[1], str(item[2]) if len(item) > 2 else "object")
            raise ProtocolError(f"not a value: {item[0]!r}")

        return decode_data(item, other)

    def ask(self, operation: str, *args, **kwargs):
        """Have the program's process carry out ``operation`` on the arguments; its value, or its exception."""
        send(self.requests, [operation, [self.encode(a) for a in args], {k: self.encode(v) for k, v in kwargs.items()}])
        message = self.answer()
        if message[0] != "ok" or len(message) != 3 or not isinstance(message[2], dict):
            raise ProtocolError("not an answer")
        for key, state in message[2].items():  # copy back what the program changed in place
            target = args[int(key)] if key.isdigit() and int(key) < len(args) else kwargs.get(key)
            _refill(target, self.decode(state))
        return self.decode(message[1])

    def take(self, remote, n: int = TAKE):
        send(self.requests, ["take", object.__getattribute__(remote, "_remote_key"), n])
        message = self.answer()
        if message[0] != "items" or len(message) != 4:
            raise ProtocolError("not an answer")
        return [self.decode(v) for v in message[1]], exception_of(message[2]) if message[2] else None, bool(message[3])

    def answer(self) -> list:
        """The next answer, carrying out the program's callbacks into the tests' functions meanwhile."""
        while True:
            message = self.receive()
            if message[0] == "raise":
                raise exception_of(message)
            if message[0] != "call":
                return message
            try:
                _, key, args, kwargs = message
                function = self.callbacks[key]
                value = function(*[self.decode(a) for a in args], **{str(k): self.decode(v) for k, v in kwargs.items()})
                reply = ["ok", self.encode(value)]
            except (ProgramEnded, ProtocolError):
                raise
            except Exception as exc:
                reply = raised(exc)
            send(self.requests, reply)


def _refill(target, state) -> None:
    if type(target) is not type(state):
        return
    if isinstance(target, (list, bytearray)):
        target[:] = state
    elif isinstance(target, (dict, set)):
        target.clear()
        target.update(state)


class Remote:
    """An object of the program's, seen from the tests: every use of it is carried out in the program's process.

    It equals no value of the tests' own (``==`` is False, ``<`` a TypeError): only another handle, by the
    program's own comparison."""

    __slots__ = ("_remote_judge", "_remote_key", "_remote_type")

    def __init__(self, judge: Judge, key: int, kind: str):
        object.__setattr__(self, "_remote_judge", judge)
        object.__setattr__(self, "_remote_key", key)
        object.__setattr__(self, "_remote_type", kind)

    def _ask(self, operation: str, *args):
        return object.__getattribute__(self, "_remote_judge").ask(operation, *args)

    def __getattr__(self, name):
        return self._ask("getattr", self, name)

    def __setattr__(self, name, value):
        self._ask("setattr", self, name, value)

    def __delattr__(self, name):
        self._ask("delattr", self, name)

    def __call__(self, *args, **kwargs):
        judge = object.__getattribute__(self, "_remote_judge")
        return judge.ask("call", self, *args, **kwargs)

    def __iter__(self):
        judge = object.__getattribute__(self, "_remote_judge")
        iterator = judge.ask("iter", self)
        if not isinstance(iterator, Remote):
            yield from iterator
            return
        while True:
            items, error, done = judge.take(iterator)
            yield from items
            if error is not None:
                raise error
            if done:
                return

    def __next__(self):
        return self._ask("next", self)

    def __bool__(self):
        return bool(self._ask("truth", self))

    def __len__(self):
        return self._ask("len", self)

    def __contains__(self, item):
        return bool(self._ask("contains", self, item))

    def __getitem__(self, key):
        return self._ask("getitem", self, key)

    def __setitem__(self, key, value):
        self._ask("setitem", self, key, value)

    def __delitem__(self, key):
        self._ask("delitem", self, key)

    def __repr__(self):
        return self._ask("repr", self)

    def __str__(self):
        return self._ask("str", self)

    def __format__(self, spec):
        return self._ask("format", self, spec)

    def __hash__(self):
        return self._ask("hash", self)

    def __dir__(self):
        return self._ask("dir", self)

    def __enter__(self):
        return self._ask("enter", self)

    def __exit__(self, *exc):
        return self._ask("exit", self, None, None, None)

    def __instancecheck__(self, instance):
        return bool(self._ask("isinstance", instance, self))

    def __subclasscheck__(self, subclass):
        return bool(self._ask("issubclass", subclass, self))


def _compare(name: str):
    def compare(self, other):
        if not isinstance(other, Remote):
            return NotImplemented  # a handle equals no value of the tests' own, and orders against none
        return self._ask(name, self, other)

    compare.__name__ = f"__{name}__"
    return compare


def _binary(name: str, reflected: bool):
    def op(self, other):
        return self._ask(name, other, self) if reflected else self._ask(name, self, other)

    return op


def _unary(name: str):
    def op(self):
        return self._ask(name, self)

    return op


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _compare(_name))
for _name in "add sub mul truediv floordiv mod pow matmul lshift rshift and_ or_ xor".split():
    _dunder = _name.rstrip("_")
    setattr(Remote, f"__{_dunder}__", _binary(_name, False))
    setattr(Remote, f"__r{_dunder}__", _binary(_name, True))
for _name, _dunder in (("neg", "neg"), ("pos", "pos"), ("abs", "abs"), ("invert", "invert"), ("int", "int"),
                       ("float", "float"), ("complex", "complex"), ("index", "index")):  # fmt: skip
    setattr(Remote, f"__{_dunder}__", _unary(_name))
Remote.__round__ = lambda self, *n: self._ask("round", self, *n)
