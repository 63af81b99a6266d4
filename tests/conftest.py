import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random Llama model with a chat template, built locally (no download)."""
    from grpo_ext import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def digit_doc() -> dict:
    """The shipped digit recipe as a mapping."""
    return yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())


@pytest.fixture
def write_recipe(tmp_path):
    """Write a recipe mapping (or raw text) to a file and return its path."""

    def write(doc, name="recipe.yaml") -> Path:
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True))
        return path

    return write


@pytest.fixture
def no_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
