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
from grpo_ext.core import yaml_io
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
        parser = next(name for name, loader in yaml_io.LOADERS.items() if loader is yaml_io.LOADER)
        assert took < SLOWER[parser] * good, f"{took:.3f} s, the shipped recipe {good:.3f} s"


# How many times the shipped recipe's validation a refusal may take, by the parser. PyYAML's pure-Python scanner
# spends about 0.1 ms on each bracket of the 100 levels it reads before the bound stops it (about 57 ms on 2 cores,
# unchanged), while validating the shipped recipe dropped from about 12 ms to 5-8 ms once validation stopped loading
# what it does not use and reading every TRL field table; libyaml reads the same brackets in well under 1 ms.
SLOWER = {"libyaml": 5, "python": 12}  # by the parser's name in yaml_io.LOADERS, as the yaml_loader fixture names it


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
def test_a_recipe_past_a_bound_is_one_line_fast(text, fragment, timed, tmp_path, yaml_loader):
    path = tmp_path / "recipe.yaml"
    path.write_text(text.replace("output_dir: runs/digit", f"output_dir: {tmp_path / 'run'}"), encoding="utf-8")
    assert len(text.encode()) < 20_000  # each fits in a few kilobytes
    refused_fast(["validate", str(path)], fragment, timed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe.yaml"]  # nothing made


@pytest.mark.parametrize(
    "text",
    [
        nested(1001),  # past the 1,000 levels where libyaml stops on its own, looking ahead on the line
        "[" * 100_000,  # a 100 KB line of them
        "{b: " * 1500 + "1" + "}" * 1500,  # mappings
        "[\n " * 1500 + "]" * 1500,  # one a line: libyaml does not look ahead, and the bound stops it on line 101
    ],
    ids=["1001", "100k", "mappings", "lines"],
)
def test_yaml_deeper_than_libyaml_takes_is_the_depth_bound(text, yaml_loader, tmp_path):
    """Past 1,000 levels libyaml refuses on its own, named as the depth bound where it stopped (the pure-Python parser
    names level 101). Not timed: the pure-Python scanner takes about 0.5 s on a line's first 1,024 characters of
    brackets (the 500-level rows above are timed)."""
    path = tmp_path / "recipe.yaml"
    path.write_text(seed_line(text), encoding="utf-8")
    refused_fast(["validate", str(path)], "nested more than 100 levels deep; a recipe needs a few", timed=False)


OVERRIDES = [
    # (override, what the error line says)
    ("seed=" + "9" * 5000, "an integer of 5000 digits"),  # was an OSError (file name too long) or a ValueError
    ("training.beta=" + nested(500), "nested more than 100 levels deep"),  # was a RecursionError
    ("training.beta=" + laughs(10), "its aliases expand to more than 1,000,000 values"),  # was minutes and gigabytes
    ("seed=-1", "seed: must be at least 0, got -1"),  # validated before
    # a byte of the command line that is not UTF-8 (Python keeps it as a lone surrogate): libyaml takes only UTF-8
    ("training.beta=\udcff", "training.beta: expected a finite number, got str '\\udcff'"),
]


@pytest.mark.parametrize("override,fragment", OVERRIDES, ids=[o[:20] for o, _ in OVERRIDES])
@pytest.mark.parametrize("verb", [["validate", str(DIGIT)], ["train", str(DIGIT), "--dry-run"]])
@pytest.mark.parametrize("timed", TIMED)
def test_an_override_past_a_bound_is_one_line_fast(timed, verb, override, fragment, yaml_loader):
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


N300 = "9" * 300
LIMITS = [
    # (command line, what the one error line says): counts a run allocates or loops over, each with its bound
    (["validate", str(DIGIT), f"training.max_steps={N300}"], "training.max_steps: must be at most 1000000"),  # validated
    (["plan", str(DIGIT), f"training.max_steps={N300}"], "training.max_steps: must be at most 1000000"),  # and planned
    (["train", str(DIGIT), "--dry-run", f"training.max_steps={N300}"], "training.max_steps: must be at most 1000000"),
    (["validate", str(DIGIT), "training.num_train_epochs=1e12"], "training.num_train_epochs: must be at most 1000000"),
    (["validate", str(DIGIT), "training.num_generations=100000"], "training.num_generations: must be at most 65536"),
    (["validate", str(DIGIT), "training.generation_batch_size=99999999"], "generation_batch_size: must be at most 65536"),
    (["validate", str(DIGIT), "training.max_completion_length=2000000"], "max_completion_length: must be at most 1048576"),
    (["validate", str(DIGIT), "training.dataloader_num_workers=100000"], "dataloader_num_workers: must be at most 1024"),
    (["validate", str(DIGIT), "eval.samples=99999999"], "eval.samples: must be at most 65536"),
    (["validate", str(DIGIT), "eval.batch_size=99999999"], "eval.batch_size: must be at most 65536"),
    (["validate", str(DIGIT), "eval.max_new_tokens=99999999"], "eval.max_new_tokens: must be at most 1048576"),
    (["validate", str(DIGIT), "health.preflight_prompts=99999999"], "health.preflight_prompts: must be at most 65536"),
    (["validate", str(DIGIT), f"health.trend_steps={N300}"], "health.trend_steps: must be at most 1000000"),
    (["validate", str(DIGIT), f"explore.steps={N300}"], "explore.steps: must be at most 1000000"),
    (["validate", str(DIGIT), f"logging.completions_steps={N300}"], "logging.completions_steps: must be at most 1000000"),
    (["validate", str(DIGIT), f"groups.max_extra_rounds={N300}"], "groups.max_extra_rounds: must be at most 1024"),
    # the generator drew problems until it had 10**20 of them: validate never ended
    (["validate", "arith", "data.source_args.train=" + "9" * 20], "data.source_args.train: must be a whole number from 0 to"),
    # a word where a count goes: a TypeError traceback
    (["validate", "arith", "data.source_args.held_out=abc"], "data.source_args.held_out: must be a whole number from 0 to"),
]


@pytest.mark.parametrize("argv,fragment", LIMITS, ids=[a[-1][:32] for a, _ in LIMITS])
def test_a_count_past_its_bound_is_one_line(argv, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, err, _ = run(argv)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], err
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_every_count_of_the_schema_has_a_bound():
    from grpo_ext.recipe.schema import MIXTURE_SOURCE, SCHEMA

    specs = [(f"{s}.{k}", spec) for s, keys in SCHEMA.items() for k, spec in keys.items()] + list(MIXTURE_SOURCE.items())
    assert [key for key, spec in specs if "int" in spec.kinds and spec.maximum is None] == []


def test_a_mixture_size_past_its_bound_stops_before_the_run_directory(tmp_path):
    """data.size: 99999999999999999999 passed validate and the dry run; training then made the run directory and drew
    rows for ever."""
    (tmp_path / "rows.jsonl").write_bytes(_jsonl([{"prompt": "Say 1."}, {"prompt": "Say 2."}]))
    doc = yaml.safe_load(DIGIT_TEXT)
    doc["data"] = {"size": 10**20 - 1, "mixture": [{"file": "rows.jsonl", "weight": 1, "eval_prompts": ["Say 3."]}]}
    doc["output_dir"] = str(tmp_path / "run")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    for argv in (["validate", str(tmp_path / "r.yaml")], ["train", str(tmp_path / "r.yaml"), "--dry-run"]):
        rc, err, _ = run(argv)
        assert rc == 2 and err.count("\n") == 1 and "data.size: must be at most 1000000, got 99999999999999999999" in err, err
    assert not (tmp_path / "run").exists()


def _socket(path):
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    return sock


SPECIAL = [
    # (how the data file is made, what the line says)
    (lambda p: os.mkfifo(p), "is a named pipe, not a file"),  # validate waited for a writer, for ever
    (lambda p: os.symlink("/dev/null", p), "is a character device, not a file"),  # read as a file of no rows
    (_socket, "is a socket, not a file"),  # OSError (No such device or address) traceback
]


@pytest.mark.parametrize("make,said", SPECIAL, ids=["fifo", "device", "socket"])
@pytest.mark.parametrize("key", ["file", "eval_file"])
def test_a_data_path_that_is_not_a_file_is_refused_unopened(make, said, key, tmp_path):
    import threading

    data = tmp_path / "rows.jsonl"
    kept = make(data)
    doc = yaml.safe_load(DIGIT_TEXT)
    doc["data"][key] = "rows.jsonl"
    doc["data"].pop("prompts" if key == "file" else "eval_prompts")
    doc["output_dir"] = str(tmp_path / "run")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    result = []
    worker = threading.Thread(target=lambda: result.append(run(["validate", str(tmp_path / "r.yaml")])), daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # a writer lets the waiting reader go, so the test ends
        with open(data, "w"):
            pass
        worker.join(timeout=30)
        pytest.fail("validate waited on the named pipe")
    if kept is not None:
        kept.close()
    rc, err, _ = result[0]
    assert rc == 2 and err.count("\n") == 1 and f"data.{key}: " in err and said in err, err


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


GOOD_PARQUET = _parquet([{"prompt": f"Say {i}."} for i in range(50)])


def _saved(folder, info=None, state=None, arrow: bytes | None = None) -> None:
    """A folder as Dataset.save_to_disk writes it (dataset_info.json, state.json, one arrow stream), with any part
    replaced."""
    import pyarrow as pa

    folder.mkdir()
    sink = io.BytesIO()
    table = pa.Table.from_pylist([{"prompt": "Say 1."}, {"prompt": "Say 2."}])
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    name = "data-00000-of-00001.arrow"
    files = {
        "dataset_info.json": info if info is not None else json.dumps({"features": {"prompt": {"_type": "Value"}}}),
        "state.json": state if state is not None else json.dumps({"_data_files": [{"filename": name}]}),
    }
    for file, text in files.items():
        (folder / file).write_text(text)
    (folder / name).write_bytes(sink.getvalue() if arrow is None else arrow)


def _cut_arrow(folder):
    _saved(folder)
    arrow = folder / "data-00000-of-00001.arrow"
    arrow.write_bytes(arrow.read_bytes()[:150])


DAMAGED = [
    # (data file name, how it is made, what the one line says)
    ("d.parquet", lambda p: p.write_bytes(b""), "d.parquet: not a readable Parquet file (Parquet file size is 0 bytes)"),
    ("d.parquet", lambda p: p.write_bytes(GOOD_PARQUET[: len(GOOD_PARQUET) // 2]), "d.parquet: not a readable Parquet file"),
    ("d.parquet", lambda p: p.write_bytes(bytes(range(256)) * 8), "d.parquet: not a readable Parquet file"),  # garbage
    ("d.parquet", lambda p: p.write_bytes(GOOD_PARQUET[:8] + b"\x00" * 64 + GOOD_PARQUET[72:]), "not a readable Parquet"),
    ("d.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "d.json: JSON nested too deeply to read"),  # Recursion
    ("d.jsonl", lambda p: p.write_text('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n"), "line 1: JSON nested too"),
    ("d.csv", lambda p: p.write_text("prompt\n" + "x" * 200_000 + "\n"), "d.csv, line 2: not readable as CSV: field larger"),
    # these were one line already
    ("d.csv", lambda p: p.write_bytes(b""), "d.csv: the file has no rows"),
    ("d.jsonl", lambda p: p.write_bytes(b""), "d.jsonl: the file has no rows"),
    ("d.json", lambda p: p.write_bytes(b""), "d.json: the file has no rows"),
    ("d.jsonl", lambda p: p.write_text('{"prompt": "a"}\n{"prompt": "b'), "d.jsonl, line 2: malformed JSON"),  # cut short
    ("d.json", lambda p: p.write_text('[{"prompt": "a"}, {"prompt": "b'), "d.json, line 1: malformed JSON"),
    ("d.csv", lambda p: p.write_bytes(b"prompt\n\xff\xfe\x00garbage\n"), "d.csv, line 2: byte 0xff at column 1 is not UTF-8"),
    ("d.jsonl", lambda p: p.write_bytes(bytes(range(128, 256))), "d.jsonl, line 1: byte 0x80 at column 1 is not UTF-8"),
    # a save_to_disk folder: its arrow stream empty, cut short or garbage; its JSON files missing or damaged
    ("saved", lambda p: _saved(p, arrow=b""), "saved: not a readable dataset folder"),
    ("saved", _cut_arrow, "saved: not a readable dataset folder"),
    ("saved", lambda p: _saved(p, arrow=bytes(range(256)) * 4), "saved: not a readable dataset folder"),
    ("saved", lambda p: _saved(p, info="{not json"), "saved: its dataset_info.json is not JSON"),
    ("saved", lambda p: _saved(p, state="[1, 2"), "saved: its state.json is not JSON"),
    ("saved", lambda p: _saved(p, state="[1, 2]"), "saved: its state.json holds a JSON list, not an object"),
    ("saved", lambda p: (_saved(p), (p / "state.json").unlink()), "saved: no state.json in the folder"),
    ("saved", lambda p: (_saved(p), (p / "data-00000-of-00001.arrow").unlink()), "its data-00000-of-00001.arrow is missing"),
]


@pytest.mark.parametrize("name,make,said", DAMAGED, ids=[f"{i}-{said[:30]}" for i, (_, _, said) in enumerate(DAMAGED)])
def test_a_damaged_data_file_is_one_line(name, make, said, tmp_path):
    make(tmp_path / name)
    doc = yaml.safe_load(DIGIT_TEXT)
    doc["data"]["file"] = name
    doc["data"].pop("prompts")
    doc["output_dir"] = str(tmp_path / "run")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    rc, err, _ = run(["validate", str(tmp_path / "r.yaml")])
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "data.file: " in lines[0] and said in lines[0], err
    assert lines[0].isprintable() and len(lines[0]) <= 500
