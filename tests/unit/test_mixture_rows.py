"""A mixture's training rows (grpo_ext/data/mixture.py): how many each source gives, which rows those are (the
same for the same seed), a source too small for its share, and the mixture's own keys checked with their key paths
(training on a mixture, and refusals as a user's command: tests/integration/test_mixture.py)."""

import doctest
import json
from collections import Counter

import pytest
import yaml

from grpo_ext import cli, recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.data import mixture
from tests.helpers import minimal_recipe


def test_docstring_examples():
    result = doctest.testmod(mixture)
    assert result.attempted > 0 and result.failed == 0


def source(weight=None, rows=None) -> tuple:
    """A source's (weight, rows): one of them is None."""
    return weight, rows


def parts(sources: list[tuple]) -> tuple[list, list]:
    """(weights, rows) of the sources, as ``mixture.plan`` and ``mixture.shortfalls`` take them."""
    return [w for w, _ in sources], [n for _, n in sources]


PLANS = [
    # (sources, rows each has, data.size, training rows taken of each)
    ([source(0.4), source(0.3), source(0.3)], [100, 60, 1000], None, [80, 60, 60]),  # the second runs out first
    ([source(1), source(1)], [7, 100], None, [7, 7]),
    ([source(2), source(1)], [100, 100], 30, [20, 10]),  # size: shared by weight, whatever the sources have
    ([source(1), source(1), source(1)], [50, 50, 50], 10, [4, 3, 3]),  # the parts add up to size; ties to the first
    ([source(rows=5), source(rows=12)], [10, 10], None, [5, 12]),  # rows alone: the sum (past a size: repeated)
    ([source(1), source(rows=5)], [100, 3], 25, [20, 5]),  # size less the fixed rows, shared by the weighted
    ([source(1), source(rows=5)], [40, 9], None, [40, 5]),  # no size: the weighted source gives all it has
    ([source(1), source(1)], [None, 10], None, [None, None]),  # a hub dataset not fetched yet: not counted
    ([source(1), source(1)], [None, 10], 8, [4, 4]),  # with a size, counted all the same
    ([source(0.1), source(0.2)], [10, 20], None, [10, 20]),  # 0.1 + 0.2 in binary floats is not 0.3: exact fractions
]


@pytest.mark.parametrize("entries,available,size,expected", PLANS)
def test_plan_shares(entries, available, size, expected):
    counts = mixture.plan(*parts(entries), available, size)
    assert counts == expected
    if size is not None:
        assert sum(counts) == size


def test_draw_is_deterministic_by_seed_and_without_replacement():
    names, counts, available = ["a.jsonl", "q.csv", "arith"], [40, 30, 30], [100, 30, 256]
    first = mixture.draw(names, counts, available, seed=0)
    assert first == mixture.draw(names, counts, available, seed=0)  # the same seed, the same rows in the same order
    assert first != mixture.draw(names, counts, available, seed=1)
    assert Counter(s for s, _ in first) == {0: 40, 1: 30, 2: 30}  # the shares asked for
    for i in range(3):
        rows = [row for s, row in first if s == i]
        assert len(set(rows)) == len(rows) and all(0 <= row < available[i] for row in rows)  # no row twice
    assert sorted(row for s, row in first if s == 1) == list(range(30))  # a source used whole gives each row once
    assert [s for s, _ in first[:40]] != sorted(s for s, _ in first[:40])  # shuffled together, not source by source


def test_a_source_keeps_its_rows_when_another_changes():
    """Each source draws from the seed and its own name: another source's weight (or the order) leaves its rows be."""
    before = mixture.draw(["a", "b"], [10, 5], [50, 50], seed=3)
    after = mixture.draw(["b", "a"], [20, 10], [50, 50], seed=3)
    assert sorted(row for s, row in before if s == 0) == sorted(row for s, row in after if s == 1)


def test_a_source_too_small_gives_every_row_then_repeats_and_says_so():
    names, entries = ["big.jsonl", "small.csv"], [source(1), source(rows=25)]
    counts = mixture.plan(*parts(entries), [100, 10], size=None)
    picks = mixture.draw(names, counts, [100, 10], seed=0)
    small = Counter(row for s, row in picks if s == 1)
    assert sum(small.values()) == 25 and set(small) == set(range(10))  # every row, then drawn again
    assert sorted(small.values()) == [2] * 5 + [3] * 5  # whole passes: no row a third time before each has a second
    (note,) = mixture.shortfalls(names, *parts(entries), counts, [100, 10])
    assert note == (
        "data: mixture: small.csv: rows: 25 asks for 25 rows, it has 10; every row is used and 15 drawn again (repeated)"
    )
    weighted = [source(1), source(1)]
    (note,) = mixture.shortfalls(names, *parts(weighted), mixture.plan(*parts(weighted), [100, 10], 60), [100, 10])
    assert "small.csv: weight 1 asks for 30 rows, it has 10; every row is used and 20 drawn again" in note


