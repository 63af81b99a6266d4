import json
import shutil
import sys
import time
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


def tiny_doc(digit_doc: dict, tiny_model: Path, output_dir: Path, **sections) -> dict:
    """The shipped digit recipe made tiny (seconds per run): 2 steps of 4 completions, 2 eval prompts x 2
    samples, no reward pre-flight (these tests count reward calls and samples; tests/test_health.py drives the
    pre-flight); ``sections`` update its sections or set top-level keys."""
    doc = digit_doc
    doc["model"]["name"] = str(tiny_model)
    doc["training"].update(
        max_steps=2, per_device_train_batch_size=4, num_generations=4, max_completion_length=4, save_steps=1, save_total_limit=1
    )
    doc["data"]["eval_prompts"] = doc["data"]["eval_prompts"][:2]
    doc["eval"]["samples"] = 2
    doc["output_dir"] = str(output_dir)
    doc["health"] = {"preflight": "off"}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key].update(value)
        else:
            doc[key] = value
    return doc


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def train_shipped(recipe: str, run_dir: Path, reward: str) -> tuple[float, float, dict]:
    """Train a shipped recipe for real into ``run_dir``: (eval pass rate of ``reward`` before, after, summary)."""
    import grpo_ext

    t0 = time.monotonic()
    summary = grpo_ext.train(ROOT / "recipes" / f"{recipe}.yaml", [f"output_dir={run_dir}"])
    assert summary == json.loads((run_dir / "summary.json").read_text())
    before, after = (summary[key]["rewards"][reward]["pass_rate"] for key in ("eval_before", "eval_after"))
    print(f"{recipe}: pass rate of {reward} {before} -> {after}, {time.monotonic() - t0:.0f} s wall")
    return before, after, summary
