"""The base helpers: YAML that refuses a key given twice, atomic writes, and the docstring examples."""

import doctest
from pathlib import Path

import pytest
import yaml

from grpo_ext.core import files, text, values, yaml_io
from grpo_ext.recipe import changes
from tests.helpers import ROOT


@pytest.mark.parametrize("module", [text, values, changes])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_yaml_docstring_examples(yaml_loader):
    result = doctest.testmod(yaml_io)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: 1\nb: 2\n", []),  # no key twice
        ("a: 1\na: 2\n", ["a: given twice (lines 1 and 2); keep one"]),  # top level
        ("x:\n  y: 1\n  z: 2\n  y: 3\n", ["x.y: given twice (lines 2 and 4); keep one"]),  # nested
        (
            "r:\n  - n: a\n    args: {k: 1, k: 2}\n",
            ["r[0].args.k: given twice (lines 3 and 3); keep one"],
        ),  # flow style in a list
        ("d: &d {a: 1}\ne:\n  <<: *d\n  a: 2\n", []),  # a merge key overridden on purpose
        ("a: 1\nb: 2\na: 3\na: 4\n", ["a: given twice (lines 1 and 3); keep one", "a: given twice (lines 1 and 4); keep one"]),
    ],
)
def test_duplicate_keys(text, expected, yaml_loader):
    assert yaml_io.duplicate_keys(text) == expected
    assert yaml_io.load_checked(text) == (yaml_io.load_yaml(text), expected)  # the two from one parse


def test_both_parsers_read_every_shipped_file_alike(monkeypatch):
    """libyaml and the pure-Python parser give each shipped recipe and config the same value (and no key twice)."""
    if "libyaml" not in yaml_io.LOADERS:
        pytest.skip("PyYAML here has no libyaml")
    paths = sorted([*(ROOT / "recipes").rglob("*.yaml"), *(ROOT / "configs").rglob("*.yaml")])
    read = {}
    for name, loader in yaml_io.LOADERS.items():
        monkeypatch.setattr(yaml_io, "LOADER", loader)
        read[name] = [yaml_io.load_checked(path.read_text(encoding="utf-8")) for path in paths]
    assert len(paths) > 10 and read["libyaml"] == read["python"]
    assert all(twice == [] for _, twice in read["python"])


# Bad YAML, each refused in PyYAML's words whichever parser read it (libyaml's differ: "did not find expected key")
BAD_YAML = [
    "training:\n  beta: 0.0\n- rewards\n",  # a list item inside a mapping: expected <block end>, but found '-'
    "seed: 1\x0f\n",  # a control character: special characters are not allowed
    "data: {prompts: a: b}\n",  # a colon inside a flow mapping: expected ',' or '}', but got ':'
    "rewards: [digit_exact: 1: 2]\n",  # ... in a flow sequence: expected ',' or ']', but got ':'
    "model: 'unclosed\n",  # an unclosed quote: found unexpected end of stream
    "a:\n\tb: 1\n",  # a tab for indentation: found character '\\t' that cannot start any token
]


@pytest.mark.parametrize("text", BAD_YAML)
def test_bad_syntax_is_told_alike_by_both_parsers(text, monkeypatch):
    if "libyaml" not in yaml_io.LOADERS:
        pytest.skip("PyYAML here has no libyaml")
    said = {}
    for name, loader in yaml_io.LOADERS.items():
        monkeypatch.setattr(yaml_io, "LOADER", loader)
        with pytest.raises(yaml.YAMLError) as exc:
            yaml_io.load_yaml(text)
        said[name] = str(exc.value)
    assert said["libyaml"] == said["python"]


def test_write_atomic_leaves_old_or_new(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    files.write_atomic(path, "old")
    monkeypatch.setattr(files.os, "replace", lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))  # killed before the rename
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left


def test_a_path_names_an_unknown_users_home_as_a_shell_does(tmp_path, monkeypatch):
    """``~`` is the home directory; ``~NAME`` of a user this machine lacks stays as typed (a relative name), as a shell
    leaves it, instead of pathlib's RuntimeError reaching the person who typed it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert files.user_path("~/runs") == tmp_path / "runs"
    assert files.user_path("~0/runs") == Path("~0/runs")
    assert files.resolve_path("~0", tmp_path / "recipes") == tmp_path / "recipes" / "~0"