@pytest.mark.parametrize(
    "counts,evals,expected",
    [
        ([80, 60, 60], [4, 4, 4], "a.jsonl 40% (80 rows), q.csv 30% (60 rows), arith 30% (60 rows); eval 12 rows (4 per source)"),
        ([80, 60, 60], [4, 8, 32], "; eval 44 rows (4 a.jsonl, 8 q.csv, 32 arith)"),
        ([80, 60, 60], None, "; no eval"),
        # a hub dataset before it is fetched: the weighted shares wait for its rows
        ([5, None, None], [4, None, 4], "(5 rows), q.csv weight 2, arith weight 1 (rows counted when the hub rows are"),
        ([5, None, None], [4, None, 4], "; eval 4 a.jsonl, q.csv counted when fetched, 4 arith"),
    ],
)
def test_the_line_a_run_and_a_dry_run_print(counts, evals, expected):
    line = mixture.describe(["a.jsonl", "q.csv", "arith"], counts, evals, [None, 2, 1])
    assert line.startswith("mixture of 3 sources: ") and expected in line


PROMPTS = {"prompts": ["Reply with 3."], "eval_prompts": ["Reply with 4."]}
OTHER = {"prompts": ["Reply with 5."], "eval_prompts": ["Reply with 6."], "name": "other"}
ARITH = {"source": "arith", "source_args": {"train": 8, "held_out": 2}}
REFUSED = [
    # (data section, a line the refusal holds)
    ({"mixture": []}, "data.mixture: is empty; give at least one source"),
    ({"mixture": [{**PROMPTS, "weight": 1, "rows": 3}]}, "data.mixture[0]: gives weight and rows"),
    ({"mixture": [PROMPTS]}, "data.mixture[0]: give weight (a share of the mixture, e.g. weight: 1) or rows"),
    ({"mixture": [{**PROMPTS, "weight": 0}]}, "data.mixture[0].weight: must be a positive number, got 0"),
    ({"mixture": [{**PROMPTS, "weight": 1}, {**OTHER, "weight": -2.5}]}, "data.mixture[1].weight: must be a positive number"),
    ({"mixture": [{**PROMPTS, "weight": "much"}]}, "data.mixture[0].weight: expected a finite number"),
    ({"mixture": [{**PROMPTS, "rows": 0}]}, "data.mixture[0].rows: must be at least 1, got 0"),
    ({"mixture": ["a.jsonl"]}, "data.mixture[0]: a source is a data: mapping with weight or rows"),
    # single-source keys beside the mixture: which would the run train on?
    ({**PROMPTS, "mixture": [{**OTHER, "weight": 1}]}, "data.prompts: names one source, beside data.mixture"),
    ({"mixture": [{**PROMPTS, "weight": 1, "chat": False}]}, "data.mixture[0].chat: is the whole mixture's"),
    ({"mixture": [{**PROMPTS, "weight": 1, "mixture": []}]}, "data.mixture[0].mixture: is the whole mixture's"),
    ({"mixture": [{**PROMPTS, "weight": 1, "promts": []}]}, "data.mixture[0].promts: unknown key; did you mean 'prompts'?"),
    # every rule of one source, applied to each
    ({"mixture": [{**PROMPTS, "weight": 1}, {**ARITH, "weight": 1, "eval_size": 2}]}, "data.mixture[1].eval_size: holds out"),
    ({"mixture": [{**PROMPTS, "file": "none.jsonl", "weight": 1}]}, "data.mixture[0]: prompts and file are all given"),
    ({"mixture": [{"file": "none.jsonl", "eval_size": 1, "weight": 1}]}, "data.mixture[0].file: "),
    ({"mixture": [{**ARITH, "source": "arithm", "weight": 1}]}, "data.mixture[0].source: unknown generator 'arithm'"),
    ({"mixture": [{**PROMPTS, "weight": 1}, {**PROMPTS, "weight": 1}]}, "data.mixture[1]: has the name 'prompts'"),
    # size: the rows of a weighted mixture
    ({"mixture": [{**PROMPTS, "rows": 4}], "size": 10}, "data.size: every source gives rows (4 in all)"),
    ({"mixture": [{**PROMPTS, "rows": 4}, {**OTHER, "weight": 1}], "size": 4}, "data.size: 4 leaves no rows"),
    ({**PROMPTS, "size": 10}, "data.size: sizes a mixture of sources (data.mixture)"),
    # held-out rows for the whole mixture: one set of them, and never a source's own keys beside the mixture
    (
        {"mixture": [{"prompts": ["x"], "weight": 1}, {"prompts": ["y"], "name": "y", "weight": 1}]},
        "data.eval_prompts: missing; give eval_prompts or eval_file beside data.mixture (for the whole mixture) or in "
        "a source, or set eval.enabled: false",
    ),
    (
        {"eval_prompts": ["x"], "eval_file": "held.jsonl", "mixture": [{**PROMPTS, "weight": 1}]},
        "data: eval_prompts and eval_file are both given beside data.mixture; keep one held-out set for the whole mixture",
    ),
    ({"eval_size": 2, "mixture": [{**PROMPTS, "weight": 1}]}, "data.eval_size: beside data.mixture it takes the first"),
    ({"eval_fraction": 0.1, "mixture": [{**PROMPTS, "weight": 1}]}, "data.eval_fraction: names one source, beside data."),
    ({"eval_split": "test", "mixture": [{**PROMPTS, "weight": 1}]}, "data.eval_split: names one source, beside data.mixture"),
    ({"eval_prompts": [], "mixture": [{**PROMPTS, "weight": 1}]}, "data.eval_prompts: is empty; give at least one prompt"),
    ({"eval_file": "none.jsonl", "mixture": [{**PROMPTS, "weight": 1}]}, "data.eval_file: "),
    (  # a whole-mixture row names no source: it would be read as a source's
        {"eval_prompts": [{"prompt": "x", "source": "a"}], "mixture": [{**PROMPTS, "weight": 1}]},
        "data.eval_prompts: its rows have a column 'source', which a mixture fills with each row's source name",
    ),
    (  # the whole mixture's rows are named by their set: a source of that name would take them for its own
        {"eval_prompts": ["x"], "mixture": [{**PROMPTS, "weight": 1, "name": "eval_prompts"}]},
        "data.mixture[0]: has the name 'eval_prompts', which names the rows of data.eval_prompts; give the source",
    ),
]


