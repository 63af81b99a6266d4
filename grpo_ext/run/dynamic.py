"""Dynamic sampling (DAPO, Yu et al. 2025): a generation batch trains only on groups whose rewards have spread.

A group in which every reward gives every completion the same score has zero advantage: it costs generation and
the loss's passes and teaches nothing. With ``groups.dynamic_sampling`` such groups are dropped after scoring, and
groups for prompts drawn afresh from the training set take their place, generated and scored the same way, for at
most ``groups.max_extra_rounds`` extra rounds per generation batch, and no more once a round brings no group with
spread (the prompts left are all solved, or all failed, alike). The batch then has as many groups as before, all
informative; when the rounds run out first, dropped groups fill what is left with their advantages set to exactly
zero, so they still move nothing (and row skipping leaves them out of the loss).

Each extra round scores its groups on their own, as TRL scores a generation batch: a group's advantage is its
rewards against its own mean, so joining groups from two rounds changes no kept group's advantage (with
``scale_rewards: batch`` each round's spread scales its own groups). ``num_items_in_batch``, the token count the
``dapo``, ``cispo`` and ``vespo`` losses divide by, is counted again on the joined batch.

Several processes: TRL scores the groups of every process together (a group's completions may lie on two
processes) and each keeps its slice of the rows, and each generation round is collective (TRL gathers every
process's rewards), so every process must run the same rounds with the same number of rows. ``on_rewards`` sees
every process's scores, so which groups are flat is known alike on each; the processes then share their generation
batches (one gather of every process's rows), draw the same new prompts (the same seeded generator) and each
generates its own contiguous share of them (``share``, rounded so that it splits evenly), share the scored rounds
the same way, and so decide the same rounds and keep the same groups. Each then keeps its own slice of the joined
batch, as many rows as it started with, and the metrics are the whole batch's, equal on every process (the extra
rounds' seconds: the slowest process's). ``num_items_in_batch`` is counted on every process's rows, as TRL counts it.

``DynamicSampling`` does it at the trainer's batch hook (a ``Behaviour``, ``run/trl_internals.py``).
"""

import math
import time

from grpo_ext.run.batches import gathered, join, pad_id, rows_of, take
from grpo_ext.run.trl_internals import Behaviour, Step


def flat_groups(rewards_per_func, group: int):
    """One bool per group: every reward gave every completion of the group the same score (None scores, NaN,
    count as the same).

    >>> import torch
    >>> flat_groups(torch.tensor([[1.0], [1.0], [0.0], [1.0]]), 2).tolist()
    [True, False]
    """
    r = rewards_per_func.view(-1, group, rewards_per_func.size(1))
    first = r[:, :1]
    same = (r == first) | (r.isnan() & first.isnan())
    return same.all(dim=2).all(dim=1)


IMAGES = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes", "num_images")


