"""Finding rewards: registry names, module and file paths, installed entry points; errors that say what failed."""

import importlib
import importlib.metadata
import os
import pkgutil
import sys
import zipfile

import pytest

from grpo_ext import cli
from grpo_ext.core import references
from grpo_ext.core.errors import RecipeError
from grpo_ext.rewards import build, known_names, registry
from tests.helpers import PLUGIN, minimal_recipe, run_cli, write


def test_the_builtins_table_is_what_the_modules_register():
    """registry.BUILTINS, which a lookup reads to import a built-in reward's module, names each module of rewards/
    with exactly the rewards it registers: every module imported, each registered name's module is its row's."""
    package = registry.__package__
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{module.name}")
    found = {name: getattr(f, "fn", f).__module__.removeprefix(f"{package}.") for name, f in registry.REGISTRY.registered.items()}
    assert found == registry.BUILTINS


@pytest.mark.parametrize(
    "name,module",
    [
        ("digit_exact", "digit"),  # a plain reward, registered as a factory of no arguments
        ("math_closeness", "maths"),  # a factory
        ("overlong_penalty", "shaping"),  # a factory with an example, which sample() builds
    ],
)
def test_a_builtin_is_found_by_name(name, module, tmp_path):
    """A built-in name is known from the table and found through its module, the same factory a build calls."""
    assert name in registry.REGISTRY and name in known_names()
    factory, is_factory = registry.find(name, tmp_path)
    assert is_factory and factory is registry.REGISTRY[name]
    assert getattr(factory, "fn", factory).__module__ == f"grpo_ext.rewards.{module}"
    assert callable(registry.sample(name))


def test_entry_point_is_found_by_name(installed, tmp_path):
    installed("kwpkg", {"keyword_reward": "kwpkg:keyword_reward"})
    assert "keyword_reward" in known_names()
    assert build("keyword_reward", {}, tmp_path, "rewards[0]")(["I say 7", "no"]) == [1.0, 0.0]


def test_entry_point_factory_takes_args(installed, tmp_path):
    installed("bonuspkg", {"bonus": "bonuspkg:make_bonus"})
    assert build("bonus", {"word": "cat"}, tmp_path, "rewards[0]")(["a cat", "a dog"]) == [0.5, 0.0]


@pytest.mark.parametrize(
    "entries,module,name,expected",
    [
        # a broken plug-in names its package and the error
        (
            {"broken": "brokenpkg:keyword_reward"},
            "raise ImportError('needs numpy 9')",
            "broken",
            "entry point 'broken' of package brokenpkg (brokenpkg:keyword_reward) failed to load: ImportError: needs numpy 9",
        ),
        # a plug-in that takes a built-in's name
        (
            {"math_accuracy": "clashpkg:keyword_reward"},
            PLUGIN,
            "math_accuracy",
            "reward 'math_accuracy' is built in, and package clashpkg registers the same name",
        ),
        # an entry point naming something that is not there
        (
            {"ghost": "ghostpkg:nothing_here"},
            PLUGIN,
            "ghost",
            "entry point 'ghost' of package ghostpkg (ghostpkg:nothing_here) failed to load",
        ),
    ],
)
def test_bad_entry_points(installed, tmp_path, entries, module, name, expected):
    installed(entries and next(iter(entries.values())).split(":")[0], entries, module)
    with pytest.raises(RecipeError) as info:
        build(name, {}, tmp_path, "rewards[0]")
    assert info.value.problems[0].startswith("rewards[0].name: ")
    assert expected in info.value.problems[0]


def test_two_packages_same_name(installed, tmp_path):
    installed("pkga", {"shared": "pkga:keyword_reward"})
    installed("pkgb", {"shared": "pkgb:keyword_reward"})
    with pytest.raises(RecipeError, match="reward 'shared' is registered by pkg. \\(pkg.:keyword_reward\\) and pkg. "):
        build("shared", {}, tmp_path, "rewards[0]")


@pytest.mark.parametrize(
    "name,expected",
    [
        ("math_acuracy", "unknown reward 'math_acuracy'; did you mean 'math_accuracy'?"),  # misspelled built-in
        ("think_format", "did you mean 'think_answer_format'?"),
        ("./missing.py:fn", "does not exist; give a path relative to the recipe's folder"),  # missing file
        ("no_such_module_xyz:fn", "importing module 'no_such_module_xyz' failed: ModuleNotFoundError"),
        ("json:lodas", "'json' has no attribute 'lodas'; did you mean 'loads'?"),
        ("json:decoder", "'json:decoder' is a module, not a function"),  # not callable
    ],
)
def test_lookup_errors_are_one_line(name, expected, tmp_path):
    with pytest.raises(RecipeError) as info:
        build(name, {}, tmp_path, "rewards[0]")
    assert len(info.value.problems) == 1 and "\n" not in info.value.problems[0]
    assert expected in info.value.problems[0]