@pytest.mark.parametrize("section,expected", REFUSED)
def test_refused_with_the_key_path(section, expected, tmp_path):
    with pytest.raises(RecipeError) as refused:
        recipe.validate({**minimal_recipe(), "data": section}, tmp_path / "r.yaml")
    assert any(expected in line for line in refused.value.problems), refused.value.problems


def test_a_source_lacking_a_reward_column_is_named():
    section = {"mixture": [{**ARITH, "weight": 1}, {**PROMPTS, "weight": 1}]}
    doc = {**minimal_recipe(), "rewards": ["math_accuracy"], "data": section}
    with pytest.raises(RecipeError) as refused:
        recipe.validate(doc)
    assert refused.value.problems == [
        "rewards[0] (math_accuracy) needs column 'answer', which the training rows (data.mixture[1].prompts) lack "
        "(columns: prompt, source); add it to the data, or point the reward at a column they have",
        "rewards[0] (math_accuracy) needs column 'answer', which the eval rows (data.mixture[1].eval_prompts) lack "
        "(columns: prompt, source); add it to the data, or point the reward at a column they have",
    ]


def test_a_mixture_recorded_by_a_run_validates_again(tmp_path):
    """A run records its recipe with every default filled in (the sources' too): it must read back the same."""
    section = {"system_prompt": "Be brief.", "mixture": [{**ARITH, "weight": 2}, {**PROMPTS, "rows": 3}]}
    doc = {**minimal_recipe(), "data": section}
    checked = recipe.validate(doc, tmp_path / "r.yaml")
    again = recipe.validate(yaml.safe_load(checked.to_yaml()), tmp_path / "r.yaml")
    assert again.portable() == checked.portable()
    assert [(s.weight, s.rows) for s in again.data.sources] == [(2, None), (None, 3)]


