"""benchmarks/arith_sums.py: it reads the sum of every generated problem, and runs end to end on a tiny model."""

import importlib.util
import re

from grpo_ext.settings import generators
from tests.test_benchmark_seeds import bench
from tests.test_recipe import ROOT

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


def test_end_to_end_on_a_tiny_model(tiny_model):
    proc = bench("arith_sums.py", "--recipe", "recipes/arith.yaml", "--model", str(tiny_model))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("recipes/arith.yaml: 256 training problems (121 distinct sums), 32 held-out problems")
    assert lines[1] == "held-out problems whose sum is also a training problem's: 28 of 32"
    assert lines[2] == "125 distinct sums asked bare, one greedy answer each (math_accuracy):"
    shape = r"(\d+)/125 right \((\d+)/74 additions, (\d+)/51 subtractions\), replies [\d.]+ tokens on average"
    right = re.fullmatch(rf"  {re.escape(str(tiny_model))}: {shape}", lines[3])
    assert right and int(right[1]) == int(right[2]) + int(right[3])
