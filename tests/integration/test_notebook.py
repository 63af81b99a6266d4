"""notebooks/quickstart.ipynb runs top to bottom on the tiny local model for one step: every cell, in a fresh kernel,
in an empty folder (on the real model: tests/slow/test_notebook_real_model.py)."""

from tests.helpers import check_notebook, execute_notebook


def test_quickstart_on_the_tiny_model(tmp_path, monkeypatch, tiny_model, no_hub):
    check_notebook(execute_notebook(tmp_path, monkeypatch, str(tiny_model), steps=1, samples=1), tmp_path)
