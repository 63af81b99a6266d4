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
