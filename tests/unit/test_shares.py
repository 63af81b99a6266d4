"""How an eval's prompts are shared among processes (run/shares.py): each batch keeps its prompts and its place (so
its seed), every prompt is sampled by exactly one process, and in lockstep every process plays as many batches of
as many prompts as the others."""

import pytest

from grpo_ext.run import shares


@pytest.mark.parametrize(
    "total, per_batch, count",
    [
        (5, 2, 1),  # one process: the batches of a plain loop, the last one short
        (5, 2, 2),  # three batches on two processes: the second plays one fewer
        (4, 2, 2),  # as many batches as processes
        (1, 4, 2),  # fewer prompts than a batch holds, and a process with none of its own
        (7, 3, 3),  # three processes, a short last batch
        (2, 1, 4),  # more processes than batches
    ],
)
@pytest.mark.parametrize("lockstep", [False, True])
def test_every_prompt_once_in_its_own_batch(total, per_batch, count, lockstep):
    plans = [shares.plan(total, per_batch, index, count, lockstep) for index in range(count)]
    kept = sorted(row for plan in plans for batch in plan for row in batch.rows[: batch.kept])
    assert kept == list(range(total))
    own = sorted((b.start, b.rows[: b.kept]) for plan in plans for b in plan if b.kept)
    assert own == [(s, tuple(range(s, min(s + per_batch, total)))) for s in range(0, total, per_batch)]
    if lockstep and count > 1:  # TRL gathers each batch's rewards: the same calls, of the same size, everywhere
        assert len({len(plan) for plan in plans}) == 1
        assert {len(b.rows) for plan in plans for b in plan} == {per_batch}
    else:  # nothing added
        assert all(len(b.rows) == b.kept for plan in plans for b in plan)


def test_one_process_plays_the_plain_loop():
    plan = shares.plan(5, 2, lockstep=True)
    assert [(b.start, b.rows, b.kept) for b in plan] == [(0, (0, 1), 2), (2, (2, 3), 2), (4, (4,), 1)]


@pytest.mark.parametrize(
    "total, per_batch, count",
    [
        (5, 2, 2),  # three batches on two processes: the second adds a spare
        (2, 8, 2),  # one batch: the other process makes its one call with a spare
        (4, 2, 2),  # as many batches as processes: no spare
        (7, 3, 3),  # three processes, a short last batch, kept short
        (2, 1, 4),  # more processes than batches: two spares
        (5, 2, 1),  # one process: plan's batches
    ],
)
def test_in_step_adds_spares_and_keeps_each_batch_as_on_one_process(total, per_batch, count):
    plans = [shares.in_step(total, per_batch, index, count) for index in range(count)]
    assert len({len(plan) for plan in plans}) == 1  # under ZeRO-3 every process calls generate() as often
    own = [[b for b in plan if b.kept] for plan in plans]
    assert own == [shares.plan(total, per_batch, index, count) for index in range(count)]  # nothing filled up
    spares = [b for plan in plans for b in plan if not b.kept]
    assert all(b.rows == tuple(range(min(per_batch, total))) for b in spares)
    assert len(spares) == count * len(plans[0]) - len(range(0, total, per_batch))


@pytest.mark.parametrize("total", [1, 2, 3, 7, 8, 9, 40])
@pytest.mark.parametrize("count", [1, 2, 3, 8])
@pytest.mark.parametrize("batch_size, samples", [(64, 8), (8, 8), (4, 8), (64, 1)])
def test_a_batch_holds_at_most_an_even_share_of_the_prompts(total, count, batch_size, samples):
    cap = max(1, batch_size // samples)  # prompts a batch of the recipe's batch_size holds
    per_batch = shares.per_batch(total, batch_size, samples, count)
    even = -(-total // count)
    kept = [sum(b.kept for b in shares.plan(total, per_batch, index, count)) for index in range(count)]
    if cap >= even:  # the recipe's batches would leave a process idle while another samples two shares or more
        assert max(kept) == per_batch == even
    else:  # every process has a batch of the recipe's size: kept as they are
        assert per_batch == cap
    if count == 1:
        assert per_batch == min(cap, total)


def test_docstring_examples():
    import doctest

    result = doctest.testmod(shares)
    assert result.attempted > 0 and result.failed == 0
