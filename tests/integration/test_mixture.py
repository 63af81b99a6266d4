"""A mixture of sources (data.mixture) as a user runs it: a JSONL file, a CSV file with a template and the arith
generator train the tiny model for 2 steps with each source's share printed; the eval covers every source; the
sources' prompts end in one form; bad weights and a source lacking a reward's column exit 2 before torch loads,
in a small part of a torch import (the shares and the draw alone: tests/unit/test_mixture_rows.py)."""

import csv
import json
import sys
from collections import Counter

import pytest
import yaml

from grpo_ext import cli, recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe.files import check_files
from grpo_ext.run import data
from tests.helpers import ROOT, TIMED, jsonl, minimal_recipe, run_command, tiny_doc, user

RECORDER = """
import json

def rec(completions, source, **kwargs):
    with open({out!r}, "a") as f:
        f.write(json.dumps(source) + "\\n")
    return [0.0] * len(completions)
"""

# 20 rows, 2 held out: 18; 15 rows, 2 held out: 13; 40 problems and 2 of its own held out. At 0.4 : 0.3 : 0.3 the
# CSV runs out first: 13 / 0.3 allows 43 rows in all, 17.2 : 12.9 : 12.9, rounded to 17, 13 and 13.
LINE = (
    "data: mixture of 3 sources: sums.jsonl 40% (17 rows), products.csv 30% (13 rows), arith 30% (13 rows); "
    "eval 6 rows (2 per source)"
)


def write_sources(folder) -> list[dict]:
    jsonl(folder / "sums.jsonl", [{"prompt": f"What is {a} + 2?", "answer": str(a + 2)} for a in range(20)])
    with (folder / "products.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["question", "answer"])
        writer.writerows([f"Multiply {a} by 3.", a * 3] for a in range(15))
    return [
        {"file": "sums.jsonl", "eval_size": 2, "weight": 0.4},
        {"file": "products.csv", "prompt_template": "Q: {question}", "eval_size": 2, "weight": 0.3},
        {"source": "arith", "source_args": {"train": 40, "held_out": 2}, "weight": 0.3},
    ]


def test_three_sources_train_two_steps_with_their_shares(tmp_path, digit_doc, tiny_model, no_hub, capsys):
    (tmp_path / "rec.py").write_text(RECORDER.format(out=str(tmp_path / "sources.jsonl")))
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["data"] = {"system_prompt": "Reply with a number.", "mixture": write_sources(tmp_path)}
    doc["rewards"] = ["math_accuracy", {"name": "rec.py:rec", "weight": 0.0}]
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))

    assert cli.main(["train", str(path), "--dry-run"]) == 0
    assert f"{LINE}; chat format: auto" in capsys.readouterr().out

    assert cli.main(["train", str(path)]) == 0
    said = capsys.readouterr()
    log = said.out + said.err
    assert LINE in log
    assert "data: mixture: column 'answer' holds numbers in products.csv and text in " in log  # datasets reads a CSV so
    assert "data: 43 training prompts, 6 eval prompts, chat messages" in log
    assert "eval before by source: pass rate sums.jsonl math_accuracy " in log

    rows = data.load(recipe.load(str(path)).data, tmp_path, 0, [])  # what the run drew, drawn again by its seed
    assert Counter(r["source"] for r in rows.train) == {"sums.jsonl": 17, "products.csv": 13, "arith": 13}
    assert Counter(r["source"] for r in rows.eval) == {"sums.jsonl": 2, "products.csv": 2, "arith": 2}
    assert not {r["prompt"] for r in rows.train} & {r["prompt"] for r in rows.eval}  # held out: never trained on
    assert {r["prompt"] for r in rows.train if r["source"] == "products.csv"} <= {f"Q: Multiply {a} by 3." for a in range(15)}

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 2
    for stage in ("eval_before", "eval_after"):
        assert summary[stage]["prompts"] == 6
        assert set(summary[stage]["sources"]) == {"sums.jsonl", "products.csv", "arith"}
    seen = [json.loads(line) for line in (tmp_path / "sources.jsonl").read_text().splitlines()]
    eval_calls = [call for call in seen if len(set(call)) == 3]  # an eval pass scores every source at once
    assert eval_calls and Counter(eval_calls[0]) == {"sums.jsonl": 4, "products.csv": 4, "arith": 4}  # 2 rows x 2 samples
    assert len(seen) > len(eval_calls)  # and training steps passed the source column to the reward too


