"""An eval's or the pre-flight's prompts shared among the processes of a multi-process run, and what each process
sampled gathered back in prompt order.

The prompts are sampled in batches of ``per_batch``, each seeded by its first prompt's position (``run.sampling``,
``run.rollouts``): batch ``k`` goes to process ``k mod count``, so a batch holds the prompts, and draws under the
seed, that it does on one process. Where the prompts fill fewer batches than there are processes, the batches are
made smaller (``per_batch``) so that every process samples a share: those draws then differ from one process's
(greedy answers do not), and a small eval no longer waits on the main process alone. The trainer's tool loop
gathers each batch's rewards across every process, so there every process plays as many batches as the busiest one,
each of ``per_batch`` prompts (``lockstep``): a short last batch is filled up with its own prompts again, and a
process with a batch fewer plays the first batch once more; what the filling sampled is dropped. Under DeepSpeed
ZeRO-3 every process's generate() steps with the others', so there each process of a single-reply sampling makes as
many calls as the busiest one, its batches as on one process and then spare ones whose samples are dropped
(``in_step``).
"""

from dataclasses import dataclass

from grpo_ext.run import launch


@dataclass(frozen=True)
class Batch:
    """One batch a process samples: the positions of its prompts (``start`` first), of which the first ``kept`` are
    its own and the rest fill it up."""

    start: int
    rows: tuple[int, ...]
    kept: int


def processes() -> tuple[int, int]:
    """(this process's index, how many processes) of the run: (0, 1) without a multi-process launch."""
    if launch.world_size() <= 1:
        return 0, 1
    state = launch.state()
    return state.process_index, state.num_processes


def per_batch(total: int, batch_size: int, samples: int, count: int = 1) -> int:
    """Prompts a batch of ``batch_size`` sequences holds at ``samples`` each, over ``total`` prompts on ``count``
    processes: at most an even share of the prompts, so that no process is left without a batch.

    >>> per_batch(8, 64, 8), per_batch(8, 64, 8, count=2), per_batch(40, 64, 8, count=2), per_batch(3, 64, 8, count=4)
    (8, 4, 8, 1)
    """
    return max(1, min(batch_size // samples, -(-total // count)))


def plan(total: int, per_batch: int, index: int = 0, count: int = 1, lockstep: bool = False) -> list[Batch]:
    """The batches process ``index`` of ``count`` samples of ``total`` prompts, ``per_batch`` at a time.

    >>> [(b.start, b.rows, b.kept) for b in plan(5, 2, index=1, count=2, lockstep=True)]
    [(2, (2, 3), 2), (0, (0, 1), 0)]
    >>> [(b.start, b.rows, b.kept) for b in plan(5, 2, index=0, count=2, lockstep=True)]
    [(0, (0, 1), 2), (4, (4, 4), 1)]
    """
    starts = list(range(0, total, per_batch))
    batches = [Batch(s, tuple(range(s, min(s + per_batch, total))), min(per_batch, total - s)) for s in starts[index::count]]
    if not lockstep or count <= 1 or not starts:
        return batches
    calls = -(-len(starts) // count)
    filled = [Batch(b.start, tuple(b.rows[i % b.kept] for i in range(per_batch)), b.kept) for b in batches]
    spare = Batch(0, tuple(i % min(per_batch, total) for i in range(per_batch)), 0)
    return filled + [spare] * (calls - len(filled))


def in_step(total: int, per_batch: int, index: int = 0, count: int = 1) -> list[Batch]:
    """``plan``'s batches, then spare ones (the first prompts again, ``kept`` 0: dropped) until process ``index`` makes
    as many calls as the busiest process: under DeepSpeed ZeRO-3 every process's generate() steps with the others'
    (``run.sampling``). Unlike ``lockstep``, no batch is filled up: each samples what it does on one process.

    >>> [(b.start, b.rows, b.kept) for b in in_step(5, 2, index=1, count=2)]
    [(2, (2, 3), 2), (0, (0, 1), 0)]
    >>> [(b.start, b.rows, b.kept) for b in in_step(5, 2, index=0, count=2)]
    [(0, (0, 1), 2), (4, (4,), 1)]
    """
    batches = plan(total, per_batch, index, count)
    calls = len(plan(total, per_batch, 0, count))  # process 0 has the most batches
    return batches + [Batch(0, tuple(range(min(per_batch, total))), 0)] * (calls - len(batches))


def gather(mine: list) -> list:
    """Every process's items (``mine`` here), in process order, on every process; ``mine`` itself on one process."""
    if launch.world_size() <= 1:
        return mine
    from accelerate.utils import gather_object

    return list(gather_object(mine))
