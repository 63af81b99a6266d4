"""benchmarks/tool_generation.py end to end on a tiny ChatML model: single replies, the tool loop (its batches'
shared prompt prefix encoded once), the tool loop encoding every prompt whole, and with TRL's continuous batching,
greedy."""

import pytest

from tests.helpers import bench


@pytest.fixture(scope="module")
def tiny_chatml(tmp_path_factory):
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)  # room for the tool schema


def test_greedy_round_on_a_tiny_model(tiny_chatml):
    small = "'training.transformers_continuous_batching_config={max_memory_percent: 0.02}'"  # TRL's 0.5: half the RAM
    cb = f"cb: training.use_transformers_continuous_batching=true {small}"
    sizes = ("--prompts", "2", "--samples", "2")
    whole = "whole: groups.share_prompt=false"
    proc = bench(
        "tool_generation.py", *sizes, "--set", f"model.name={tiny_chatml}", "--greedy", "--candidate", whole, "--candidate", cb
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    # one run each, in order, each its own process
    runs = [line.split()[:3] for line in lines if line.startswith("round ")]
    assert runs == [["round", "1", label] for label in ("single", "tools", "whole", "cb")]
    assert "2 prompts x 2 samples, temperature 0; medians of 1 runs" in lines
    rows = {line[:16].strip(): line[16:].split() for line in lines if line[:16].strip() in ("prompt tok", "padding tok")}
    single, tools, unshared, batched = (int(x) for x in rows["prompt tok"][:4])
    # the tool schema and the examples in every prompt, encoded once a batch by the tool loop as the recipe runs it,
    # once a row without share_prompt and under continuous batching (which takes the same prompts either way)
    assert 0 < single < tools < unshared == batched
    assert int(rows["padding tok"][3]) == 0  # continuous batching packs the prompts: no padding
    assert float(rows["prompt tok"][4]) == pytest.approx(tools / single, abs=0.01)  # the ratio to single replies
    # a random tiny model writes no call, so each conversation is one reply: the same under greedy decoding every way
    assert lines[-3:] == [
        "greedy: whole wrote the same conversation as tools in 4 of 4",
        "greedy: cb wrote the same conversation as tools in 4 of 4",
        "greedy: cb wrote the same conversation as whole in 4 of 4",
    ]


def test_a_candidate_without_overrides_is_refused():
    proc = bench("tool_generation.py", "--candidate", "cb")
    assert proc.returncode == 2
    assert "--candidate 'cb': write it as 'LABEL: key=value [key=value ...]'" in proc.stderr