def test_file_with_syntax_error(tmp_path):
    (tmp_path / "bad.py").write_text("def f(:\n")
    with pytest.raises(RecipeError, match="importing reward file .*bad.py' failed: SyntaxError"):
        build("./bad.py:f", {}, tmp_path, "rewards[0]")


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["rewards"], "math_accuracy"),  # plain 'rewards' lists
        (["rewards", "ls"], "think_answer_format"),
        (
            ["rewards", "show", "overlong_penalty"],
            "args: max_length: int, soft_margin: int\n"
            "in a recipe: {name: overlong_penalty, args: {max_length: ..., soft_margin: ...}}",
        ),
        (
            ["rewards", "score", "math_accuracy", "--completion", "so \\boxed{\\frac{1}{2}}", "--answer", "0.5"],
            "math_accuracy: 1.0",
        ),
        (
            [
                "rewards",
                "score",
                "overlong_penalty",
                "--completion",
                "xxxxxxxx",
                "--arg",
                "max_length=10",
                "--arg",
                "soft_margin=4",
            ],
            "overlong_penalty: -0.5",
        ),
        (
            ["rewards", "score", "math_accuracy", "--completion", "#### 3", "--answer", "3", "--arg", "answer_column=gold"],
            "math_accuracy: 1.0",
        ),
        (  # 0.8 * 0.9 prints as 0.72, not as its float error
            ["rewards", "score", "math_closeness", "--completion", "so 9", "--answer", "10", "--arg", "near=0.8"],
            "math_closeness: 0.72\n",
        ),
    ],
)
def test_cli_rewards(argv, expected, capsys):
    assert cli.main(argv) == 0
    assert expected in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,expected",
    [
        (
            ["rewards", "show", "math_acuracy"],
            "error: rewards show: unknown reward 'math_acuracy'; did you mean 'math_accuracy'?",
        ),
        (["rewards", "score", "overlong_penalty", "--completion", "x"], "missing a required argument: 'max_length'"),
    ],
)
def test_cli_rewards_errors(argv, expected, capsys):
    assert cli.main(argv) == 2
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # a file whose top level calls sys.exit(0): validate (and train) ended with exit 0, saying nothing
        ("./exits_on_import.py:fn", "importing reward file '{tmp}/exits_on_import.py' failed: SystemExit: 0"),
        # the same file imported as a module
        ("exits_on_import:fn", "importing module 'exits_on_import' failed: SystemExit: 0"),
    ],
)
def test_a_reward_file_that_exits_on_import_is_an_error(name, expected, tmp_path, monkeypatch, capsys):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    recipe = write(tmp_path / "recipe.yaml", minimal_recipe() | {"rewards": [name]})
    assert run_cli(["validate", str(recipe)]) == 2
    assert f"{recipe}: rewards[0].name: {expected.format(tmp=tmp_path)}\n" in capsys.readouterr().err


class _OwnFinder:
    """A finder with packages of its own, as importlib.metadata asks every finder on sys.meta_path."""

    @staticmethod
    def find_distributions(context=None):
        return iter(())


@pytest.mark.parametrize(
    "place, expected",
    [
        ("nothing", False),  # the test environment: no installed package registers a reward
        ("dist-info", True),  # a wheel's folder whose entry_points.txt names the group
        ("other group", False),  # an entry_points.txt with console scripts only
        ("egg-info", True),  # an older install's folder, named in capitals
        ("zip", True),  # a zip file on sys.path: left to importlib.metadata
        ("egg", True),  # an .egg folder on sys.path: left to importlib.metadata
        ("finder", True),  # a finder with packages of its own: left to importlib.metadata
    ],
)
def test_entry_points_are_read_only_where_a_package_may_register_one(place, expected, tmp_path, monkeypatch):
    """importlib.metadata, slow to import and to read, is asked only where a package may register a reward; where
    the scan says none may, importlib.metadata finds none either."""
    group = registry.ENTRY_POINT_GROUP
    root = tmp_path / "site"
    root.mkdir()
    if place in ("dist-info", "other group", "egg-info"):
        info = root / ("pkg-1.0.dist-info" if place != "egg-info" else "PKG.EGG-INFO")
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
        section = group if place != "other group" else "console_scripts"
        (info / "entry_points.txt").write_text(f"[{section}]\nkw = pkg:keyword_reward\n")
    if place == "zip":
        root = tmp_path / "site.zip"
        with zipfile.ZipFile(root, "w") as z:
            z.writestr("pkg.py", "")
    if place == "egg":
        root = tmp_path / "pkg-1.0.egg"
        root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    if place == "finder":
        monkeypatch.setattr(sys, "meta_path", [_OwnFinder, *sys.meta_path])
    assert references._may_register(group) is expected
    if not expected:
        assert not importlib.metadata.entry_points(group=group) and references.entry_points(registry.KIND) == {}


def test_a_folder_is_read_again_only_when_a_package_comes_or_goes(tmp_path, monkeypatch):
    """The scan of a folder on sys.path is kept while the folder's mtime stays: a recipe's second reward reads no
    entry_points.txt; a package installed there since (its *.dist-info folder moves the mtime) is seen."""
    group = registry.ENTRY_POINT_GROUP
    root = tmp_path / "site"
    (root / "other-1.0.dist-info").mkdir(parents=True)
    (root / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.syspath_prepend(str(root))
    read = []
    monkeypatch.setattr(references, "open", lambda path, *a, **k: read.append(path) or open(path, *a, **k), raising=False)
    # (what changes before the lookup, what it answers, whether it reads the folder's entry_points.txt)
    for change, expected, reads in [
        (None, False, True),  # the first lookup reads the folder
        (None, False, False),  # the second reads one stat
        ("pkg-1.0.dist-info", True, True),  # a package that registers a reward, installed since: read again
    ]:
        if change:
            (root / change).mkdir()
            (root / change / "entry_points.txt").write_text(f"[{group}]\nkw = pkg:keyword_reward\n")
            os.utime(root, ns=(root.stat().st_atime_ns, root.stat().st_mtime_ns + 1_000_000_000))  # a later install
        read.clear()
        assert references._may_register(group) is expected
        assert any(p.startswith(str(root)) for p in read) is reads, change
