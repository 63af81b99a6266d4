"""No compute on rows that cannot move the weights: the loss's forward and backward passes leave out completions
whose advantage is exactly zero, with the loss and its gradient what TRL computes on the whole micro-batch.

Why it is exact: with no KL term (``beta: 0``) a row's per-token loss is its advantage times a factor (the clipped
ratio, CISPO's or SAPO's weight), so a zero-advantage row adds exactly zero to the loss and to every gradient. What
such a row does change is the normaliser of some loss types, so the loss of the kept rows is rescaled by how that
normaliser counts:

| loss_type | TRL divides by | scale of the kept rows' loss |
|---|---|---|
| grpo, sapo, luspo, dr_grpo | the micro-batch's rows (dr_grpo: rows x max_completion_length) | kept rows / rows |
| bnpo | the micro-batch's completion tokens | kept tokens / tokens |
| dapo, cispo, vespo | the generation batch's tokens (``num_items_in_batch``), not the micro-batch's | 1 |

Anything that couples a row to the others keeps the whole micro-batch: a KL term, an entropy bonus (its gradient
reaches every row), ``top_entropy_quantile`` below 1 (a quantile over the micro-batch's tokens), a router
auxiliary loss, Liger's fused loss (TRL before 1.13), images, and a loss type not in the table. Trailing padding
that only skipped rows used is cut off too: a causal model's logits for earlier tokens do not depend on later
columns. ``SkipZeroAdvantage`` does it at the trainer's loss hook (a ``Behaviour``, ``run/trl_internals.py``).

Several processes: each one's loss is over its own micro-batch, the normalisers of the table count that
micro-batch (``num_items_in_batch`` is the whole batch's, gathered by TRL before the loss), and the gradients are
averaged across processes after the backward pass, so each process rescales its own kept rows as above. Two things
need every process in step. TRL's loss gathers per-row metrics (the clip ratios' min and max), which needs the
same number of rows on each; and every process's loss must run a forward and backward pass through the wrapped
model, or DDP's gradient all-reduce (a sharded engine's gathers too) waits for it forever. So the processes first
share how many rows each keeps (one small gather per micro-batch). A step lasts as long as its slowest process,
so where a row's share of the loss does not depend on the process that computes it (the ``rows`` and ``fixed``
normalisers: every micro-batch holds as many rows, and ``num_items_in_batch`` is the batch's) the kept rows are
dealt out evenly (``balanced``): every process's kept rows are gathered (one more gather, of token ids and
per-token values, ``run/batches.py``), and each computes its even share of them in process order, the last ones
filled up with rows whose advantage is set to zero, which add nothing. Elsewhere (``bnpo``, whose normaliser is
its process's own token count; inputs that are not only rows of tokens) each computes as many rows as the process
that keeps the most, at least one: its kept rows, then its shortest zero-advantage rows. When no process keeps a
row, each computes one such row and the metrics TRL logged from it are dropped, as one process logs none for a
micro-batch it skips whole.
"""

from grpo_ext.run import batches
from grpo_ext.run.trl_internals import Behaviour, Step, entropy_bonus
from grpo_ext.settings import compat

# loss_type -> how its normaliser counts: rows of the micro-batch, its tokens, or a count fixed for the batch
NORMALISER = {
    "grpo": "rows",
    "sapo": "rows",
    "luspo": "rows",
    "dr_grpo": "rows",
    "bnpo": "tokens",
    "dapo": "fixed",
    "cispo": "fixed",
    "vespo": "fixed",
}
# inputs that carry one value per completion token (trimmed with the completions); others with a row axis are rows
PER_TOKEN = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
    "tool_mask",
    "advantages",
)
IMAGES = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes", "num_images", "spatial_shapes")
# what a micro-batch may hold for its kept rows to be dealt out over the processes: its rows' tokens and per-token
# values, and the batch's token count
MOVABLE = (*batches.PROMPT_SIDE, *PER_TOKEN, "num_items_in_batch")


