"""Optional libraries registered to load on first use (``core/deferred.py``), on a package written in the test: its
``__init__`` counts its runs, sets a name its submodule reads, and fails on demand."""

import importlib
import inspect
import sys
import textwrap

import pytest

from grpo_ext.core.deferred import defer

INIT = """
    RUNS.append(1)
    if FAIL:
        raise RuntimeError("the package's import failed")
    SETUP = "done"
    from . import part
"""
PART = """
    from {name} import SETUP as SEEN  # the package's setup, as bitsandbytes' submodules read its kernels
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package ``deferpkg_N`` on the path, registered with ``defer``; returns (name, its runs); its modules leave
    ``sys.modules`` after the test."""
    name = f"deferpkg_{tmp_path.name.replace('-', '_')}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(textwrap.dedent(INIT))
    (tmp_path / name / "part.py").write_text(textwrap.dedent(PART.format(name=name)))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    runs: list[int] = []
    monkeypatch.setattr("builtins.RUNS", runs, raising=False)
    monkeypatch.setattr("builtins.FAIL", False, raising=False)
    assert defer(name)
    yield name, runs
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]


def test_an_import_and_a_walk_over_every_module_leave_it_unrun_and_a_name_runs_it_once(package):
    name, runs = package
    module = importlib.import_module(name)
    assert runs == []
    [inspect.getmodule(m) for m in list(sys.modules.values())]  # reads every module's __file__, as torch's import does
    assert module.__spec__.name == name and runs == []
    assert module.SETUP == "done" and runs == [1]
    assert module.part.SEEN == "done" and runs == [1]


def test_a_submodule_imported_first_runs_the_package_before_it(package):
    name, runs = package
    part = importlib.import_module(f"{name}.part")
    assert part.SEEN == "done" and runs == [1]


def test_a_package_whose_import_fails_raises_at_first_use_and_is_tried_again(package, monkeypatch):
    name, runs = package
    monkeypatch.setattr("builtins.FAIL", True, raising=False)
    with pytest.raises(RuntimeError, match="import failed"):
        _ = importlib.import_module(name).SETUP
    assert name not in sys.modules and runs == [1]
    with pytest.raises(RuntimeError, match="import failed"):
        importlib.import_module(name)  # a plain import now, as after any failed import
    assert runs == [1, 1]


def test_a_library_that_is_missing_or_already_imported_is_left_alone():
    assert defer("no_such_library_here") is False
    assert "no_such_library_here" not in sys.modules
    assert defer("inspect") is False and sys.modules["inspect"] is inspect