def test_the_sources_prompts_end_in_one_form(tmp_path):
    """Text and chat-message sources side by side: with a chat template every prompt becomes messages, each with its
    own source's system prompt; without one, the source of chat messages is refused by name."""
    jsonl(tmp_path / "chat.jsonl", [{"prompt": user(f"Say {d}."), "answer": str(d)} for d in range(6)])
    jsonl(tmp_path / "text.jsonl", [{"prompt": f"Write {d}.", "answer": str(d)} for d in range(6)])
    section = {
        "system_prompt": "Be brief.",
        "mixture": [
            {"file": "chat.jsonl", "eval_size": 1, "rows": 4},
            {"file": "text.jsonl", "eval_size": 1, "rows": 4, "system_prompt": "Digits only."},
        ],
    }
    d = recipe.validate({**minimal_recipe(), "data": section}, tmp_path / "r.yaml").data
    rows = data.load(d, tmp_path, 0, [])
    train = data.formatted_set(rows.train, d, chat=True)
    systems = {"chat.jsonl": "Be brief.", "text.jsonl": "Digits only."}
    assert len(train) == 8
    for row in [*train, *data.formatted(rows.eval, d, chat=True)]:
        assert isinstance(row["prompt"], list) and row["prompt"][0] == {"role": "system", "content": systems[row["source"]]}
    with pytest.raises(RecipeError, match=r"data\.mixture: the prompts of chat\.jsonl are chat messages, which need a chat"):
        data.formatted_set(rows.train, d, chat=False)


CHECK = """
import sys
from grpo_ext import cli
rc = cli.main(["train", sys.argv[1]])
print(rc, "torch" in sys.modules, "datasets" in sys.modules)
"""

REFUSED = [
    # (what breaks the mixture, the lines of the refusal)
    (
        lambda m: [{**m[0], "weight": 0}, {**m[1], "rows": 10}, *m[2:]],
        [
            "data.mixture[0].weight: must be a positive number, got 0; leave a source out to drop it",
            "data.mixture[1]: gives weight and rows; keep weight (a share of the mixture) or rows (a count)",
        ],
    ),
    (
        lambda m: [*m[:2], {k: v for k, v in m[2].items() if k != "weight"}],
        ["data.mixture[2]: give weight (a share of the mixture, e.g. weight: 1) or rows (a number of rows)"],
    ),
    (  # a CSV without the answers that math_accuracy reads
        lambda m: [m[0], {**m[1], "file": "questions.csv"}, m[2]],
        [
            "rewards[0] (math_accuracy) needs column 'answer', which the training rows (data.mixture[1].file "
            "questions.csv) lack (columns: question, prompt, source); add it to the data, or point the reward at a "
            "column they have"
        ],
    ),
]


@pytest.mark.parametrize("timed", TIMED)
@pytest.mark.parametrize("breaks,lines", REFUSED)
def test_a_bad_mixture_exits_2_before_torch_loads(breaks, lines, timed, tmp_path):
    (tmp_path / "questions.csv").write_text("question\nMultiply 2 by 3.\nMultiply 4 by 5.\nMultiply 6 by 7.\n")
    section = {"mixture": breaks(write_sources(tmp_path))}
    doc = {**minimal_recipe(), "data": section, "rewards": ["math_accuracy"], "output_dir": str(tmp_path / "run")}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    proc, ratio = run_command([sys.executable, "-c", CHECK, str(tmp_path / "r.yaml")], timed, cwd=ROOT)
    assert proc.stdout.split() == ["2", "False", "False"], proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"error: {tmp_path / 'r.yaml'}: {line}" for line in lines]
    assert not (tmp_path / "run").exists()
    if timed:
        assert ratio < 1 / 3, f"{ratio:.2f} of a torch import"