def blocker(trainer) -> str | None:
    """Why this trainer's loss must see every row (a short reason), or None when zero-advantage rows may be left out."""
    args = trainer.args
    if getattr(trainer, "beta", getattr(args, "beta", 0.0)) != 0.0:
        return "beta > 0: the KL term reaches every row"
    if getattr(trainer, "loss_type", getattr(args, "loss_type", None)) not in NORMALISER:
        return f"loss_type {getattr(trainer, 'loss_type', None)!r} is not one whose normaliser is known"
    if entropy_bonus(trainer):
        return "an entropy bonus reaches every row"
    if getattr(args, "top_entropy_quantile", 1.0) < 1.0:
        return "top_entropy_quantile < 1 masks by a quantile over every row"
    if getattr(trainer, "aux_loss_enabled", False) or compat.logprob_path(compat.uses_liger(vars(args))) == "liger":
        return "a router auxiliary loss or Liger's fused loss sees every row"
    return None


def kept_rows(inputs: dict):
    """The rows (a bool tensor) whose advantage is not exactly zero; None when every row is kept or the batch has
    images."""
    if any(inputs.get(key) is not None for key in IMAGES):
        return None
    advantages = inputs["advantages"]
    keep = advantages != 0 if advantages.dim() == 1 else (advantages != 0).any(dim=1)
    return None if bool(keep.all()) else keep


def _mask(inputs: dict):
    mask = inputs["completion_mask"]
    return mask if inputs.get("tool_mask") is None else mask * inputs["tool_mask"]


def padded(inputs: dict, keep, rows: int):
    """``keep`` (a bool tensor) with the shortest rows it leaves out added until it holds ``rows`` rows: what a
    process computes when another keeps more rows than it does (the module's docstring, "Several processes")."""
    lengths = _mask(inputs).sum(dim=1)
    chosen = keep.clone()
    more = rows - int(keep.sum())
    if more > 0:
        left_out = (~keep).nonzero().flatten()
        chosen[left_out[lengths[left_out].argsort(stable=True)[:more]]] = True
    return chosen


def scale(loss_type: str, inputs: dict, keep) -> float:
    """What the kept rows' loss is multiplied by so that it equals the whole micro-batch's (see the table above)."""
    how = NORMALISER[loss_type]
    if how == "fixed":
        return 1.0
    if how == "rows":
        return int(keep.sum()) / keep.numel()
    mask = _mask(inputs)
    return float(mask[keep].sum().clamp(min=1.0)) / float(mask.sum().clamp(min=1.0))


def subset(inputs: dict, keep) -> dict:
    """The micro-batch's inputs for the kept rows, with completion columns past the kept rows' last token cut off."""
    rows = keep.numel()
    mask = _mask(inputs)[keep]
    used = mask.any(dim=0).nonzero()
    width = int(used.max()) + 1 if used.numel() else 1
    full_width = inputs["completion_ids"].size(1)
    out = {}
    for key, value in inputs.items():
        if hasattr(value, "dim") and value.dim() >= 1 and value.size(0) == rows:
            value = value[keep]
            if key in PER_TOKEN and value.dim() == 2 and value.size(1) == full_width:
                value = value[:, :width]
        out[key] = value
    return out


