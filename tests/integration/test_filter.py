"""``grpo-ext filter``: the tiny model samples each row of a file of six, a reward of the test's own scores them with
pass rates fixed in advance, and the rows solved sometimes are kept; an interrupted run resumes where it stopped;
bad input stops before anything heavy is imported."""

import json
import subprocess
import sys

import pytest

import grpo_ext
from grpo_ext import cli
from grpo_ext.run import data
from tests.helpers import jsonl, write

K = 8
# row → how many of its K samples pass: pass rates 0, 1/8, 1/2, 7/8, 1, 1/4 whatever the model writes
SOLVED = [0, 1, 4, 7, 8, 2]
KEPT = [1, 2, 3, 5]  # rows whose pass rate lies in the default 0.1:0.9

# The first `solved` samples of each row pass (samples arrive grouped by row). Each call logs the rows it saw;
# with the stop file present a second call raises, as a crash or a kill part-way through would stop the run.
REWARD = """
import json
from pathlib import Path

LOG = Path({log!r})
STOP = Path({stop!r})

def graded(completions, row, solved, **kwargs):
    with LOG.open("a") as fh:
        fh.write(json.dumps(sorted(set(row))) + "\\n")
    if STOP.exists() and len(LOG.read_text().splitlines()) > 1:
        raise RuntimeError("stopped part-way on purpose")
    seen = {{}}
    out = []
    for r, s in zip(row, solved):
        seen[r] = seen.get(r, 0) + 1
        out.append(1.0 if seen[r] <= s else 0.0)
    return out
"""


@pytest.fixture
def setup(tmp_path, digit_doc, tiny_model):
    """The digit recipe on the tiny model reading six rows from rows.jsonl (prompt in `question`), rewarded by the
    test's `graded` first; eval off (its prompts have no `row` column). Two rows to a generation batch."""
    rows = [{"question": f"Reply with one digit, question {i}.", "row": i, "solved": s} for i, s in enumerate(SOLVED)]
    jsonl(tmp_path / "rows.jsonl", rows)
    log, stop = tmp_path / "calls.log", tmp_path / "stop"
    (tmp_path / "graded.py").write_text(REWARD.format(log=str(log), stop=str(stop)))
    digit_doc["model"]["name"] = str(tiny_model)
    digit_doc["data"] = {"file": "rows.jsonl", "prompt_column": "question"}
    digit_doc["rewards"] = ["graded.py:graded", "digit_exact"]
    digit_doc["training"]["max_completion_length"] = 4
    digit_doc["eval"] = {"enabled": False, "batch_size": 2 * K}
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    return {"recipe": write(tmp_path / "recipe.yaml", digit_doc), "rows": rows, "log": log, "stop": stop, "dir": tmp_path}


