"""A user's own data: every file format trains, eval rows come from the same source with their columns, reward
columns are checked before any model loads, bad files name their line, and max_prompt_length means one thing.

Driven through ``grpo_ext.cli.main`` with recipes written to tmp_path, as a user runs them.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli, recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.run import data, trainer
from grpo_ext.settings import datafiles
from tests.conftest import ROOT, tiny_doc

QUESTIONS = [(f"Reply with the digit {d}.", str(d)) for d in range(10)]


def user(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


def test_docstring_examples():
    import doctest

    result = doctest.testmod(datafiles)
    assert result.attempted > 0 and result.failed == 0


# --- each format, written from the same ten rows ---------------------------------------------------------


def jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_format(kind: str, folder: Path) -> tuple[str, dict]:
    """Write the ten rows in one format; return (data.file, extra data keys)."""
    from datasets import Dataset, DatasetDict

    text = [{"prompt": q, "answer": a} for q, a in QUESTIONS]
    if kind == "jsonl":
        jsonl(folder / "d.jsonl", text)
        return "d.jsonl", {}
    if kind == "jsonl-chat":  # TRL's conversational prompt format
        jsonl(folder / "d.jsonl", [{"prompt": user(q), "answer": a} for q, a in QUESTIONS])
        return "d.jsonl", {}
    if kind == "messages":  # whole conversations: the final assistant turn is not part of the prompt
        rows = [{"messages": [*user(q), {"role": "assistant", "content": a}], "answer": a} for q, a in QUESTIONS]
        jsonl(folder / "d.jsonl", rows)
        return "d.jsonl", {}
    if kind == "json":
        (folder / "d.json").write_text(json.dumps(text, indent=1))
        return "d.json", {}
    if kind == "csv":
        (folder / "d.csv").write_text("question,answer\n" + "".join(f'"{q}",{a}\n' for q, a in QUESTIONS))
        return "d.csv", {"prompt_template": "Question: {question}"}
    if kind == "parquet":
        Dataset.from_list(text).to_parquet(str(folder / "d.parquet"))
        return "d.parquet", {}
    if kind == "saved":
        Dataset.from_list(text).save_to_disk(str(folder / "saved"))
        return "saved", {}
    if kind == "saved-dict":  # a DatasetDict: train on its train split, eval on its test split
        DatasetDict({"train": Dataset.from_list(text[:8]), "test": Dataset.from_list(text[8:])}).save_to_disk(str(folder / "dd"))
        return "dd", {"eval_split": "test"}
    raise ValueError(kind)


RECORDER = """
import json
def rec(completions, answer, **kwargs):
    with open({out!r}, "a") as f:
        f.write(json.dumps([str(a) for a in answer]) + "\\n")
    return [0.0] * len(completions)
