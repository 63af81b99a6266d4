"""The doctor on run directories as a crash or a hand leaves them: a killed run reads as killed, and a damaged file
is named in a note, never a traceback."""

import json
import os
import subprocess

import pytest
import yaml

from grpo_ext import cli

RECORDS = [{"step": s, "reward": 0.1 * s, "frac_reward_zero_std": 0.0, "entropy": 3.0 - 0.5 * s} for s in (1, 2)]


def write_run(path, status="completed"):
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (path / "recipe.yaml").write_text(yaml.safe_dump({"health": {"no_signal_steps": 6}, "eval": {"pass_threshold": 1.0}}))
    summary = {"status": status, "recipe": "r.yaml", "versions": {"trl": "1.16.0"}}
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


DAMAGE_CASES = [
    # recipe.yaml cut short in the middle of a list
    ("recipe.yaml", "health:\n  no_signal_steps: 6\nrewards:\n  - [digit", "note: recipe.yaml is damaged (ParserError)"),
    # recipe.yaml that is not a mapping
    ("recipe.yaml", "- a\n- b\n", "note: recipe.yaml holds a list, not a mapping; read as empty"),
    # the run's thresholds hand-edited to words: the defaults apply
    ("recipe.yaml", "health: {no_signal_steps: many}\neval: {pass_threshold: high}\n", None),
    # summary.json of []
    ("summary.json", "[]", "note: summary.json holds a list, not a mapping; read as empty"),
    # summary.json cut short
    ("summary.json", '{"status": "compl', "note: summary.json is damaged (JSONDecodeError)"),
    # a pre-flight finding that is not one, versions that are not a mapping
    ("summary.json", '{"status": "completed", "versions": [], "health": {"preflight": {"findings": [1]}}}', "damaged findings"),
    # a status that is not a word
    ("summary.json", '{"status": ["completed"]}', None),
    # metrics.jsonl that is not text
    ("metrics.jsonl", b"\xff\xfe\x00garbage\n", "note: metrics.jsonl is damaged (not text); no step read"),
    # metrics.jsonl lines of garbage: a health entry that is a number, a reward that is a word, a line of no JSON
    ("metrics.jsonl", '{"step": 1, "health": 5, "reward": "x"}\nnot json\n{"step": 2, "health": ["a"]}\n', None),
]


@pytest.mark.parametrize(("name", "content", "note"), DAMAGE_CASES)
def test_damaged_file_is_a_note_not_a_traceback(name, content, note, tmp_path, capsys):
    run = write_run(tmp_path / "run")
    (run / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    assert cli.main(["doctor", str(run)]) in (0, 1)
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[-1].startswith("verdict: ")
    if note is not None:
        assert any(line.startswith("note: ") and note in line for line in out.splitlines()), out


@pytest.mark.parametrize(
    ("lock", "shown", "code"),
    [
        (None, "killed (summary.json says running, and no live process holds the run's lock)", 1),  # no lock file
        (lambda: f"{dead_pid()}\n", "killed (summary.json says running, and no live process holds the run's lock)", 1),
        (lambda: f"{os.getpid()}\n", "running", 0),  # its process is alive: still training
        (lambda: "", "running, or killed (the summary was not closed)", 0),  # a lock being written: cannot tell
        (lambda: "not a pid", "running, or killed (the summary was not closed)", 0),
    ],
    ids=["no-lock", "dead-pid", "live-pid", "empty-lock", "garbage-lock"],
)
def test_running_summary_read_against_the_lock(lock, shown, code, tmp_path, capsys):
    run = write_run(tmp_path / "run", status="running")
    if lock is not None:
        (run / ".lock").write_text(lock())
    assert cli.main(["doctor", str(run)]) == code
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"run {run}: {shown}; 2 steps logged; trl 1.16.0"
    assert any(line.startswith("killed: ") and "grpo-ext train r.yaml --resume" in line for line in lines) is (code == 1)