def blocker(trainer, batch: dict | None = None) -> str | None:
    """Why this trainer's generation batches must stay as TRL drew them (a short reason), or None."""
    data = trainer.train_dataset
    if not (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
        return "a streamed training set: new prompts cannot be drawn from it"
    if batch is not None and any(batch.get(key) is not None for key in IMAGES):
        return "images: their tensors are not joined"
    return None


def refill(batch: dict, flat, group: int, more, max_rounds: int, pad_id: int) -> tuple[dict, dict]:
    """The batch with its flat groups replaced by informative groups from up to ``max_rounds`` calls of
    ``more(groups)``, which returns (a scored batch of that many new groups, its flat groups); the batch as it is when
    no group is flat. Returns the batch and what happened: the share of groups dropped, extra rounds, their seconds,
    and the share filled with flat groups."""
    import torch

    if not bool(flat.any()):
        return batch, {"groups/dropped": 0.0, "groups/extra_rounds": 0.0, "groups/extra_seconds": 0.0, "groups/flat_kept": 0.0}
    groups = flat.numel()
    informative = [take(batch, _group_rows(torch.nonzero(~flat).flatten(), group))] if bool((~flat).any()) else []
    have = int((~flat).sum())
    spare = take(batch, _group_rows(torch.nonzero(flat).flatten(), group))
    rounds, start = 0, time.perf_counter()
    while have < groups and rounds < max_rounds:
        rounds += 1
        new, new_flat = more(to_draw(groups - have, float(flat.float().mean()), groups))
        keep = torch.nonzero(~new_flat).flatten()[: groups - have]
        if not keep.numel():  # a whole round without spread: the prompts left are solved (or hopeless) alike; stop
            break
        informative.append(take(new, _group_rows(keep, group)))
        have += keep.numel()
    filled = groups - have
    if filled:
        padding = take(spare, torch.arange(filled * group))
        padding["advantages"] = torch.zeros_like(padding["advantages"])  # flat: nothing to learn, exactly
        informative.append(padding)
    stats = {
        "groups/dropped": float(flat.float().mean()),
        "groups/extra_rounds": float(rounds),
        "groups/extra_seconds": time.perf_counter() - start if rounds else 0.0,
        "groups/flat_kept": filled / groups,
    }
    return join(informative, pad_id), stats


def to_draw(missing: int, flat_share: float, groups: int) -> int:
    """How many new groups to generate for ``missing`` informative ones, when ``flat_share`` of the batch's were
    flat: enough that, at that share, they are expected to suffice, and never more than a batch.

    >>> to_draw(2, 0.5, 8), to_draw(3, 0.9, 8), to_draw(1, 0.0, 8)
    (4, 8, 1)
    """
    return min(groups, max(missing, -(-missing * 100 // max(1, round(100 * (1 - flat_share))))))


def evenly(groups: int, group: int, processes: int) -> int:
    """``groups`` rounded up so that their completions split evenly over the processes (each generates its share).

    >>> evenly(3, 4, 2), evenly(3, 2, 4), evenly(3, 4, 1), evenly(4, 8, 3)
    (3, 4, 3, 6)
    """
    step = processes // math.gcd(group, processes)
    return -(-groups // step) * step


def share(rows: list, process: int, processes: int) -> list:
    """A process's contiguous share of rows drawn alike on every process, as TRL's sampler hands out a batch.

    >>> share(list("aabbcc"), 1, 2), share(list("aabbcc"), 0, 3)
    (['b', 'c', 'c'], ['a', 'a'])
    """
    each = len(rows) // processes
    return rows[process * each : (process + 1) * each]


def _group_rows(groups, group: int):
    """The row indices of the given groups, ``group`` completions each."""
    import torch

    return (groups.unsqueeze(1) * group + torch.arange(group)).flatten()


class DynamicSampling(Behaviour):
    """``groups.dynamic_sampling``: a training generation batch's flat groups replaced by informative ones from up to
    ``max_rounds`` extra rounds (``refill``), logging ``groups/*``; the new prompts are drawn by a generator of its
    own, so the training data's order stays as it was."""

    def __init__(self, max_rounds: int):
        self.max_rounds = max_rounds
        self.scores = None  # the last scored batch's rewards, every process's rows: read by the refill
        self.draws = None  # the generator of the new prompts, seeded at the first refill

    def on_rewards(self, step: Step, completions: list, completion_ids: list, scores) -> None:
        self.scores = scores

    def on_batch(self, step: Step, batch: dict) -> dict:
        import torch

        trainer = step.trainer
        if not step.training or blocker(trainer, batch):
            return batch
        group = trainer.num_generations
        if self.draws is None:
            self.draws = torch.Generator().manual_seed(trainer.args.seed + 1)
        processes, process = trainer.accelerator.num_processes, trainer.accelerator.process_index
        pad = pad_id(trainer)

        def more(groups: int):
            # the same draws on every process (one generator, the same calls); each generates its own share
            groups = evenly(groups, group, processes)
            picks = torch.randint(len(trainer.train_dataset), (groups,), generator=self.draws).tolist()
            rows = [dict(trainer.train_dataset[i]) for i in picks for _ in range(group)]
            new = step.generate(share(rows, process, processes))
            return (new if processes == 1 else gathered(trainer, new, pad)), flat_groups(self.scores, group)

        flat = flat_groups(self.scores, group)  # every process's groups: the same on each
        if processes == 1 or not bool(flat.any()):
            batch, stats = refill(batch, flat, group, more, self.max_rounds, pad)
        else:
            rows = rows_of(batch)
            whole, stats = refill(gathered(trainer, batch, pad), flat, group, more, self.max_rounds, pad)
            batch = take(whole, torch.arange(process * rows, (process + 1) * rows))
            seconds = torch.tensor([stats["groups/extra_seconds"]], device=batch["advantages"].device)
            stats["groups/extra_seconds"] = float(trainer.accelerator.gather(seconds).max())
        for key, value in stats.items():
            step.log(key, value)
        return batch
