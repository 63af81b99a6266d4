"""benchmarks/arith_sums.py end to end on a tiny model, as a command."""

import re

from tests.helpers import bench


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
