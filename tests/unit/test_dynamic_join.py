"""Dynamic sampling's bookkeeping on hand-made scored batches (run/dynamic.py): which groups are flat, how two
rounds' batches are joined (prompts padded on the left, completions on the right, the token count redone), and what
a refill keeps when the extra rounds run out."""

import doctest

import pytest
import torch

from grpo_ext.run import batches, dynamic

PAD = 9


def scored(prompts: list[list[int]], completions: list[list[int]], advantages: list[float]) -> dict:
    """A scored batch as TRL returns it: left-padded prompts, right-padded completions, one advantage a row."""
    pw, cw = max(map(len, prompts)), max(map(len, completions))
    return {
        "prompt_ids": torch.tensor([[PAD] * (pw - len(p)) + p for p in prompts]),
        "prompt_mask": torch.tensor([[0] * (pw - len(p)) + [1] * len(p) for p in prompts]),
        "completion_ids": torch.tensor([c + [PAD] * (cw - len(c)) for c in completions]),
        "completion_mask": torch.tensor([[1] * len(c) + [0] * (cw - len(c)) for c in completions]),
        "advantages": torch.tensor(advantages),
        "num_items_in_batch": torch.tensor(sum(map(len, completions))),
    }


FLAT = [
    # (rewards per completion and reward, group size, flat groups)
    ([[1.0], [1.0], [0.0], [1.0]], 2, [True, False]),
    ([[1.0, 0.0], [1.0, 0.5]], 2, [False]),  # the second reward has spread: not flat
    ([[float("nan")], [float("nan")]], 2, [True]),  # every score None: nothing to learn
    ([[0.3], [0.1 + 0.2]], 2, [True]),  # the same float32, as TRL holds rewards: its std is 0 too
    ([[0.3], [0.3001]], 2, [False]),  # a spread, however small, is a spread
]


@pytest.mark.parametrize("rewards,group,expected", FLAT)
def test_flat_groups(rewards, group, expected):
    assert dynamic.flat_groups(torch.tensor(rewards), group).tolist() == expected


def test_join_pads_each_side_and_recounts_tokens():
    a = scored([[1, 2]], [[5]], [0.5])
    b = scored([[3]], [[6, 7, 8]], [-0.5])
    joined = batches.join([a, b], PAD)
    assert joined["prompt_ids"].tolist() == [[1, 2], [PAD, 3]]  # prompts end where the completion starts
    assert joined["prompt_mask"].tolist() == [[1, 1], [0, 1]]
    assert joined["completion_ids"].tolist() == [[5, PAD, PAD], [6, 7, 8]]
    assert joined["completion_mask"].tolist() == [[1, 0, 0], [1, 1, 1]]
    assert joined["advantages"].tolist() == [0.5, -0.5]
    assert int(joined["num_items_in_batch"]) == 4  # 1 + 3 completion tokens


def test_refill_keeps_informative_groups_and_zeroes_the_filler():
    # two groups of 2: the first flat (advantages 0.001 of float noise), the second informative
    batch = scored([[1], [1], [2], [2]], [[5], [5], [6], [7]], [0.001, 0.001, 1.0, -1.0])
    flat = torch.tensor([True, False])
    asked = []

    def more(groups):  # every new group flat: the prompts left are solved alike
        asked.append(groups)
        new = scored([[3]] * 2 * groups, [[8]] * 2 * groups, [0.0, 0.0] * groups)
        return new, torch.tensor([True] * groups)

    joined, stats = dynamic.refill(batch, flat, 2, more, 2, PAD)
    assert asked == [2]  # half the batch was flat: two new groups drawn for the one missing; none had spread, so no more
    assert joined["prompt_ids"].flatten().tolist() == [2, 2, 1, 1]  # the informative group first, then the filler
    assert joined["advantages"].tolist() == [1.0, -1.0, 0.0, 0.0]  # the flat filler moves nothing, exactly
    assert stats == {
        "groups/dropped": 0.5,
        "groups/extra_rounds": 1.0,
        "groups/extra_seconds": stats["groups/extra_seconds"],
        "groups/flat_kept": 0.5,
    }


def test_refill_stops_when_the_batch_is_full():
    batch = scored([[1], [1], [2], [2]], [[5], [5], [6], [7]], [0.0, 0.0, 1.0, -1.0])

    def more(groups):
        new = scored([[4]] * 2 * groups, [[8], [9]] * groups, [0.5, -0.5] * groups)
        return new, torch.tensor([False] * groups)

    joined, stats = dynamic.refill(batch, torch.tensor([True, False]), 2, more, 5, PAD)
    assert stats["groups/extra_rounds"] == 1 and stats["groups/flat_kept"] == 0
    assert joined["prompt_ids"].flatten().tolist() == [2, 2, 4, 4]  # as many groups as before: one new kept
    assert int(joined["num_items_in_batch"]) == 4


def test_doctests():
    assert doctest.testmod(dynamic).failed == 0
