"""What a user meets in the first hour, where no model loads: length rewards scored in tokens, gradient
checkpointing chosen by hardware and size, every problem in one round, paths in overrides (the tiny-model runs:
tests/integration/test_first_hour.py)."""

from pathlib import Path

import pytest

from tests.helpers import run_cli, write

# --- 3. eval gives length rewards the token counts training gives them -----------------------------------------


def test_defect_3_eval_scores_length_rewards_in_tokens():
    from grpo_ext.results import scoring
    from grpo_ext.rewards import build, guard_all

    entry = {"name": "overlong_penalty", "args": {"max_length": 16, "soft_margin": 4}, "on_error": "fail", "timeout": None}
    funcs = guard_all([entry], [build(entry["name"], entry["args"], Path.cwd(), "rewards[0]")])
    text = "a completion of far more than sixteen characters"  # 5 tokens, 48 characters
    result = scoring.score(
        [{"prompt": "p"}], [[text]], funcs, chat=False, pass_threshold=1.0, completion_ids=[[[11, 12, 13, 14, 15]]]
    )
    assert result["rewards"]["overlong_penalty"]["mean"] == 0.0  # 5 tokens are under 16 - 4 (in characters: -1.0)
    assert result["mean_length"] == 5  # the tokens TRL's completions/mean_length counts


# --- friction -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "has_cuda, params, expected",
    [
        (False, 135_000_000, False),  # a CPU: recomputation costs more time than the memory it saves
        (False, 8_000_000_000, False),  # whatever the size
        (True, 135_000_000, False),  # a small model on a GPU: its activations fit
        (True, 1_500_000_000, True),  # a large one: save the memory
        (True, None, True),  # size unknown on a GPU: TRL's choice, on
    ],
)
def test_gradient_checkpointing_chosen_by_hardware_and_size(has_cuda, params, expected):
    from grpo_ext.run import hardware

    assert hardware.checkpointing_choice(has_cuda, params)[0] is expected


def test_every_problem_in_one_round(tmp_path, capsys):
    doc = {
        "model": {"name": "smollm2-135m-instruct"},
        "data": {"prompts": []},
        "rewards": ["digit_exat"],
        "trainig": {},
        "output_dir": "runs/x",
    }
    assert run_cli(["validate", str(write(tmp_path / "r.yaml", doc))]) == 2
    err = capsys.readouterr().err
    for part in (
        "trainig: unknown key; did you mean 'training'?",
        "data.prompts: is empty",
        "rewards[0].name: unknown reward 'digit_exat'",
    ):
        assert part in err


@pytest.mark.parametrize(
    "override, expected",
    [
        ("data.file=data/x.jsonl", "{cwd}/data/x.jsonl"),  # relative to where it was typed, not to the recipe
        ("data.file=/abs/x.jsonl", "/abs/x.jsonl"),  # an absolute path stays
        ("model.name=./models/tiny", "{cwd}/models/tiny"),  # a local folder
        ("model.name=org/name", "org/name"),  # a hub id is no path
        ("model.name=smollm2-135m-instruct", "smollm2-135m-instruct"),  # nor an alias
        ("rewards.0.name=my.py:fn", "{cwd}/my.py:fn"),  # a reward file
        ("rewards.0=my.py:fn", "{cwd}/my.py:fn"),
        ("rewards.0.name=pkg.mod:fn", "pkg.mod:fn"),  # a module path is no file
        ("training.output_dir=x", "x"),  # not a path key
    ],
)
def test_paths_in_overrides_are_relative_to_where_they_were_typed(override, expected, tmp_path, monkeypatch):
    from grpo_ext.recipe import apply_overrides, parse_override

    monkeypatch.chdir(tmp_path)
    keys, _ = parse_override(override)
    doc = apply_overrides({"data": {}, "model": {}, "rewards": ["digit_exact"], "training": {}}, [override])
    node = doc
    for key in keys:
        node = node[int(key)] if isinstance(node, list) else node[key]
    value = node["name"] if isinstance(node, dict) else node
    assert value == expected.format(cwd=tmp_path.resolve())