def calls(log) -> list[list[int]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_filter_keeps_the_rows_solved_sometimes(setup, tiny_model, capsys, no_hub):
    recipe, where = setup["recipe"], setup["dir"]
    assert cli.main(["filter", str(recipe), "--model", str(tiny_model)]) == 0
    out = capsys.readouterr().out.splitlines()

    kept = [json.loads(line) for line in (where / "rows.filtered.jsonl").read_text().splitlines()]
    # the kept rows in their order, every column of the file under its own name, and the pass rate
    assert kept == [{**setup["rows"][i], "pass_rate": SOLVED[i] / K} for i in KEPT]
    assert (where / "rows.filtered.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (where / "rows.filtered.progress.jsonl").exists()  # gone once the output is written
    # every row scored once, two to a call; the recipe's other reward decides nothing
    assert calls(setup["log"]) == [[0, 1], [2, 3], [4, 5]]

    # the histogram: one bar per j/8, with the kept part
    assert out[0] == f"pass rate of graded ({K} samples a row): rows, and how many are kept"
    bars = {line.split()[0]: line.split()[1:] for line in out[1 : K + 2]}
    assert bars["0/8"][-1] == "1" and bars["4/8"][-3:] == ["1", "1", "kept"] and bars["3/8"] == ["0"]
    summary = next(line for line in out if line.startswith("filter: "))
    assert summary.startswith("filter: 6 rows scored, 4 kept (67%) with a pass rate in [0.1, 0.9], ")
    assert summary.endswith(" s")
    assert f"wrote {where / 'rows.filtered.jsonl'} (4 rows) and rows.filtered.png" in out
    assert out[-1].startswith(f"use it: in {recipe}, data: {{file: rows.filtered.jsonl}}")

    # the recipe reads the file with the override it prints, through the same prompt column
    again = grpo_ext.load_recipe(str(recipe), [f"data.file={where / 'rows.filtered.jsonl'}"])
    prompts = [r["prompt"] for r in data.train_rows(again.data, again.base_dir)]
    assert prompts == [setup["rows"][i]["question"] for i in KEPT]


def test_an_interrupted_filter_resumes_with_the_rows_left(setup, no_hub):
    recipe, where, log = setup["recipe"], setup["dir"], setup["log"]
    out = where / "kept.jsonl"
    progress = where / "kept.progress.jsonl"
    setup["stop"].touch()
    assert cli.main(["filter", str(recipe), "--out", str(out)]) == 1  # the reward raises on its second call
    scored = [json.loads(line) for line in progress.read_text().splitlines()]
    assert "settings" in scored[0] and [r["row"] for r in scored[1:]] == [0, 1]  # the first batch was kept
    assert not out.exists()

    # other settings cannot take up this progress: one line, nothing scored, the file left as it was
    before, called = progress.read_text(), len(calls(log))
    assert cli.main(["filter", str(recipe), "--out", str(out), "--k", "4"]) == 2
    assert progress.read_text() == before and len(calls(log)) == called

    # a half-written last line (a kill mid-write) is dropped, then only the rows left are scored
    progress.write_text(before + '{"row": 2, "pas')
    setup["stop"].unlink()
    log.unlink()
    summary = grpo_ext.filter_rows(recipe, out=out)
    assert calls(log) == [[2, 3], [4, 5]]
    assert (summary["rows"], summary["reused"], summary["scored"], summary["kept"]) == (6, 2, 4, 4)
    assert summary["pass_rates"] == [s / K for s in SOLVED]
    assert [json.loads(line)["row"] for line in out.read_text().splitlines()] == KEPT
    assert not progress.exists() and (where / "kept.png").exists()


CHECK = """
import contextlib, io, json, sys
from grpo_ext import cli
from grpo_ext.run import data

for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    print(json.dumps([rc, err.getvalue()]))
assert "torch" not in sys.modules, "imported torch"
"""

# (extra arguments, what the one error line says)
BAD = [
    (["--keep", "0.9:0.1"], "--keep 0.9:0.1: give LOW:HIGH with 0 <= LOW <= HIGH <= 1"),  # the wrong way round
    (["--keep", "0.5"], "--keep 0.5: give LOW:HIGH"),  # one number
    (["--keep", "0:1.5"], "--keep 0:1.5: give LOW:HIGH"),  # past 1
    (["--keep", "a:b"], "--keep a:b: give LOW:HIGH"),  # not numbers
    (["--reward", "grade"], "--reward grade: the recipe has no such reward; did you mean 'graded'?"),  # a typo
    (["--reward", "nope"], "--reward nope: the recipe has no such reward; its rewards: graded, digit_exact"),
    (["--k", "0"], "--k 0: sample each prompt at least once"),
    (["--out", "."], "is a folder; give a file name"),  # a directory
    (["--out", "nowhere/kept.jsonl"], "folder nowhere does not exist"),
    (["--out", "rows.jsonl"], "is the recipe's data file"),  # would overwrite the data it reads
    (["data.file=empty.jsonl"], "data.file: empty.jsonl: the file has no rows"),
]


def test_bad_input_stops_before_anything_heavy(setup):
    where = setup["dir"]
    (where / "empty.jsonl").write_text("")
    before = sorted(p.name for p in where.iterdir())
    argvs = [["filter", str(setup["recipe"]), *extra] for extra, _ in BAD]
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(argvs)], capture_output=True, text=True, cwd=where, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for (extra, message), line in zip(BAD, proc.stdout.splitlines(), strict=True):
        rc, err = json.loads(line)
        assert rc == 2 and err.count("\n") == 1 and err.startswith("error: ") and message in err, (extra, err)
    assert sorted(p.name for p in where.iterdir()) == before  # nothing written


def test_rows_held_out_for_eval_are_not_scored(setup, capsys, no_hub):
    """With data.eval_size the recipe trains on the rows left: those alone are scored and written."""
    out = setup["dir"] / "train-only.jsonl"
    assert cli.main(["filter", str(setup["recipe"]), "eval.enabled=true", "data.eval_size=2", "--out", str(out)]) == 0
    seen = sorted(r for call in calls(setup["log"]) for r in call)
    assert len(seen) == 4 and len(set(seen)) == 4  # two of the six rows held out, each other row scored once
    written = sorted(json.loads(line)["row"] for line in out.read_text().splitlines())  # in the order training has them
    assert written == [r for r in KEPT if r in seen]
    printed = capsys.readouterr().out
    assert "filter: 4 rows scored" in printed and "note: the rows held out for eval were not scored" in printed
