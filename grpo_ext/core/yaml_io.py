"""YAML a user gives, read within bounds (depth, alias expansion, integer size); keys given twice named.

The text is parsed by libyaml (PyYAML's C parser) where PyYAML was built with it, and by PyYAML's pure-Python
parser where not; either way the nodes are composed here, one event at a time, where the bounds are counted.
"""

from typing import Any

import yaml
from yaml.composer import Composer

from grpo_ext.core.text import clip

# Bounds on YAML a user gives (a recipe, an override), checked while it is read so that nothing past them is built.
# A recipe is a few levels deep; the composer recurses about three frames a level, so 100 stays far inside
# Python's recursion limit of 1000 wherever it is called from.
MAX_YAML_DEPTH = 100
# Values a document stands for with every alias written out: a 1 MB recipe without aliases holds at most 500,000
# (`[1,1,...]`), while a 2 KB "billion laughs" of nine aliases a level stands for 9**10.
MAX_YAML_VALUES = 1_000_000
# Digits of an integer: past 308 no float holds it, and Python's int() refuses past 4300.
MAX_INT_DIGITS = 308


_TOO_DEEP = f"nested more than {MAX_YAML_DEPTH} levels deep; a recipe needs a few"


class YAMLRefused(yaml.MarkedYAMLError):
    """Well-formed YAML beyond a bound of ``load_yaml``; ``problem`` says which, ``problem_mark`` where."""


class _Bounds(Composer):
    """PyYAML's composer that counts, while it composes, how deep each node is and how many values it stands for
    with its aliases written out, and refuses an alias used inside the node it names; and the int constructor,
    which refuses an integer of too many digits before building it. Mixed into a safe loader below, ahead of it:
    the C loader's own composer, which cannot be bounded, is never used."""

    def get_single_node(self) -> yaml.Node | None:
        self.anchors = {}  # set here, as the C loader's __init__ does not set the Python composer's
        self.depth = 0
        self.values: dict[int, int] = {}  # id(node) -> values it stands for, set once the node is complete
        return super().get_single_node()

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, which the loader mixes this into
        if self.depth >= MAX_YAML_DEPTH:
            raise YAMLRefused(None, None, _TOO_DEEP, event.start_mark)
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if isinstance(event, yaml.AliasEvent):
            if id(node) not in self.values:
                problem = f"alias *{event.anchor} is used inside the node it names; an alias repeats a node given before it"
                raise YAMLRefused(None, None, problem, event.start_mark)  # type: ignore[arg-type]  # libyaml's Mark reads alike
            return node
        children = node.value if isinstance(node, yaml.SequenceNode) else []
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        count = 1 + sum(self.values[id(child)] for child in children)
        if count > MAX_YAML_VALUES:
            problem = f"its aliases expand to more than {MAX_YAML_VALUES:,} values; a recipe holds far fewer: use fewer aliases"
            raise YAMLRefused(None, None, problem, event.start_mark)
        self.values[id(node)] = count
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        body = node.value.replace("_", "").lstrip("+-")
        digits = len(body[2:] if body[:2] in ("0x", "0b") else body)
        if digits > MAX_INT_DIGITS:
            problem = f"an integer of {digits} digits; a recipe's numbers have at most {MAX_INT_DIGITS}"
            raise YAMLRefused(None, None, problem, node.start_mark)
        return super().construct_yaml_int(node)  # type: ignore[misc, no-any-return]  # the loader's constructor


class _PythonLoader(_Bounds, yaml.SafeLoader):
    """The bounds over PyYAML's pure-Python reader, scanner and parser."""


LOADERS: dict[str, type[Any]] = {"python": _PythonLoader}  # by the parser under the bounds; tests run each
if yaml.__with_libyaml__:

    class _LibyamlLoader(_Bounds, yaml.CSafeLoader):
        """The bounds over libyaml's parser: about ten times as fast as the pure-Python one on a recipe."""

        __init__ = yaml.CSafeLoader.__init__  # not the composer's, which comes first here

    LOADERS["libyaml"] = _LibyamlLoader
for _loader in LOADERS.values():
    _loader.add_constructor("tag:yaml.org,2002:int", _loader.construct_yaml_int)
