"""notebooks/quickstart.ipynb runs top to bottom on the real model for two steps: every cell, in a fresh kernel, in an
empty folder (on the tiny model: tests/integration/test_notebook.py)."""

import pytest

from tests.helpers import check_notebook, execute_notebook


@pytest.mark.slow
def test_quickstart_on_the_real_model(tmp_path, monkeypatch, no_hub):
    check_notebook(execute_notebook(tmp_path, monkeypatch, "smollm2-135m-instruct", steps=2, samples=2), tmp_path)