class SkipZeroAdvantage(Behaviour):
    """``groups.skip_zero_advantage``: the loss of a training micro-batch leaves out its zero-advantage rows (scaled
    as the table above says), unless a ``blocker`` keeps them all, logging the share left out as ``skipped_rows``."""

    def __init__(self):
        self.why: str | None = None  # the blocker, decided at the first loss: the settings do not change within a run
        self.decided = False
        self.learned: bool | None = None  # whether any micro-batch kept a row; None before the first

    def on_loss(self, step: Step, model, inputs: dict, loss):
        if not self.decided:
            self.why, self.decided = blocker(step.trainer), True
        if not self.why and step.trainer.accelerator.num_processes > 1:
            return self._in_step(step, inputs, loss)
        keep = None if self.why else kept_rows(inputs)
        self.learned = bool(self.learned) or keep is None or bool(keep.any())
        rows = inputs["advantages"].size(0)
        step.log("skipped_rows", 0.0 if keep is None else 1 - int(keep.sum()) / rows)
        if keep is None:
            return loss(inputs)
        if not bool(keep.any()):
            # nothing to learn from: a zero loss tied to the weights, so the backward pass runs and is empty
            return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
        factor = scale(step.trainer.loss_type, inputs, keep)
        return loss(subset(inputs, keep)) * factor

    def _in_step(self, step: Step, inputs: dict, loss):
        """Several processes: each computes an even share of every process's kept rows (``balanced``), else as many
        rows as the process that keeps the most, at least one."""
        import torch

        rows = inputs["advantages"].size(0)
        keep = kept_rows(inputs)
        kept = rows if keep is None else int(keep.sum())
        counts = step.trainer.accelerator.gather(torch.tensor([kept], device=inputs["advantages"].device))
        most = int(counts.max())
        self.learned = bool(self.learned) or most > 0  # the same on every process: the weights moved on all or none
        even = -(-int(counts.sum()) // counts.numel())
        if 0 < even < most and movable(step.trainer.loss_type, inputs):
            step.log("skipped_rows", 1 - even / rows)
            mine = balanced(step.trainer, inputs, keep, even)
            factor = 1.0 if NORMALISER[step.trainer.loss_type] == "fixed" else even / rows
            return loss(mine) * factor
        computed = min(max(most, 1), rows)
        step.log("skipped_rows", 1 - computed / rows)
        if keep is None or computed == rows:
            return loss(inputs)
        chosen = padded(inputs, keep, computed)
        metrics = step.metrics["train"]
        before = {name: len(entries) for name, entries in metrics.items()}
        result = loss(subset(inputs, chosen)) * scale(step.trainer.loss_type, inputs, chosen)
        if most == 0:  # every process computed a row only to stay in step: TRL's metrics of it describe nothing
            for name in list(metrics):
                if name in before:
                    del metrics[name][before[name] :]
                else:
                    del metrics[name]
        return result


def movable(loss_type: str, inputs: dict) -> bool:
    """Whether a micro-batch's kept rows may be computed on any process: a normaliser that counts them alike
    everywhere, and inputs that are rows of tokens only (what ``batches.join`` pads)."""
    present = {key for key, value in inputs.items() if value is not None}
    return NORMALISER.get(loss_type) in ("rows", "fixed") and present <= set(MOVABLE)


def balanced(trainer, inputs: dict, keep, even: int) -> dict:
    """This process's even share of every process's kept rows, in process order (``even`` rows, the last process's
    filled up with rows whose advantage is set to zero); ``num_items_in_batch`` stays the batch's."""
    import torch

    pad = batches.pad_id(trainer)
    rows = inputs["advantages"].size(0)
    keep = torch.ones(rows, dtype=torch.bool, device=inputs["advantages"].device) if keep is None else keep
    own = {key: value for key, value in inputs.items() if key != "num_items_in_batch"}
    everyone = batches.gathered(trainer, batches.take(own, keep.nonzero().flatten()), pad)
    total, start = batches.rows_of(everyone), trainer.accelerator.process_index * even
    share = batches.take(everyone, torch.arange(min(start, total), min(start + even, total)))
    missing = start + even - max(start, total)
    if missing > 0:  # past the last kept row: rows of this process's own that add nothing
        filler = batches.take(inputs, torch.arange(missing) % rows)
        filler["advantages"] = torch.zeros_like(filler["advantages"])
        filler.pop("num_items_in_batch", None)
        share = batches.join([share, filler], pad) if start < total else filler
    if "num_items_in_batch" in inputs:  # neither part carries one: join would count the share's tokens
        share["num_items_in_batch"] = inputs["num_items_in_batch"]
    return share


def learned_nothing(trainer) -> bool:
    """Whether every row of every micro-batch the trainer's loss saw had zero advantage and was left out, with no
    weight decay: the gradients were exactly zero, so Adam moved no weight and the model is the one it started from.
    False when rows were not left out (``groups.skip_zero_advantage`` off, or a ``blocker``), or nothing trained."""
    skip = next((b for b in trainer.behaviours if isinstance(b, SkipZeroAdvantage)), None)
    return skip is not None and skip.learned is False and not getattr(trainer.args, "weight_decay", 0.0)