def test_a_column_gets_one_kind_across_the_sources():
    """datasets reads a CSV's answers as numbers; beside a source that holds them as text they are read as text."""
    rows = [{"prompt": "a", "answer": 12, "source": "q.csv"}, {"prompt": "b", "answer": "7", "source": "arith"}]
    rows.append({"prompt": "c", "answer": 2.5, "source": "q.csv"})
    (note,) = mixture.one_kind(rows)
    assert [r["answer"] for r in rows] == ["12", "7", "2.5"]
    assert note == "data: mixture: column 'answer' holds numbers in q.csv and text in arith; the numbers are read as text"
    assert mixture.one_kind([{"prompt": "a", "n": 1, "source": "x"}, {"prompt": [], "n": 2.0, "source": "y"}]) == []
    with pytest.raises(RecipeError, match="column 'tests' holds lists in a.jsonl and text in b.csv; give it one kind"):
        mixture.one_kind([{"tests": ["assert f()"], "source": "a.jsonl"}, {"tests": "assert f()", "source": "b.csv"}])


FILES = {
    "a.jsonl": [{"prompt": f"Say {d}.", "answer": str(d)} for d in range(10)],
    "b.jsonl": [{"prompt": f"Write {d}.", "answer": str(d)} for d in range(10)],
    "held.jsonl": [{"prompt": f"Print {d}.", "answer": str(d)} for d in range(12)],
}
A, B = {"file": "a.jsonl", "weight": 1}, {"file": "b.jsonl", "weight": 1}
GEN = {"source": "arith", "source_args": {"train": 10, "held_out": 2}, "weight": 1}
SHARES = "mixture of 2 sources: a.jsonl 50% (10 rows), b.jsonl 50% (10 rows); eval"
HELD_OUT = [
    # (the data section, the data line of the dry run: where the held-out rows come from)
    # one held-out list for the whole mixture, in the recipe
    ({"eval_prompts": ["Say 3.", "Say 4."], "mixture": [A, B]}, f"{SHARES} 2 rows from data.eval_prompts (for the whole"),
    # one held-out file for the whole mixture; eval_size scores its first rows, as it does for one source
    ({"eval_file": "held.jsonl", "mixture": [A, B]}, f"{SHARES} 12 rows from data.eval_file held.jsonl (for the whole mixture)"),
    ({"eval_file": "held.jsonl", "eval_size": 5, "mixture": [A, B]}, f"{SHARES} 5 rows from data.eval_file held.jsonl (for the"),
    # a source without eval rows beside one with them: it contributes none (a.jsonl's 2 held out leave it 8 rows)
    (
        {"mixture": [{**A, "eval_size": 2}, B]},
        "mixture of 2 sources: a.jsonl 50% (8 rows), b.jsonl 50% (8 rows); eval 2 rows (2 a.jsonl, 0 b.jsonl)",
    ),
    # both forms: the whole mixture's set and a source's own, scored together
    (
        {"eval_file": "held.jsonl", "mixture": [{**A, "eval_size": 2}, B]},
        "; eval 14 rows (12 from data.eval_file held.jsonl for the whole mixture, 2 a.jsonl, 0 b.jsonl)",
    ),
    # a generator keeps its own held-out problems beside the whole mixture's set
    (
        {"eval_prompts": ["Say 3."], "mixture": [A, GEN]},
        "; eval 3 rows (1 from data.eval_prompts for the whole mixture, 0 a.jsonl, 2 arith)",
    ),
]


@pytest.mark.parametrize("section,line", HELD_OUT)
def test_held_out_rows_for_the_whole_mixture_or_some_sources(section, line, tmp_path, capsys):
    """A mixture takes one held-out set for all of its sources (eval_prompts or eval_file beside data.mixture), sources
    with eval rows of their own beside sources without, or both; the dry run says where the eval rows come from."""
    for name, rows in FILES.items():
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({**minimal_recipe(), "data": section}))
    assert cli.main(["train", str(path), "--dry-run"]) == 0, capsys.readouterr().err
    said = [row for row in capsys.readouterr().out.splitlines() if row.startswith("data: ")]
    assert len(said) == 1 and line in said[0], said


def test_the_whole_mixtures_rows_lacking_a_reward_column_are_named():
    section = {"eval_prompts": ["Reply with 4."], "mixture": [{**ARITH, "weight": 1}]}
    doc = {**minimal_recipe(), "rewards": ["math_accuracy"], "data": section}
    with pytest.raises(RecipeError) as refused:
        recipe.validate(doc)
    assert refused.value.problems == [
        "rewards[0] (math_accuracy) needs column 'answer', which the eval rows (data.eval_prompts) lack "
        "(columns: prompt, source); add it to the data, or point the reward at a column they have",
    ]
