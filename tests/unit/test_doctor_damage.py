"""The doctor on run directories as a crash or a hand leaves them: a damaged file is named in a note, never a
traceback (a killed run read against its lock: tests/integration/test_doctor_lock.py)."""

import pytest

from grpo_ext import cli
from tests.helpers import two_step_run

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
    run = two_step_run(tmp_path / "run")
    (run / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    assert cli.main(["doctor", str(run)]) in (0, 1)
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines()[-1].startswith("verdict: ")
    if note is not None:
        assert any(line.startswith("note: ") and note in line for line in out.splitlines()), out
