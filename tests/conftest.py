import json
import shutil
import subprocess
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
    from grpo_ext.testing import tiny

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


def beside_torch_import(argv: list[str], **run_kwargs) -> tuple[subprocess.CompletedProcess, float]:
    """Run the command ``argv`` and ``import torch`` in a fresh interpreter (same ``run_kwargs``) in turn, twice
    each: the command's last run and the ratio of the two best wall times. A command that answers before anything
    heavy loads takes a small part of a torch import on any machine; a bound in seconds would measure the machine,
    and the better of two turns leaves out a moment when a neighbour held the CPU."""
    command, reference = [], []
    for _ in range(2):
        t0 = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, **run_kwargs)
        t1 = time.monotonic()
        bare = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, **run_kwargs)
        assert bare.returncode == 0, bare.stderr
        command.append(t1 - t0)
        reference.append(time.monotonic() - t1)
    return proc, min(command) / min(reference)


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
