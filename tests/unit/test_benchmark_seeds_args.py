"""benchmarks/seeds.py: its argument parsing (one tiny sweep end to end: tests/slow/test_benchmark_seeds.py)."""

import argparse
import importlib.util

import pytest

from tests.helpers import ROOT

spec = importlib.util.spec_from_file_location("bench_seeds", ROOT / "benchmarks" / "seeds.py")
seeds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seeds)


def test_seed_list():
    assert seeds.seed_list("0-3") == [0, 1, 2, 3]
    assert seeds.seed_list("0,3,5-6") == [0, 3, 5, 6]
    assert seeds.seed_list("7") == [7]


def test_candidate():
    assert seeds.candidate("t1.2: training.temperature=1.2 seed=3") == ("t1.2", ["training.temperature=1.2", "seed=3"])
    assert seeds.candidate("q: \"training.save_strategy='no'\"") == ("q", ["training.save_strategy='no'"])
    for bad in ("training.temperature=1.2", "label:", ": x=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="LABEL: key=value"):
            seeds.candidate(bad)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--recipe", "no-such.yaml"], "shipped: recipe no-such.yaml is not a file"),
        (["--recipe", "recipes/digit.yaml", "--candidate", "mine: recipe=mine.yaml"], "mine: recipe mine.yaml is not a file"),
    ],
)
def test_missing_recipe_is_one_line(argv, named, monkeypatch, capsys, tmp_path):
    """A recipe path that names no file is refused before anything runs: exit 2, one line naming it."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("sys.argv", ["seeds.py", *argv, "--seeds", "0", "--log", str(tmp_path / "runs.jsonl")])
    with pytest.raises(SystemExit) as stopped:
        seeds.main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"seeds.py: error: {named} (a path from the current folder)"
    assert not (tmp_path / "runs.jsonl").exists()


def test_digest_reads_from_the_current_folder_and_ignores_comments(monkeypatch, tmp_path):
    """A recipe path is read from the current folder; its hash follows its settings, not its comments."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("# mine\nseed: 1\ntraining: {max_steps: 2}\n")
    first = seeds.digest("mine.yaml")
    (tmp_path / "mine.yaml").write_text("# mine, brought up to date\nseed: 1\ntraining:\n  max_steps: 2  # two\n")
    assert seeds.digest("mine.yaml") == first
    (tmp_path / "mine.yaml").write_text("seed: 1\ntraining: {max_steps: 3}\n")
    assert seeds.digest("mine.yaml") != first


def _run(label: str, seed: int, pass_rate: float, wall: float, to_solve: float | None) -> dict:
    return {"label": label, "seed": seed, "pass_rate": pass_rate, "before": 0.1, "wall": wall, "to_solve": to_solve}


def test_a_baseline_of_overrides_takes_the_shipped_recipes_place():
    """With --baseline, every comparison line is against that contestant, by its label; no 'shipped' is needed."""
    results = {
        "grpo": [_run("grpo", 0, 1.0, 100.0, 40.0), _run("grpo", 1, 0.5, 120.0, None)],
        "tic": [_run("tic", 0, 1.0, 110.0, 30.0), _run("tic", 1, 1.0, 130.0, 50.0)],
    }
    overrides = {"grpo": ["algorithm=grpo"], "tic": ["algorithm=tic_grpo"]}
    lines = seeds.report(results, overrides, 0.9, "grpo")
    assert lines[0].startswith("grpo             solved 1/2 seeds") and lines[0].endswith("[algorithm=grpo]")
    assert lines[2].startswith("tic vs grpo, mean pass rate on the same seeds: ")
    # seeds solved 2 vs 1, median wall 120 vs 110, seconds until a batch passed on seed 0 only (grpo never did on 1)
    assert (
        lines[-1]
        == "ratio tic/grpo: seeds solved 2.00, wall 1.09, training seconds until a batch passed 30 vs 40 (0.75, 1 seeds)"
    )
    assert not any("shipped" in line for line in lines)
