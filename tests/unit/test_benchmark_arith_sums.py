"""benchmarks/arith_sums.py reads the sum of every generated problem (end to end on a tiny model:
tests/integration/test_benchmark_arith_sums_tiny.py)."""

import importlib.util
import re

from grpo_ext.data import generators
from tests.helpers import ROOT

spec = importlib.util.spec_from_file_location("bench_arith_sums", ROOT / "benchmarks" / "arith_sums.py")
arith_sums = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arith_sums)


def test_sums_reads_every_problem():
    for seed, max_operand in ((0, 10), (3, 20)):
        train, held = generators.arith(train=64, held_out=16, max_operand=max_operand, seed=seed)
        for rows in (train, held):
            read = arith_sums.sums(rows)
            assert len(read) == len(rows)
            for (a, op, b, c), row in zip(read, rows, strict=True):
                assert c == (a + b if op == "+" else a - b)
                assert row["answer"].endswith(f"#### {c}")
                assert re.search(rf"\b{a}\b", row["prompt"]) and re.search(rf"\b{b}\b", row["prompt"])
