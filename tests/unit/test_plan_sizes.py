"""`grpo-ext plan` where no model loads: sizes given to --gpu-memory, and a hub model whose config is not cached
(shapes and estimates of the tiny model: tests/integration/test_plan.py)."""

import pytest

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.run import memory

SIZES = [
    # (text, bytes)
    ("8GiB", 8 * 1024**3),
    ("8 GB", 8 * 10**9),  # GB is 10^9 bytes, as the unit means
    ("12GB", 12 * 10**9),  # without a space too: 11.18 GiB, not 12
    ("500MB", 500 * 10**6),  # MB: 10^6 bytes
    ("512MiB", 512 * 1024**2),
    ("1.5g", int(1.5 * 1024**3)),
    ("4096", 4096),  # plain bytes
]


@pytest.mark.parametrize("text,expected", SIZES)
def test_parse_size(text, expected):
    assert memory.parse_size(text) == expected


@pytest.mark.parametrize("text", ["eight", "8 GiBs", "-1GB", ""])
def test_parse_size_refuses(text):
    with pytest.raises(RecipeError, match="--gpu-memory: .* is not a size"):
        memory.parse_size(text)


def test_hub_model_without_cached_config_says_how(digit_doc, write_recipe, capsys, monkeypatch, tmp_path, no_hub):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    digit_doc["model"]["name"] = "nobody/no-such-model"
    assert cli.main(["plan", str(write_recipe(digit_doc))]) == 2
    assert "is not in the local hub cache" in capsys.readouterr().err
