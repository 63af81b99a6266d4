"""benchmarks/seeds.py: its argument parsing (one tiny sweep end to end: tests/integration/test_benchmark_seeds.py)."""

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
