"""Throughput of the ``code_tests`` reward: sandboxed test cases per second, one worker against two.

    python benchmarks/code_tests.py [--completions 16] [--rounds 4]

A step's worth of completions (``--completions``, each with three assert cases: a right program, a wrong one,
alternately) is scored with ``workers=1`` and ``workers=2`` in turn, ``--rounds`` times, alternating which goes
first; printed: each contestant's best and median cases per second and the ratio of the medians, measured side
by side in this run. Also the share of one case's time that is the interpreter's start (an empty program).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_ext import sandbox  # noqa: E402
from grpo_ext.rewards import code  # noqa: E402

TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(-1, 1) == 0"
RIGHT, WRONG = "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b"


def cases_per_second(workers: int, completions: int) -> float:
    reward = code.code_tests(workers=workers)
    programs = [RIGHT if i % 2 == 0 else WRONG for i in range(completions)]
    t0 = time.perf_counter()
    scores = reward(programs, tests=[TESTS] * completions)
    took = time.perf_counter() - t0
    assert scores == [1.0 if i % 2 == 0 else 0.0 for i in range(completions)], scores
    return 3 * completions / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(f"sandbox isolation on this machine: {', '.join(sandbox.provider().isolation()) or 'limits only'}")
    rates: dict[int, list[float]] = {1: [], 2: []}
    for r in range(args.rounds):
        for workers in (1, 2) if r % 2 == 0 else (2, 1):
            rates[workers].append(cases_per_second(workers, args.completions))
    for workers, got in rates.items():
        print(f"workers={workers}: best {max(got):.1f}, median {statistics.median(got):.1f} cases/s over {len(got)} rounds")
    print(f"ratio of medians, workers=2 / workers=1: {statistics.median(rates[2]) / statistics.median(rates[1]):.2f}")
    empty = [sandbox.provider().run("", "", None).seconds for _ in range(8)]
    one = [sandbox.provider().run(RIGHT, TESTS.splitlines()[0], None).seconds for _ in range(8)]
    print(f"one case {statistics.median(one) * 1000:.0f} ms, of which an empty program {statistics.median(empty) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
