"""Inputs past a bound are one `error:` line and exit 2, as fast as a good recipe is accepted, with nothing built
past the bound: YAML depth, aliases and integer size at load (a recipe and a `key=value` override), seeds numpy
refuses, invisible characters in keys; values in messages go through one bounded preview, file contents never
show beyond a bounded list of column names, and run files take the mode the umask gives.
"""

import contextlib
import io
import json
import os
import time

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core.files import write_atomic
from grpo_ext.core.text import clip, shown
from tests.helpers import ROOT, TIMED

DIGIT = ROOT / "recipes" / "digit.yaml"
DIGIT_TEXT = DIGIT.read_text(encoding="utf-8")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def laughs(levels: int) -> str:
    """A "billion laughs": each level a list of nine aliases of the one before, in one flow sequence."""
    anchors = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "[" + ", ".join(anchors) + "]"


def seed_line(value: str) -> str:
    """The shipped recipe with its `seed: 0` line given another value."""
    lines = DIGIT_TEXT.splitlines()
    return "\n".join(f"seed: {value}" if line.startswith("seed:") else line for line in lines) + "\n"


SEED_LINE = 1 + next(i for i, line in enumerate(DIGIT_TEXT.splitlines()) if line.startswith("seed:"))


def run(argv: list[str]) -> tuple[int, str, float]:
    """(exit status, stderr, best wall time of two) of the CLI run in-process."""
    times = []
    for _ in range(2):
        err = io.StringIO()
        t0 = time.monotonic()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = cli.main(argv)
        times.append(time.monotonic() - t0)
    return rc, err.getvalue(), min(times)


def refused_fast(argv: list[str], fragment: str, timed: bool) -> None:
    """One printable `error:` line holding ``fragment``, exit 2; timed, in at most five times the time the shipped
    recipe takes to validate beside it (both in this process: a bound in seconds would measure the machine)."""
    rc, err, took = run(argv)
    good_rc, _, good = run(["validate", str(DIGIT)])
    assert rc == 2 and good_rc == 0, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err
    assert lines[0].isprintable() and len(lines[0]) <= 500, lines[0]
    if timed:
        assert took < 5 * good, f"{took:.3f} s, the shipped recipe {good:.3f} s"


RECIPES = [
    # (recipe text, what the error line says)
    (seed_line(nested(500)), f"line {SEED_LINE}, column 106: nested more than 100 levels deep"),  # the 100th [
    (seed_line("{a: " * 500 + "1" + "}" * 500), "nested more than 100 levels deep"),  # mappings, as lists
    (seed_line("9" * 5000), f"line {SEED_LINE}, column 7: an integer of 5000 digits; a recipe's numbers have at most 308"),
    (seed_line("0x" + "f" * 400), "an integer of 400 digits"),  # hex: int() takes it, and the huge seed validated
    (seed_line(laughs(10)), "its aliases expand to more than 1,000,000 values"),  # 2 KB standing for 9**10 values
    (seed_line("-5"), "seed: must be at least 0, got -5"),  # validated, then training stopped 45 s in
    (seed_line(str(2**32)), "seed: must be at most 4294967295, got 4294967296"),  # past numpy's seeds
    (DIGIT_TEXT.replace("\nseed:", "\nsee\u200bd:"), "see\\u200bd: unknown key; did you mean 'seed'?"),  # was printed raw
    (DIGIT_TEXT.replace("\n  beta:", '\n  "be\\x07ta": 1\n  beta:'), "training.be\\x07ta: unknown GRPOConfig key"),
]


