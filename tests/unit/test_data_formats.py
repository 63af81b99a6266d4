"""A user's own data, before any model loads: held-out rows, one source of eval rows, the system prompt, bad files
named by their line, and the model context read from a config (training on every format, reward columns checked in
a fresh interpreter and prompts fitted to the tiny model's tokenizer: tests/integration/test_data_formats_training.py).

Driven through ``grpo_ext.cli.main`` with recipes written to tmp_path, as a user runs them.
"""

from pathlib import Path

import pytest
import yaml

from grpo_ext import cli, recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.data import datafiles
from grpo_ext.run import data, trainer
from tests.helpers import QUESTIONS, jsonl, minimal_recipe, user


def test_docstring_examples():
    import doctest

    result = doctest.testmod(datafiles)
    assert result.attempted > 0 and result.failed == 0


def test_held_out_rows_are_never_trained_on_and_follow_the_seed(tmp_path):
    jsonl(tmp_path / "d.jsonl", [{"prompt": q, "answer": a} for q, a in QUESTIONS])
    d = recipe.validate({**minimal_recipe(), "data": {"file": "d.jsonl", "eval_fraction": 0.3}}, tmp_path / "r.yaml").data
    first = data.load(d, tmp_path, 0, [])
    trained = {r["prompt"] for r in first.train}
    held = [r["prompt"] for r in first.eval]
    assert len(held) == 3 and len(trained) == 7 and not trained & set(held)
    assert held == [r["prompt"] for r in data.load(d, tmp_path, 0, []).eval]  # the same seed holds out the same rows
    assert held != [r["prompt"] for r in data.load(d, tmp_path, 1, []).eval]  # another seed, other rows
    assert "held out 3 of 10 training rows" in first.notes[0]


@pytest.mark.parametrize(
    "section,expected",
    [
        # eval_size beside eval_prompts could mean either; validate and the run must not read it two ways
        ({"file": "d.jsonl", "eval_prompts": ["What is 2+2?"], "eval_size": 2}, "data: eval_prompts and eval_size are all given"),
        ({"file": "d.jsonl", "eval_file": "d.jsonl", "eval_fraction": 0.5}, "data: eval_file and eval_fraction are all given"),
    ],
)
def test_one_source_of_eval_rows(section, expected, tmp_path):
    jsonl(tmp_path / "d.jsonl", [{"prompt": q, "answer": a} for q, a in QUESTIONS])
    with pytest.raises(RecipeError, match=expected):
        recipe.validate({**minimal_recipe(), "data": section}, tmp_path / "r.yaml")


@pytest.mark.parametrize(
    "prompt,system,expected",
    [
        ("2+2?", "Be brief.", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]),  # text
        (user("2+2?"), "Be brief.", [{"role": "system", "content": "Be brief."}, *user("2+2?")]),  # messages, no system
        (
            [{"role": "system", "content": "Own."}, *user("2+2?")],
            "Be brief.",
            [{"role": "system", "content": "Own."}, *user("2+2?")],
        ),
        (user("2+2?"), None, user("2+2?")),  # messages kept as they are
    ],
)
def test_system_prompt_goes_first_unless_the_row_has_its_own(prompt, system, expected):
    assert data.format_prompt(prompt, system, chat=True) == expected


# --- bad files: one line naming the file, the line or row, and what is wrong -----------------------------


def _parquet_with_null(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["a", None], "answer": ["1", "2"]}), str(path))


BAD = [
    ("d.jsonl", b'{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"\n', "d.jsonl, line 3: malformed JSON"),  # cut short
    ("d.jsonl", b"", "d.jsonl: the file has no rows"),  # empty
    ("d.jsonl", b'{"prompt": "a"}\n{"prompt": 5}\n', "line 2: prompt column 'prompt' holds int;"),  # its kind, not its value
    (
        "d.jsonl",
        b'{"prompt": "a"}\n{"prompt": "' + b"x" * 1_000_001 + b'"}\n',
        "line 2: the prompt is 1,000,001 characters; a prompt is at most 1,000,000",
    ),  # one character past the bound on a prompt, refused before the tokenizer sees it
    ("d.jsonl", b'{"prompt": "a"}\n{"prompt": "caf\xe9"}\n', "line 2: byte 0xe9 at column 16 is not UTF-8"),  # Latin-1
    ("d.jsonl", b'{"prompt": "a", "answer": "1"}\n\n{"prompt": "b"}\n', "line 3: no column 'answer'"),  # a column missing
    ("d.jsonl", b'{"prompt": "a"}\n{"prompt": [{"role": "user", "content": "b"}]}\n', "line 2: the prompt is chat messages"),
    ("d.jsonl", b'["a", "b"]\n', "line 1: a row is a JSON object of columns, got list"),
    ("d.json", b'[\n {"prompt": "a"},\n {"prompt": "b",}\n]\n', "d.json, line 3: malformed JSON"),  # trailing comma
    ("d.csv", b"prompt,answer\na,1\nb,2,3\n", "d.csv, line 3: 3 fields, the header has 2"),
    ("d.parquet", None, "d.parquet, row 2: prompt column 'prompt' holds null"),
]


@pytest.mark.parametrize("name,content,expected", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_a_bad_file_is_one_line_with_where_and_what(name, content, expected, tmp_path, capsys):
    if content is None:
        _parquet_with_null(tmp_path / name)
    else:
        (tmp_path / name).write_bytes(content)
    doc = {**minimal_recipe(), "data": {"file": name}, "eval": {"enabled": False}, "output_dir": str(tmp_path / "run")}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tmp_path / "r.yaml")]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()  # nothing written


# --- the model's context and TRL's own prompt limit ----------------------------------------------------


@pytest.mark.parametrize(
    "config,context",
    [
        ({"max_position_embeddings": 256}, 256),  # Llama, Qwen, SmolLM and most others
        ({"n_positions": 1024}, 1024),  # GPT-2's name for it
        ({}, None),  # a config that does not say
    ],
)
def test_context_of_a_model_config(config, context):
    import types

    assert data.context_of(types.SimpleNamespace(**config)) == context


@pytest.mark.parametrize("has_field", [True, False])  # TRL before 0.28 truncates prompts; newer TRL has no such key
def test_trl_is_never_left_to_cut_a_prompt(has_field):
    import dataclasses

    fields = [("max_prompt_length", int | None, dataclasses.field(default=512))] if has_field else []
    args = dataclasses.make_dataclass("Args", [("beta", float, dataclasses.field(default=0.0)), *fields])()
    trainer.fit_prompt_limit(args, 47)
    assert getattr(args, "max_prompt_length", None) == (47 if has_field else None)