def write_two(folder) -> None:
    jsonl(folder / "sums.jsonl", [{"prompt": f"What is {a} + 2?", "answer": str(a + 2)} for a in range(10)])
    jsonl(folder / "products.jsonl", [{"prompt": f"Multiply {a} by 3.", "answer": str(a * 3)} for a in range(10)])
    jsonl(folder / "held.jsonl", [{"prompt": f"What is {a} + 7?", "answer": str(a + 7)} for a in range(6)])


SUMS, PRODUCTS = {"file": "sums.jsonl", "weight": 1, "system_prompt": "Add."}, {"file": "products.jsonl", "weight": 1}
HELD_OUT = [
    # (the data section, how many eval rows each source column names, the eval part of the run's data line)
    (  # one held-out list for the whole mixture: its rows are named eval_prompts
        {"eval_prompts": [{"prompt": "What is 1 + 1?", "answer": "2"}], "mixture": [SUMS, PRODUCTS]},
        {"eval_prompts": 1},
        "eval 1 row from data.eval_prompts (for the whole mixture)",
    ),
    (  # one held-out file for the whole mixture, its first 4 rows: named by the file
        {"eval_file": "held.jsonl", "eval_size": 4, "mixture": [SUMS, PRODUCTS]},
        {"held.jsonl": 4},
        "eval 4 rows from data.eval_file held.jsonl (for the whole mixture)",
    ),
    (  # a source without eval rows beside one with them contributes none
        {"mixture": [{**SUMS, "eval_size": 2}, PRODUCTS]},
        {"sums.jsonl": 2},
        "eval 2 rows (2 sums.jsonl, 0 products.jsonl)",
    ),
    (  # both: the whole mixture's file and a source's own rows
        {"eval_file": "held.jsonl", "mixture": [SUMS, {**PRODUCTS, "eval_size": 3}]},
        {"held.jsonl": 6, "products.jsonl": 3},
        "eval 9 rows (6 from data.eval_file held.jsonl for the whole mixture, 0 sums.jsonl, 3 products.jsonl)",
    ),
]


@pytest.mark.parametrize("section,sources,line", HELD_OUT)
def test_held_out_rows_of_the_whole_mixture_and_of_its_sources(section, sources, line, tmp_path):
    """The eval rows a run scores: the whole mixture's set, named by its key or file in the source column and formatted
    with the mixture's system prompt, and each source's own, formatted with its own; never a training row."""
    write_two(tmp_path)
    d = recipe.validate({**minimal_recipe(), "data": {"system_prompt": "Be brief.", **section}}, tmp_path / "r.yaml").data
    check_files(d, tmp_path)
    rows = data.load(d, tmp_path, 0, [])
    assert Counter(r["source"] for r in rows.eval) == sources
    assert rows.notes[0].endswith(f"; {line}")
    assert data.has_eval(d) and data.eval_rows(d, tmp_path) == rows.eval
    assert not {r["prompt"] for r in rows.train} & {r["prompt"] for r in rows.eval}
    systems = {"sums.jsonl": "Add."}  # every other source, and the whole mixture's set, take the mixture's
    for row in data.formatted(rows.eval, d, chat=True):
        assert row["prompt"][0] == {"role": "system", "content": systems.get(row["source"], "Be brief.")}


def test_a_bad_row_of_the_whole_mixtures_eval_file_is_named(tmp_path):
    write_two(tmp_path)
    (tmp_path / "held.jsonl").write_text('{"prompt": "What is 1 + 1?", "answer": "2"}\n{"prompt": "What is 2 + 2?",\n')
    section = {"eval_file": "held.jsonl", "mixture": [SUMS, PRODUCTS]}
    d = recipe.validate({**minimal_recipe(), "data": section}, tmp_path / "r.yaml")
    with pytest.raises(RecipeError, match=r"data\.eval_file: held\.jsonl, line 2: malformed JSON"):
        check_files(d.data, tmp_path)