@pytest.mark.parametrize("timed", TIMED)
@pytest.mark.parametrize("text,fragment", RECIPES, ids=[f"{i}-{fragment[:24]}" for i, (_, fragment) in enumerate(RECIPES)])
def test_a_recipe_past_a_bound_is_one_line_fast(text, fragment, timed, tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(text.replace("output_dir: runs/digit", f"output_dir: {tmp_path / 'run'}"), encoding="utf-8")
    assert len(text.encode()) < 20_000  # each fits in a few kilobytes
    refused_fast(["validate", str(path)], fragment, timed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe.yaml"]  # nothing made


OVERRIDES = [
    # (override, what the error line says)
    ("seed=" + "9" * 5000, "an integer of 5000 digits"),  # was an OSError (file name too long) or a ValueError
    ("training.beta=" + nested(500), "nested more than 100 levels deep"),  # was a RecursionError
    ("training.beta=" + laughs(10), "its aliases expand to more than 1,000,000 values"),  # was minutes and gigabytes
    ("seed=-1", "seed: must be at least 0, got -1"),  # validated before
]


@pytest.mark.parametrize("override,fragment", OVERRIDES, ids=[o[:20] for o, _ in OVERRIDES])
@pytest.mark.parametrize("verb", [["validate", str(DIGIT)], ["train", str(DIGIT), "--dry-run"]])
@pytest.mark.parametrize("timed", TIMED)
def test_an_override_past_a_bound_is_one_line_fast(timed, verb, override, fragment):
    refused_fast([*verb, override], fragment, timed)


class Loud:
    """A value whose repr must never be asked for."""

    def __repr__(self):
        raise AssertionError("the whole value was turned into text")


@pytest.mark.parametrize(
    "value,limit,expected",
    [
        (10**5000, 60, "<an integer of about 5001 digits>"),  # repr() refuses past 4300 digits
        ([[[[[Loud()]]]]], 60, "[[[[...]]]]"),  # what lies past the depth shown is never turned into text
        ([1, 2, 3, 4, 5, 6, 7, Loud()], 60, "[1, 2, 3, 4, 5, 6, ...]"),  # nor the items past those shown
        ({"a": 1, "b": 2, "c": 3, "d": 4, "e": Loud()}, 60, "{'a': 1, 'b': 2, 'c': 3, 'd': 4, ...}"),  # in its own order
    ],
    ids=["huge-int", "deep", "long-list", "long-dict"],
)
def test_a_value_in_a_message_builds_only_what_is_shown(value, limit, expected):
    assert shown(value, limit) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("lear\u200bning_rate", "lear\\u200bning_rate"),  # a zero-width space, invisible when printed raw
        ("a\x1b[31mred", "a\\x1b[31mred"),  # a terminal escape that would colour the line
        ("tab\there", "tab\\there"),
    ],
)
def test_text_in_a_message_shows_what_it_holds(text, expected):
    assert clip(text) == expected


@pytest.mark.parametrize(
    "umask,mode",
    [
        (0o022, 0o644),  # the usual umask: readable by all, as every other file of a run (was 0600)
        (0o002, 0o664),  # a group-writable umask is honoured too (was 0600)
        (0o077, 0o600),  # a private umask keeps the file private (0600 before as well)
    ],
)
def test_write_atomic_gives_the_mode_the_umask_gives(umask, mode, tmp_path):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "summary.json", "{}\n")
        write_atomic(tmp_path / "summary.json", "{}\n")  # a rewrite too
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "summary.json").stat().st_mode & 0o777 == mode == (tmp_path / "plain.txt").stat().st_mode & 0o777
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt", "summary.json"]  # no temporary file left


SECRET = "hunter2-" + "s" * 40


def _jsonl(rows: list) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


FILES = [
    # (data file, its contents, what the error must say, text of the file it must not show)
    ("d.csv", (SECRET * 100 + "\nrow\n").encode(), "has no column 'prompt' (columns: hunter2-", SECRET * 2),  # a long first line
    ("d.csv", (",".join(f"c{i}" for i in range(50)) + "\n" + ",".join("x" * 50) + "\n").encode(), "c9 and 40 more", "c10,"),
    ("d.jsonl", _jsonl([{"prompt": "a"}, {"prompt": {"token": SECRET}}]), "line 2: prompt column 'prompt' holds dict;", SECRET),
]


@pytest.mark.parametrize("name,content,said,hidden", FILES, ids=["long-header", "many-columns", "cell-value"])
def test_an_error_shows_at_most_the_column_names_of_a_file(name, content, said, hidden, tmp_path, capsys):
    (tmp_path / name).write_bytes(content)
    doc = yaml.safe_load(DIGIT_TEXT)
    doc["data"] = {"file": name, "eval_prompts": ["2+3?"]}
    doc["output_dir"] = str(tmp_path / "run")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tmp_path / "r.yaml")]) == 2
    err = capsys.readouterr().err
    assert said in err and hidden not in err and err.count("\n") == 1, err
    assert all(len(line) <= 500 for line in err.splitlines())
