"""The doctor on run directories as a crash or a hand leaves them: a damaged file is named in a note, never a
traceback, and a summary that holds no status makes the verdict unknown, never healthy (a killed run read against
its lock: tests/integration/test_doctor_lock.py)."""

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
    # a pre-flight finding that is not one, versions that are not a mapping
    ("summary.json", '{"status": "completed", "versions": [], "health": {"preflight": {"findings": [1]}}}', "damaged findings"),
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


UNREADABLE_SUMMARY_CASES = [
    # random bytes (not UTF-8)
    (bytes(range(256)), "summary.json is damaged (UnicodeDecodeError)"),
    # cut short
    ('{"status": "compl', "summary.json is damaged (JSONDecodeError)"),
    # JSON that is not a mapping
    ("[]", "summary.json holds a list, not a mapping"),
    # a mapping without a status
    ('{"steps": 2}', "summary.json records no status"),
    # a status that is not a word
    ('{"status": ["completed"]}', "summary.json records a status that is a list, not a word"),
    # no summary at all beside the metrics
    (None, "summary.json is missing"),
]


@pytest.mark.parametrize(("content", "problem"), UNREADABLE_SUMMARY_CASES)
def test_unreadable_summary_is_never_healthy(content, problem, tmp_path, capsys):
    """Without a status the doctor cannot know how the run ended: the verdict names the summary's damage, exit 1."""
    run = two_step_run(tmp_path / "run")
    if content is None:
        (run / "summary.json").unlink()
    else:
        (run / "summary.json").write_bytes(content if isinstance(content, bytes) else content.encode())
    assert cli.main(["doctor", str(run)]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[-1] == (
        f"verdict: unknown: {problem}, so how the run ended cannot be read; what is above comes from metrics.jsonl alone"
    )
    assert sum(problem in line for line in out.splitlines()) == 1  # said once
