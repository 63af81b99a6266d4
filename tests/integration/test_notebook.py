"""notebooks/quickstart.ipynb runs top to bottom: every cell, in a fresh kernel, in an empty folder.

The fast test runs it on the tiny local model for one step; the slow one on the real model for two steps.
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


def execute(tmp_path: Path, monkeypatch, model: str, steps: int, samples: int):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("GRPO_EXT_QUICKSTART_MODEL", model)
    monkeypatch.setenv("GRPO_EXT_QUICKSTART_STEPS", str(steps))
    monkeypatch.setenv("GRPO_EXT_QUICKSTART_SAMPLES", str(samples))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def outputs(nb, cell_type: str = "code") -> list[str]:
    """All text and images each code cell produced, in order."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == cell_type:
            found.append(" ".join(o.get("text", "") + " ".join(o.get("data", {})) for o in cell.get("outputs", [])))
    return found


def check(nb, tmp_path: Path) -> None:
    text = outputs(nb)
    assert "smollm2-135m-instruct" in text[1]  # grpo-ext ls
    assert "image/png" in " ".join(text)  # the curves are shown
    assert "text/markdown" in " ".join(text)  # the before/after table is shown
    for run in ("digit", "lucky"):
        assert (tmp_path / "runs" / run / "curves.png").exists() and (tmp_path / "runs" / run / "report.md").exists()
    assert "lucky_seven" in (tmp_path / "runs" / "eval-lucky" / "eval.md").read_text()


def test_quickstart_on_the_tiny_model(tmp_path, monkeypatch, tiny_model, no_hub):
    check(execute(tmp_path, monkeypatch, str(tiny_model), steps=1, samples=1), tmp_path)


@pytest.mark.slow
def test_quickstart_on_the_real_model(tmp_path, monkeypatch, no_hub):
    check(execute(tmp_path, monkeypatch, "smollm2-135m-instruct", steps=2, samples=2), tmp_path)
