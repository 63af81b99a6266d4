"""The model cache keeps one entry per transformers family (its locking and publishing with real processes:
tests/integration/test_model_cache.py)."""

from pathlib import Path

import pytest

from grpo_ext.settings import compat, model_names


@pytest.mark.parametrize("major", [4, 5])
def test_each_transformers_family_has_its_own_entry(major, monkeypatch):
    from packaging.version import Version

    monkeypatch.setattr(compat, "transformers_version", lambda: Version(f"{major}.1.0"))
    source = model_names.resolve("smollm2-135m-instruct", Path("."))
    assert model_names.checkpoint_dir(source).name == f"transformers-{major}"
