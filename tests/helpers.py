"""Plain helpers the tests share: the repository root, recipe builders, command runners, and the small files and
constants that tests of more than one tier write. Fixtures live in conftest.py."""

import copy
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# A test that asserts on wall time runs twice: once without that assertion in the default tiers, once with it
# under the `timing` marker (pytest -m timing), where nothing else runs beside it.
TIMED = [pytest.param(False, id="checks"), pytest.param(True, id="timed", marks=pytest.mark.timing)]


# --- scripted ChatML models (the conftest's scripted_model fixture plays them) ------------------------------------


def chatml_turn(prompt: str) -> tuple[str, str | None]:
    """A scripted policy's view of the ChatML prompt so far: its last user turn, and the tool result in that turn
    (None before any call)."""
    turn = prompt.rsplit("<|im_start|>user", 1)[-1]
    result = re.search(r"<tool_response>\n(.*?)\n</tool_response>", turn, re.S)
    return turn, result.group(1) if result else None


def tool_call(name: str, **arguments) -> str:
    """A ChatML model's call of the tool ``name``, as the chat template's parser reads it (the end token not included)."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


# --- recipes ---------------------------------------------------------------------------------------------------


def tiny_doc(digit_doc: dict, tiny_model: Path, output_dir: Path, **sections) -> dict:
    """The shipped digit recipe made tiny (seconds per run): 2 steps of 4 completions, 2 eval prompts x 2
    samples, no reward pre-flight (these tests count reward calls and samples; the health tests drive the
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


def resumable_doc(digit_doc: dict, model: Path, run: Path, **training) -> dict:
    """The digit recipe on ``model``: 3 steps of 4 completions, a checkpoint at every step (two kept), no eval."""
    doc = digit_doc
    doc["model"]["name"] = str(model)
    doc["training"].update(
        {
            "max_steps": 3,
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 4,
            "save_steps": 1,
            "save_total_limit": 2,
            **training,
        }
    )
    doc["eval"]["enabled"] = False
    doc["output_dir"] = str(run)
    return doc


def logged_steps(run: Path) -> list[int]:
    """Step numbers of metrics.jsonl, failing on any line that is not a JSON record."""
    return [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def bare_digit(digit_doc: dict, **top) -> dict:
    """The digit recipe without the training keys a preset sets, so that the preset decides them."""
    from grpo_ext.settings import variants

    digit_doc["training"] = {k: v for k, v in digit_doc["training"].items() if k not in variants.PRESET_KEYS}
    digit_doc.update(top)
    return digit_doc


def mutate(doc: dict, path: str, value) -> dict:
    """Set (or with value=KeyError, delete) a dotted key in a copy of doc."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


def minimal_recipe() -> dict:
    """The fewest keys a recipe needs."""
    return {"model": {"name": "smollm2-135m-instruct"}, "rewards": ["digit_exact"], "output_dir": "runs/x"}


def recorded_round_trip(path: Path, run_dir: Path) -> tuple[dict, dict]:
    """(portable recipe, the same read back from the run directory's recipe.yaml, validated there)."""
    from grpo_ext import recipe

    first = recipe.load(str(path))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "recipe.yaml").write_text(first.to_yaml())
    return first.portable(), recipe.load(str(run_dir / "recipe.yaml")).portable()


def write(path: Path, doc_or_text) -> Path:
    """A recipe mapping (or raw text) written to ``path``, its folders made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc_or_text if isinstance(doc_or_text, str) else yaml.safe_dump(doc_or_text, allow_unicode=True))
    return path


# --- data files ------------------------------------------------------------------------------------------------

QUESTIONS = [(f"Reply with the digit {d}.", str(d)) for d in range(10)]


def user(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


def jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# --- run directories -------------------------------------------------------------------------------------------

TWO_STEPS = [{"step": s, "reward": 0.1 * s, "frac_reward_zero_std": 0.0, "entropy": 3.0 - 0.5 * s} for s in (1, 2)]


def two_step_run(path: Path, status: str = "completed") -> Path:
    """A run directory of two logged steps, as the doctor reads it."""
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TWO_STEPS))
    (path / "recipe.yaml").write_text(yaml.safe_dump({"health": {"no_signal_steps": 6}, "eval": {"pass_threshold": 1.0}}))
    summary = {"status": status, "recipe": "r.yaml", "versions": {"trl": "1.16.0"}}
    (path / "summary.json").write_text(json.dumps(summary))
    return path


# --- user code ---------------------------------------------------------------------------------------------------

PLUGIN = """
def keyword_reward(completions, **kwargs):
    return [1.0 if "7" in str(c) else 0.0 for c in completions]

def make_bonus(word="7"):
    def bonus(completions, **kwargs):
        return [0.5 if word in str(c) else 0.0 for c in completions]
    return bonus
"""

FACTORY_FILE = """
from pathlib import Path

def make(n, marker):
    Path(marker).write_text("factory ran")
    def longer(completions, **kwargs):
        return [float(len(c) > n) for c in completions]
    return longer
"""


# --- commands ----------------------------------------------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    """``cli.main(argv)``; an exception escaping it is what a user sees as a raw traceback, reported as such."""
    from grpo_ext import cli

    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse errors
        return exc.code
    except Exception as exc:
        raise AssertionError(
            f"cli.main({argv[0]!r}, ...) raised {type(exc).__name__}: {str(exc)[:300]} (the command prints a raw Traceback)"
        ) from exc


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


def best_beside(work, reference, turns: int = 2) -> tuple[float, float]:
    """Call ``work()`` and ``reference()`` in turn, ``turns`` times each: the best wall time of each. A test compares
    the two (a ratio), never one against seconds: load slows both alike, and the best of the turns leaves out a
    moment when a neighbour held the CPU."""
    work_times, reference_times = [], []
    for _ in range(turns):
        t0 = time.perf_counter()
        work()
        t1 = time.perf_counter()
        reference()
        work_times.append(t1 - t0)
        reference_times.append(time.perf_counter() - t1)
    return min(work_times), min(reference_times)


def cpu_spin(seconds: float) -> None:
    """Busy this process for ``seconds`` of its own CPU time: a reference for work bounded by a CPU-time limit, which
    takes longer in wall time on a busy machine exactly as such work does."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def run_command(argv: list[str], timed: bool, **run_kwargs) -> tuple[subprocess.CompletedProcess, float | None]:
    """The command run once, or with ``timed`` beside a torch import (``beside_torch_import``): (its last run, the
    ratio of wall times, None when not timed)."""
    if timed:
        return beside_torch_import(argv, **run_kwargs)
    return subprocess.run(argv, capture_output=True, text=True, **run_kwargs), None


def bench(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run one script of benchmarks/ from the repository root and capture what it prints."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def train_shipped(recipe: str, run_dir: Path, reward: str, overrides: tuple[str, ...] = ()) -> tuple[float, float, dict]:
    """Train a shipped recipe for real into ``run_dir``, with ``overrides``: (eval pass rate of ``reward`` before,
    after, summary)."""
    import grpo_ext

    t0 = time.monotonic()
    summary = grpo_ext.train(ROOT / "recipes" / f"{recipe}.yaml", [f"output_dir={run_dir}", *overrides])
    assert summary == json.loads((run_dir / "summary.json").read_text())
    before, after = (summary[key]["rewards"][reward]["pass_rate"] for key in ("eval_before", "eval_after"))
    print(f"{recipe}: pass rate of {reward} {before} -> {after}, {time.monotonic() - t0:.0f} s wall")
    return before, after, summary


# --- the quickstart notebook ---------------------------------------------------------------------------------------

NOTEBOOK = ROOT / "notebooks" / "quickstart.ipynb"


def execute_notebook(tmp_path: Path, monkeypatch, model: str, steps: int, samples: int):
    """notebooks/quickstart.ipynb run in a fresh kernel in ``tmp_path``, on ``model`` for ``steps`` steps."""
    import os

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


def notebook_outputs(nb, cell_type: str = "code") -> list[str]:
    """All text and images each code cell produced, in order."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == cell_type:
            found.append(" ".join(o.get("text", "") + " ".join(o.get("data", {})) for o in cell.get("outputs", [])))
    return found


def check_notebook(nb, tmp_path: Path) -> None:
    text = notebook_outputs(nb)
    assert "smollm2-135m-instruct" in text[1]  # grpo-ext ls
    assert "image/png" in " ".join(text)  # the curves are shown
    assert "text/markdown" in " ".join(text)  # the before/after table is shown
    for run in ("digit", "lucky"):
        assert (tmp_path / "runs" / run / "curves.png").exists() and (tmp_path / "runs" / run / "report.md").exists()
    assert "lucky_seven" in (tmp_path / "runs" / "eval-lucky" / "eval.md").read_text()