"""


def own_recipe(tmp_path: Path, digit_doc: dict, tiny_model: Path, file: str, extra: dict) -> Path:
    (tmp_path / "rec.py").write_text(RECORDER.format(out=str(tmp_path / "answers.jsonl")))
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["data"] = {"file": file, **extra}
    if "eval_split" not in extra:
        doc["data"]["eval_size"] = 2  # two rows held out of the file
    doc["rewards"] = ["rec.py:rec"]
    doc["training"]["max_steps"] = 1
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "kind",
    [
        "jsonl",  # text prompts
        "jsonl-chat",  # conversational prompts, passed through as messages
        "messages",  # full conversations: all but the final assistant turn
        "json",  # one JSON array
        "csv",  # a header row; the prompt built from a template
        "parquet",
        "saved",  # Dataset.save_to_disk
        "saved-dict",  # DatasetDict.save_to_disk with eval_split
    ],
)
def test_each_format_trains_and_its_columns_reach_the_rewards(kind, tmp_path, digit_doc, tiny_model, no_hub):
    file, extra = write_format(kind, tmp_path)
    path = own_recipe(tmp_path, digit_doc, tiny_model, file, extra)
    assert cli.main(["train", str(path)]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["eval_after"]["prompts"] == 2
    calls = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    answers = {a for call in calls for a in call}
    assert answers and answers <= {a for _, a in QUESTIONS}  # the answer column reached the reward in training and eval


def test_held_out_rows_are_never_trained_on_and_follow_the_seed(tmp_path):
    jsonl(tmp_path / "d.jsonl", [{"prompt": q, "answer": a} for q, a in QUESTIONS])
    d = recipe.validate({**_minimal(), "data": {"file": "d.jsonl", "eval_fraction": 0.3}}, tmp_path / "r.yaml")["data"]
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
        recipe.validate({**_minimal(), "data": section}, tmp_path / "r.yaml")


def _minimal() -> dict:
    return {"model": {"name": "smollm2-135m-instruct"}, "rewards": ["digit_exact"], "output_dir": "runs/x"}


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


def test_mapping_eval_prompts_carry_their_columns(tmp_path, digit_doc, tiny_model, no_hub):
    (tmp_path / "rec.py").write_text(RECORDER.format(out=str(tmp_path / "answers.jsonl")))
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["data"] = {
        "prompts": ["Reply with a digit."],
        "eval_prompts": [{"prompt": "Reply with 4.", "answer": "4"}, {"prompt": "Reply with 5.", "answer": "5"}],
    }
    doc["rewards"] = [{"name": "digit_exact"}, {"name": "rec.py:rec", "weight": 0.0}]
    doc["training"]["max_steps"] = 1
    # the training rows have no answer column: refused before any model loads, naming the reward and the rows
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 2
    doc["eval"]["enabled"] = True
    doc["data"]["prompts"] = None
    doc["data"]["file"] = "d.jsonl"
    jsonl(tmp_path / "d.jsonl", [{"prompt": "Reply with a digit.", "answer": "1"}])
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    answers = {a for line in (tmp_path / "answers.jsonl").read_text().splitlines() for a in json.loads(line)}
    assert {"4", "5"} <= answers and answers <= {"1", "4", "5"}


# --- reward columns, checked before any model loads ------------------------------------------------------

CHECK = """
import sys
from grpo_ext import cli
rc = cli.main(["train", sys.argv[1]])
print(rc, "torch" in sys.modules, "transformers" in sys.modules)
"""


@pytest.mark.parametrize(
    "data_section,expected",
    [
        # eval prompts as plain strings carry no answers: the run used to stop at "eval before", 16 s in
        (
            {"file": "d.jsonl", "eval_prompts": ["What is 2+2?"]},
            "rewards[0] (math_accuracy) needs column 'answer', which the eval rows (data.eval_prompts) lack (columns: prompt)",
        ),
        # the training file has no answer column
        ({"file": "q.jsonl", "eval_fraction": 0.5}, "which the training rows (data.file q.jsonl) lack (columns: prompt)"),
        # a template naming a column the file lacks
        (
            {"file": "d.jsonl", "prompt_template": "Q: {question}", "eval_fraction": 0.5},
            "no column 'question' (columns: prompt, answer)",
        ),
    ],
)
def test_a_missing_column_is_exit_2_before_torch_loads(data_section, expected, tmp_path):
    jsonl(tmp_path / "d.jsonl", [{"prompt": q, "answer": a} for q, a in QUESTIONS])
    jsonl(tmp_path / "q.jsonl", [{"prompt": q} for q, _ in QUESTIONS])
    doc = {**_minimal(), "data": data_section, "rewards": ["math_accuracy"], "output_dir": str(tmp_path / "run")}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    proc = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "r.yaml")], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.split() == ["2", "False", "False"], proc.stdout + proc.stderr
    assert expected in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


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
    doc = {**_minimal(), "data": {"file": name}, "eval": {"enabled": False}, "output_dir": str(tmp_path / "run")}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tmp_path / "r.yaml")]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()  # nothing written


# --- max_prompt_length: the same prompts on every TRL ----------------------------------------------------


def test_max_prompt_length_drops_long_prompts_and_never_cuts(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    from datasets import Dataset

    prompts = ["a", "a " * 30, "b b", "c " * 200]
    lengths = data.prompt_tokens(prompts, tok)
    limit = sorted(lengths)[2]  # keeps the two shortest and the third, drops the longest
    train, evals, longest, notes = data.fit_prompts(Dataset.from_list([{"prompt": p} for p in prompts]), [], limit, tok)
    assert sorted(r["prompt"] for r in train) == sorted(p for p, n in zip(prompts, lengths, strict=True) if n <= limit)
    assert longest == limit and "dropped 1 of 4 training prompts" in notes[1] and notes[0].startswith("prompt tokens: min")
    with pytest.raises(RecipeError, match="every training prompt is longer than 1 tokens"):
        data.fit_prompts(Dataset.from_list([{"prompt": p} for p in prompts[1:]]), [], 1, tok)


CONTEXT = [
    # (max_prompt_length, max_completion_length, model context, the error, or None when every prompt fits)
    (None, 8, 256, None),  # 60 tokens and 8 fit in 256
    (None, 8, 40, "2 of 3 training prompts are longer than the 32 tokens that max_completion_length 8 leaves of the model's"),
    (32, 8, 40, None),  # max_prompt_length drops the two that would not fit
    (None, 40, 40, "training.max_completion_length: 40 tokens leave no room for a prompt in the model's context of 40"),
    (None, 8, None, None),  # a model whose config gives no context is not checked
]


@pytest.mark.parametrize("limit,completion,context,error", CONTEXT)
def test_prompt_and_completion_must_fit_the_model_context(limit, completion, context, error, tiny_model):
    from datasets import Dataset
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    prompts = ["a", "a " * 30, "b " * 30]  # 1, 60 and 60 tokens with the tiny tokenizer
    assert data.prompt_tokens(prompts, tok) == [1, 60, 60]
    rows = Dataset.from_list([{"prompt": p} for p in prompts])
    if error is None:
        data.fit_prompts(rows, [], limit, tok, context, completion)
    else:
        with pytest.raises(RecipeError, match=re.escape(error)):
            data.fit_prompts(rows, [], limit, tok, context, completion)


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


def test_a_prompt_past_the_model_context_stops_training_before_step_1(digit_doc, tiny_model, tmp_path, capsys):
    """The tiny model takes 256 positions: prompts of about 240 tokens and 100 completion tokens do not fit."""
    jsonl(tmp_path / "long.jsonl", [{"prompt": "Reply with one digit. " * 40}] * 4)
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["data"] = {"file": "long.jsonl", "eval_prompts": doc["data"]["eval_prompts"]}
    doc["training"]["max_completion_length"] = 100
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(tmp_path / "r.yaml")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "max_completion_length 100 leaves of the model's context of 256" in errors[0], errors
    assert not (tmp_path / "run" / "summary.json").exists()  # stopped before training began


@pytest.mark.parametrize("has_field", [True, False])  # TRL before 0.28 truncates prompts; newer TRL has no such key
def test_trl_is_never_left_to_cut_a_prompt(has_field):
    import dataclasses

    fields = [("max_prompt_length", int | None, dataclasses.field(default=512))] if has_field else []
    args = dataclasses.make_dataclass("Args", [("beta", float, dataclasses.field(default=0.0)), *fields])()
    trainer.fit_prompt_limit(args, 47)
    assert getattr(args, "max_prompt_length", None) == (47 if has_field else None)


def test_real_model_trains_on_a_conversational_jsonl(tmp_path, no_hub):
    """The shipped conversational recipe, with its held-out rows and math_accuracy, on SmolLM2 (one step)."""
    over = [
        "training.max_steps=1",
        "training.max_completion_length=8",
        "eval.samples=1",
        "data.eval_size=2",
        f"output_dir={tmp_path / 'run'}",
    ]
    assert cli.main(["train", str(ROOT / "recipes" / "arith-chat.yaml"), *over]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["eval_before"]["prompts"] == 2 and "math_accuracy" in summary["eval_after"]["rewards"]
