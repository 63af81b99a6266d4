"""A user's own data on the tiny model: every file format trains and its columns reach the rewards, eval rows carry
their columns, a missing reward column stops a command before torch loads, and prompts are fitted to the model's
context without ever being cut.

Driven through ``grpo_ext.cli.main`` with recipes written to tmp_path, as a user runs them.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.run import data
from tests.helpers import QUESTIONS, ROOT, jsonl, minimal_recipe, tiny_doc, user

# --- each format, written from the same ten rows ---------------------------------------------------------


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
    doc = {**minimal_recipe(), "data": data_section, "rewards": ["math_accuracy"], "output_dir": str(tmp_path / "run")}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    proc = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "r.yaml")], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.split() == ["2", "False", "False"], proc.stdout + proc.stderr
    assert expected in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


# --- max_prompt_length: the same prompts on every TRL ----------------------------------------------------


def test_max_prompt_length_drops_long_prompts_and_never_cuts(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    from datasets import Dataset

    prompts = ["a", "a " * 30, "b b", "c " * 200]
    lengths = data.prompt_tokens(prompts, tok)
    limit = sorted(lengths)[2]  # keeps the two shortest and the third, drops the longest
    train, evals, longest, notes, shared = data.fit_prompts(Dataset.from_list([{"prompt": p} for p in prompts]), [], limit, tok)
    assert sorted(r["prompt"] for r in train) == sorted(p for p, n in zip(prompts, lengths, strict=True) if n <= limit)
    assert longest == limit and "dropped 1 of 4 training prompts" in notes[1] and notes[0].startswith("prompt tokens: min")
    assert shared == 0 and "alike" not in notes[0]  # "a" and "b b" begin differently
    with pytest.raises(RecipeError, match="every training prompt is longer than 1 tokens"):
        data.fit_prompts(Dataset.from_list([{"prompt": p} for p in prompts[1:]]), [], 1, tok)


def test_the_prompt_note_says_how_many_tokens_every_prompt_begins_with(tiny_model):
    """The shared head of the training prompts (what ``groups.share_prompt`` encodes once per batch, at least) is
    counted over every prompt, across the tokenizer's batches of 512, and named when it is long enough to share."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from grpo_ext.run import prefix_cache

    tok = AutoTokenizer.from_pretrained(tiny_model)
    head = "a " * 80  # 160 tokens with the tiny tokenizer
    prompts = [head + "b " * (i % 7 + 1) + "c" for i in range(600)]
    rows = Dataset.from_list([{"prompt": p} for p in prompts])
    *_, notes, shared = data.fit_prompts(rows, [], None, tok)
    assert shared == prefix_cache.shared_length(data.prompt_ids(prompts, tok))  # as if the 600 were one batch
    assert len(tok(head, add_special_tokens=False)["input_ids"]) <= shared
    assert shared >= prefix_cache.MIN_SHARED
    assert notes[0].endswith(f"over 600 training prompts; the first {shared} alike in every one")
    odd = Dataset.from_list([{"prompt": p} for p in [*prompts, "z " + head]])  # the 601st, in the second batch, differs at once
    assert data.fit_prompts(odd, [], None, tok)[4] == 0


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
