"""completions.jsonl read back as a stopped run or a hand leaves it: the reader counts and skips what is not a
completion, and ``doctor --samples`` says so in a note, never a traceback (the file a real run writes:
tests/integration/test_completions_log.py)."""

import json
import re

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import completions
from tests.helpers import two_step_run


def line(step: int, completion: str, advantage: float | None = 0.5, **rewards) -> str:
    record = {"step": step, "prompt": "Pick a digit.", "completion": completion, "rewards": rewards, "advantage": advantage}
    return json.dumps(record) + "\n"


GOOD = line(1, "3", -0.5, digit_exact=1.0) + line(1, "three", 0.5, digit_exact=0.0) + line(2, "7", 0.0, digit_exact=None)
CAPPED = json.dumps({"capped": True, "step": 2, "max_mb": 0.001}) + "\n"

KILLED = GOOD + '{"step": 2, "prompt": "Pick a di'
NOT_UTF8 = line(1, "a").encode() + b'{"step": 1, "prompt": "p", "completion": "\xff", "rewards": {}}\n'

READ_CASES = [
    # a run killed while writing: the last line is cut short, the three before it are read
    pytest.param(KILLED, 3, ["3", "three", "7"], 1, True, None, id="killed"),
    # the same file, asked for its last two
    pytest.param(KILLED, 2, ["three", "7"], 1, True, None, id="last-two"),
    # a file that stopped at its cap: the closing line is neither a completion nor damage
    pytest.param(GOOD + CAPPED, 3, ["3", "three", "7"], 0, False, 2, id="capped"),
    # a resume that raised the cap appended after the closing line: the file no longer ends at its cap
    pytest.param(GOOD + CAPPED + line(3, "5"), 3, ["three", "7", "5"], 0, False, None, id="cap-raised"),
    # a line cut short in the middle (a resumed run starts its own line after it), a mapping that is no completion, a list
    pytest.param(GOOD[:30] + "\n" + '{"step": 1}\n[1, 2]\n' + GOOD, 3, ["3", "three", "7"], 3, False, None, id="damaged"),
    # bytes that are not UTF-8 inside a completion: read as a replacement character
    pytest.param(NOT_UTF8, 3, ["a", "\ufffd"], 0, False, None, id="not-utf-8"),
    # an empty file
    pytest.param("", 3, [], 0, False, None, id="empty"),
]


@pytest.mark.parametrize(("content", "last", "shown", "damaged", "cut_short", "capped_at"), READ_CASES)
def test_read_skips_what_is_not_a_completion(content, last, shown, damaged, cut_short, capped_at, tmp_path):
    path = tmp_path / completions.FILE
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    found = completions.read(path, last)
    assert [r["completion"] for r in found.last] == shown
    assert (found.damaged, found.cut_short) == (damaged, cut_short)
    assert (found.capped or {}).get("step") == capped_at


NAN = float("nan")
USER = [{"role": "user", "content": "Pick a digit."}]
SYSTEM = [{"role": "system", "content": "Be brief."}, *USER]
LINE_CASES = [
    # chat (TRL 1.15 on): one message is its content; a reward that scored none (NaN) is null; float32 noise is cut
    (USER, [{"role": "assistant", "content": "7"}], {"r": NAN, "s": 0.20000000298023224}, 0.5, "Pick a digit.", "7",
     {"r": None, "s": 0.2}, 0.5),
    # several messages each after its role, so that the system prompt reads apart from the question
    (SYSTEM, [{"role": "assistant", "content": "7"}], {"r": 1.0}, 0.5, "system: Be brief.\nuser: Pick a digit.", "7",
     {"r": 1.0}, 0.5),
    # text (TRL up to 1.14) as it is; an advantage of NaN is null, never the NaN that strict JSON readers refuse
    ("<|user|>Pick a digit.", "seven", {"r": 1.0}, NAN, "<|user|>Pick a digit.", "seven", {"r": 1.0}, None),
]  # fmt: skip


@pytest.mark.parametrize(("prompt", "completion", "scores", "advantage", "text", "said", "rewards", "written"), LINE_CASES)
def test_lines_are_strict_json(prompt, completion, scores, advantage, text, said, rewards, written):
    batch = {
        "prompt": [prompt],
        "completion": [completion],
        "rewards": {name: [score] for name, score in scores.items()},
        "advantages": [advantage],
    }
    (encoded,) = completions.lines(3, batch)
    assert encoded.endswith(b"\n") and b"NaN" not in encoded
    record = json.loads(encoded)
    assert record == {"step": 3, "prompt": text, "completion": said, "rewards": rewards, "advantage": written}


def test_doctor_samples_of_a_damaged_file(tmp_path, capsys):
    """The last line cut short: a note, the completions before it, and the exit status the doctor gives anyway."""
    run = two_step_run(tmp_path / "run")
    assert cli.main(["doctor", str(run)]) == 0
    capsys.readouterr()
    (run / completions.FILE).write_text(GOOD + '{"step": 2, "prompt": "Pick a di')
    assert cli.main(["doctor", str(run), "--samples", "2"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"completions: the last 2 of 3 logged (steps 1 to 2), from {run / completions.FILE}" in out
    assert "note: completions.jsonl ends in a line cut short (the run was stopped while writing it); skipped" in out
    assert re.findall(r"step (\d+), advantage (\S+)", out) == [("1", "+0.500"), ("2", "+0.000")]
    assert "digit_exact 0.000" in out and "digit_exact -" in out  # the second reward scored none


SAMPLES_CASES = [
    # no file: said in one line, and the doctor's verdict still decides the exit status
    (None, None, ["--samples"], 0, "completions: none logged: "),
    # no file, and the run's recipe says why
    (None, 0, ["--samples"], 0, "does not exist (the run's recipe sets logging.completions_steps: 0)"),
    # a file of no completion at all
    ("[1]\n", None, ["--samples"], 0, "holds no completion"),
    # a count below one is bad input: nothing printed but the error
    (GOOD, None, ["--samples", "0"], 2, "doctor: --samples takes a count of 1 or more, got 0; e.g. --samples 3"),
    # --samples reads a run directory, which --env does not take
    (GOOD, None, ["--env", "--samples"], 2, "doctor: --samples reads a run directory; drop --env"),
]


@pytest.mark.parametrize(("content", "steps", "flags", "code", "message"), SAMPLES_CASES)
def test_doctor_samples_says_what_it_found(content, steps, flags, code, message, tmp_path, capsys):
    run = two_step_run(tmp_path / "run")
    if content is not None:
        (run / completions.FILE).write_text(content)
    if steps is not None:
        recipe = yaml.safe_load((run / "recipe.yaml").read_text())
        (run / "recipe.yaml").write_text(yaml.safe_dump({**recipe, "logging": {"completions_steps": steps}}))
    argv = ["doctor", *flags] if "--env" in flags else ["doctor", str(run), *flags]
    assert cli.main(argv) == code
    out, err = capsys.readouterr()
    assert message in (out if code == 0 else err)
    assert code == 0 or out == ""