LOADER: type[Any] = LOADERS.get("libyaml", _PythonLoader)  # what every function below reads with


# libyaml's own bound on nesting (1,000 levels), met before ours where its scanner looks ahead on a line for a key
# (up to 1,024 characters): `[` x 1,001 stops there before the composer has counted 101 levels.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` within the bounds above: ``YAMLRefused`` past one, ``yaml.YAMLError`` for bad syntax.

    >>> load_yaml("seed: 7"), load_yaml("a: &x [1, 2]\\nb: *x")
    ({'seed': 7}, {'a': [1, 2], 'b': [1, 2]})
    >>> for text in ("[" * 101 + "]" * 101, "a: &a [*a]", "seed: " + "9" * 400):
    ...     try:
    ...         load_yaml(text)
    ...     except YAMLRefused as exc:
    ...         print(f"column {exc.problem_mark.column + 1}: {exc.problem}")
    column 101: nested more than 100 levels deep; a recipe needs a few
    column 8: alias *a is used inside the node it names; an alias repeats a node given before it
    column 7: an integer of 400 digits; a recipe's numbers have at most 308
    """
    return _read(text, construct=True)[0]


def duplicate_keys(text: str) -> list[str]:
    r"""One line per key that a mapping of this YAML text gives twice (YAML itself keeps the last silently).

    >>> duplicate_keys("training:\n  learning_rate: 1.0e-5\n  beta: 0.0\n  learning_rate: 3.0e-5\n")
    ['training.learning_rate: given twice (lines 2 and 4); keep one']
    """
    return _read(text, construct=False)[1]


def load_checked(text: str) -> tuple[object, list[str]]:
    r"""``load_yaml`` and ``duplicate_keys`` of the text from one parse: its value, and one line per key given twice.

    >>> load_checked("seed: 1\nseed: 2\n")
    ({'seed': 2}, ['seed: given twice (lines 1 and 2); keep one'])
    """
    return _read(text, construct=True)


def _read(text: str, construct: bool) -> tuple[object, list[str]]:
    """The value of the text (None unless ``construct``) and its keys given twice, read with ``LOADER``."""
    try:
        return _parse(LOADER, text, construct)
    except UnicodeEncodeError:  # a lone surrogate (a byte of a command line that is not UTF-8): libyaml takes only
        return _parse(_PythonLoader, text, construct)  # UTF-8, and the pure-Python reader refuses it (ReaderError)
    except YAMLRefused:
        raise
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.MarkedYAMLError) and exc.problem == _LIBYAML_TOO_DEEP:
            raise YAMLRefused(None, None, _TOO_DEEP, exc.problem_mark) from None  # where libyaml stopped, past ours
        if LOADER is _PythonLoader:
            raise
        # Bad syntax is told in PyYAML's own words, which name what was found ("expected <block end>, but found '-'"
        # where libyaml says "did not find expected key"): the pure-Python parser reads the text again up to the
        # same place, a cost only a refused text pays.
        _parse(_PythonLoader, text, construct)
        raise


def _parse(loader_class: type[Any], text: str, construct: bool) -> tuple[object, list[str]]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, []
        twice = _twice(node)  # first: constructing merges each `<<: *defaults` into the node that names it
        return (loader.construct_document(node) if construct else None), twice
    finally:
        loader.dispose()


def _twice(root: yaml.Node) -> list[str]:
    """The keys given twice in a mapping under this node, as ``duplicate_keys`` words them."""
    problems: list[str] = []
    walked: set[int] = set()  # an alias repeats a node: walk it once, however often it is named

    def walk(node: yaml.Node, path: str) -> None:
        if id(node) in walked:
            return
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may be overridden on purpose
                    continue
                name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark.line + 1)
                where = f"{path}.{clip(name)}" if path else clip(name)
                if name in seen:
                    first = seen[name]
                    problems.append(f"{where}: given twice (lines {first} and {key.start_mark.line + 1}); keep one")
                else:
                    seen[name] = key.start_mark.line + 1
                walk(value, where)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, f"{path}[{i}]")

    walk(root, "")
    return problems
