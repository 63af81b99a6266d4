"""The one module that names TRL's private internals, and the trainer that composes grpo_ext's GRPO behaviours.

GRPOTrainer has no public hook for what grpo_ext adds to a GRPO step (row skipping, dynamic sampling, counting the
tool results TRL drops, capturing the eval's conversations, handing freed memory back), so the trainer here
(``trainer_class``) overrides two of its private methods and ``compute_loss``, and calls each ``Behaviour`` of its
list at its hook; ``training_step`` (public too) ends an optimizer step's shared prompt pass (``step_shared``).
Every other module reaches TRL's internals through this one; ``tests/unit/test_trl_internals.py`` scans the
package, the tests, the benchmarks and the scripts for a private name of TRL's used anywhere else, and checks that
this table lists each one used here. A TRL release that moves one of them changes this module only
(CONTRIBUTING.md, "Adding a TRL version").

| GRPOTrainer's | what grpo_ext uses it for | read on TRL |
|---|---|---|
| `_calculate_rewards` | overridden: each behaviour's ``on_rewards`` sees its scores | 0.19.1 to 1.16.0 (1) |
| `_generate_and_score_completions` | overridden: ``on_batch``; ``Step.generate``, ``sample_batch`` | 0.19.1 to 1.16.0 (1) |
| `_metrics` | ``Step.log``, ``Step.tally``, ``logged``, ``forget_eval_metrics`` | 0.19.1 to 1.16.0 (2) |
| `_logs` | ``sampled``: the last generation batch, for ``completions.jsonl`` | 0.20.0 to 1.16.0 (3) |
| `_textual_logs` | ``sampled`` on TRL 0.19 | 0.19.1 (0.20.0 renamed it) |
| `_entropy_bonus_enabled` | ``entropy_bonus``: row skipping keeps every row when there is one | 1.8.0 to 1.16.0 (4) |
| `_generate_single_turn` | overridden: ``prefix_shared``, ``bf16_decoding``; ``scripted_replies``: tests | 1.0.0 to 1.16.0 (5) |
| `_tool_call_loop` | not called: ``rewards.tool_use.unanswered`` counts what it dropped | 0.26.2 to 1.16.0 (6) |
| `_get_per_token_logps_and_entropies` | overridden: ``prompt_shared``; ``token_logps``; ``STEP_PHASES`` | 0.20.0 to 1.16.0 (7) |
| `_compute_loss` | ``STEP_PHASES``, as above | 0.19.1 to 1.16.0 |
| `trl.trainer.utils._use_triton` | swapped while the loss pass runs: ``_scored_positions_only`` | 1.16.0 (8) |

"Read on" a range: the source of each release in it that was read, which is every ``MATRIX`` row of
``scripts/compat_matrix.py`` (0.19.1, 0.20.0, 0.22.2, 0.24.0, 0.26.2, 0.28.0, 0.29.1, 1.0.0, 1.8.0, 1.16.0) and
0.21.0, 0.23.1, 0.25.1, 0.27.2, 1.4.0, 1.9.0, 1.11.0, 1.13.0, 1.14.0 and 1.15.0.

1. The same on each: ``_calculate_rewards(inputs, prompts, completions, completion_ids_list)`` returns every
   process's rows gathered, a column a reward function, NaN for a None score; ``_generate_and_score_completions(inputs)``
   takes dataset rows, each prompt once per completion, and returns the scored batch.
2. ``{"train": defaultdict(list), "eval": defaultdict(list)}`` on each; TRL logs the mean of a name's entries at the
   step, then clears them.
3. Up to 1.14 the prompt and the completion are decoded text; from 1.15 what the data held and the model returned.
4. Before 1.8.0 there is none (read on 0.19.1, 0.22.2, 0.26.2, 0.29.1 and 1.0.0 to 1.7.0), nor an entropy bonus:
   read as off.
5. ``(prompt_ids, images, multimodal_fields)``, returning ``(completion_ids, logprobs)``, from 1.0.0; 1.11.0 to 1.14.0
   add ``has_tool_images``, 1.15.0 and 1.16.0 ``num_generations`` too (both passed over). 0.29.1 returns three values,
   and 0.24.0 to 0.28.0 take prompts and return four: ``scripted_replies`` refuses a TRL before 1.0. Without vLLM or
   continuous batching, each of 1.0.0 to 1.16.0 left-pads the prompts and calls the unwrapped model's
   ``generate(input_ids=..., attention_mask=..., generation_config=...)``, keeping what follows the prompts' width:
   the call ``prefix_shared`` reshapes (other arguments, images for one, leave it TRL's).
6. Read on 0.26.2, 0.27.2, 0.28.0, 0.29.1, 1.0.0 to 1.4.0, 1.8.0, 1.9.0, 1.11.0, 1.13.0 to 1.16.0. From 1.2.0 it rolls
   back results that would pass ``max_completion_length`` (before, only those past the model's context, cut there);
   it stops at ``max_tool_calling_iterations`` from 0.27.0.
7. ``(model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, ...)`` on each, the
   logits divided by the sampling temperature; it returns ``(logps, entropies)``, and from 1.8.0 ``(logps, entropies,
   aux_loss)`` (read on 0.20.0, 0.21.0, 0.22.2, 0.24.0, 0.26.2, 0.28.0, 0.29.1, 1.0.0, 1.8.0 and 1.16.0). 0.19.1 has
   ``_get_per_token_logps`` in its place, and ``algorithm: tic_grpo`` is refused there. TRL's own sequence-mean loss
   (``grpo``) divides a training micro-batch's loss by ``current_gradient_accumulation_steps`` from 0.22.2 (0.20.0
   and 0.21.0 leave it to the Trainer's loop): ``accumulation_divisor``. Each runs the model on the rows (left-padded
   prompt, then completion) in chunks of ``batch_size``, and the model's body (``base_model``) computes the hidden
   states its head scores, through the model's own forward with ``logits_to_keep`` (read on 0.20.0, 1.0.0 and
   1.8.0) or, on 1.16.0, the fused head TRL adds (``add_fused_lm_head``): the call ``prompt_shared`` reshapes.

8. ``trl.trainer.utils`` imports it from ``trl.kernels.chunked_logprob`` and calls it once per call of the fused
   head, to choose between projecting the scored positions only and every position; the kernels call their own
   module's binding, which stays as it is. 0.20.0, 1.0.0 and 1.8.0 have no fused head and no such name (read):
   where the name is absent nothing is swapped.

TRL is imported inside the functions that need it, so that this module loads without torch.
"""

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from grpo_ext.core.errors import RunError
from grpo_ext.run import decoding, prefix_cache
from grpo_ext.settings import compat

# GRPOTrainer's methods the trainer below overrides to call the behaviours' hooks (its third is compute_loss, public).
HOOKED = ("_calculate_rewards", "_generate_and_score_completions")

# The methods that make up a GRPO step, by the phase a profile names them (benchmarks/contestants.py times them).
STEP_PHASES = [
    ("_generate_single_turn", "generation"),
    ("_calculate_rewards", "rewards"),
    ("_get_per_token_logps_and_entropies", "forward"),
    ("_compute_loss", "loss"),
]


@dataclass
class Step:
    """What a behaviour reaches of the trainer at a hook: the trainer (its public attributes), the step's metrics
    (TRL's lists, one a mode and a name), and TRL's generation of more rows."""

    trainer: Any
    metrics: dict  # "train" | "eval" -> metric name -> the step's entries; TRL logs their mean
    generate: Callable[[list[dict]], dict] | None = None  # TRL's generation and scoring of rows, see Trainer below

    @property
    def training(self) -> bool:
        """Whether the trainer is training (else it samples for an eval or the pre-flight)."""
        return self.trainer.model.training

    def entries(self, name: str) -> list:
        """The step's entries of a metric, in training's metrics or the eval's."""
        return self.metrics["train" if self.training else "eval"][name]

    def log(self, name: str, value: float) -> None:
        """One more entry of a metric: TRL logs the mean of a step's entries."""
        self.entries(name).append(value)

    def tally(self, name: str, value: float) -> None:
        """Add ``value`` to a count over the whole step: one entry, summed into, since TRL would average several."""
        entries = self.entries(name)
        entries[:] = [(entries[0] if entries else 0) + value]


class Behaviour(Protocol):
    """A GRPO behaviour TRL lacks: the trainer calls each hook of each behaviour in its list, in the list's order
    (``make``). A behaviour subclasses this and overrides the hooks it needs; the others pass through. An ``optional``
    one changes no result (it saves memory or time): on a TRL without the hooked methods it is left out, not refused."""

    optional = False

    def on_rewards(self, step: Step, completions: list, completion_ids: list, scores) -> None:
        """After TRL scored a generation batch, in training and in eval sampling, and for each batch of
        ``Step.generate``: ``completions`` and ``completion_ids`` are this process's, ``scores`` every process's rows
        (a tensor, rows x reward functions, NaN for a None score)."""
        return None  # a hook a behaviour need not override: a protocol method with no body would be abstract

    def on_batch(self, step: Step, batch: dict) -> dict:
        """The generation batch TRL built (scored, advantages computed), in training and in eval sampling: returns
        the batch to go on with, this one or one with the same keys."""
        return batch

    def on_loss(self, step: Step, model, inputs: dict, loss: Callable[[dict], Any]):
        """The loss of a training micro-batch: ``loss(inputs)`` is TRL's (through the behaviours after this one in
        the list); returns the loss to train on."""
        return loss(inputs)


@functools.cache
def trainer_class():
    """GRPOTrainer with the behaviours of ``trainer.behaviours`` called at their hooks (imports TRL)."""
    from trl import GRPOTrainer

    class Trainer(GRPOTrainer):
        behaviours: list | tuple = ()  # each instance's own list, set by ``make``; none while TRL's __init__ runs
        share_prefix = True  # set by ``make``: see prefix_shared and prompt_shared
        step_heads: prefix_cache.StepHeads | None = None  # set by ``make``: the step's prefix passes (step_shared)
        batch_prefix: list[int] | None = None  # the prompt tokens every row of the last training batch begins with
        in_training_step = False  # the Trainer's training_step is running: a micro-batch whose backward it runs
        cast_once = False  # set by make_trainer: generate() casts each weight once (``decoding.bf16_decoding``)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            def trl(batch):
                return super(Trainer, self).compute_loss(model, batch, return_outputs, num_items_in_batch)

            if return_outputs or not self.model.training:
                return trl(inputs)
            step, loss = _step(self), trl
            for behaviour in reversed(self.behaviours):
                loss = functools.partial(_hooked_loss, behaviour, step, model, loss)
            return loss(inputs)

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            scores = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            step = _step(self)
            for behaviour in list(self.behaviours):
                behaviour.on_rewards(step, completions, completion_ids_list, scores)
            return scores

        def _generate_single_turn(self, *args, **kwargs):
            model = prefix_shared(self)
            with contextlib.ExitStack() as stack:
                if self.cast_once:
                    stack.enter_context(decoding.bf16_decoding(self.model, self.accelerator.device.type))
                if model is not None:
                    stack.enter_context(prefix_cache.sharing(model))
                return super()._generate_single_turn(*args, **kwargs)

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
            trl = super()._get_per_token_logps_and_entropies
            heads = step_shared(self, model)
            found = prompt_shared(self, model, input_ids, attention_mask, logits_to_keep, args, kwargs, heads is not None)
            with contextlib.ExitStack() as stack:
                if self.share_prefix:
                    stack.enter_context(_scored_positions_only())
                if found is not None:
                    stack.enter_context(prefix_cache.sharing_prompt(*found, heads=heads))
                return trl(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)

        def training_step(self, *args, **kwargs):
            self.in_training_step = True
            try:
                loss = super().training_step(*args, **kwargs)
            except BaseException:
                if self.step_heads is not None:
                    self.step_heads.clear()
                raise
            finally:
                self.in_training_step = False
            if self.step_heads is not None and self.accelerator.sync_gradients:  # the step's last micro-batch
                self.step_heads.flush()  # before the Trainer clips the gradients and steps the optimizer
            return loss

        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            step = _step(self)
            for behaviour in list(self.behaviours):
                batch = behaviour.on_batch(step, batch)
            if self.model.training:  # the rows the step trains on, as the behaviours left them
                self.batch_prefix = _batch_prefix(batch)
            return batch

    return Trainer


def sharing(trainer, shared: int) -> str:
    """The run's line on ``groups.share_prompt`` for training prompts that all begin with the same ``shared``
    tokens: where the trainer encodes them once per batch, and why not where it does not."""
    generation, loss = _generation_blocker(trainer), _loss_blocker(trainer)
    if generation and loss:
        why = generation if generation == loss else f"{generation}; in the loss pass: {loss}"
        return f"groups: each row's prompt is encoded whole ({why})"
    line = f"groups: the {shared} prompt tokens every training prompt begins with are encoded once per batch"
    if generation:
        return f"{line} in the loss pass; generation encodes them for each row ({generation})"
    if loss:
        return f"{line} in generation; the loss pass encodes them for each row ({loss})"
    return f"{line}, in generation and in the loss pass"


def _generation_blocker(trainer) -> str | None:
    """Why TRL's generation of a batch cannot encode the batch's shared prompt prefix once, or None where it can."""
    if not trainer.share_prefix:
        return "groups.share_prompt is off"
    if not compat.trl_at_least("1.0"):
        return f"trl {compat.trl_version()}; from trl 1.0"
    if trainer.use_vllm:
        return "vLLM generates"
    if getattr(trainer, "use_transformers_continuous_batching", False) or getattr(trainer, "use_transformers_paged", False):
        return "transformers' continuous batching generates"
    if _sharded(trainer):
        return "sharded weights, gathered inside TRL's generation"
    return None


def _loss_blocker(trainer) -> str | None:
    """Why the loss pass cannot encode a batch's shared prompt prefix once whatever the batch, or None where it can
    (a batch may still not share enough: ``prompt_shared``)."""
    if not trainer.share_prefix:
        return "groups.share_prompt is off"
    if getattr(trainer.accelerator.state, "deepspeed_plugin", None) is not None or _sharded(trainer):
        return "DeepSpeed or FSDP runs the model"  # their hooks on the weights are not tested with a body run twice
    backbone = prefix_cache.backbone_of(trainer.accelerator.unwrap_model(trainer.model))
    if backbone is None:
        return f"{type(trainer.model).__name__} has no transformer body apart from its head"
    checkpointing = getattr(backbone, "gradient_checkpointing", False) or getattr(trainer.args, "gradient_checkpointing", False)
    if checkpointing and not prefix_cache.checkpoints_with_a_cache():  # the Trainer turns it on when training starts
        return "gradient checkpointing keeps no keys and values before transformers 4.56"
    if checkpointing and prefix_cache.window_of(backbone):
        return "gradient checkpointing with a sliding-window attention"
    return None


def _sharded(trainer) -> bool:
    """Whether the weights are split over the processes (ZeRO-3, FSDP)."""
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return getattr(trainer, "is_fsdp_enabled", False) or (plugin is not None and plugin.zero_stage == 3)


def prefix_shared(trainer):
    """The model whose ``generate`` TRL's generation of a batch calls, where the batch's shared prompt prefix can be
    encoded once (``run/prefix_cache.py``); None where it cannot (``_generation_blocker``)."""
    if _generation_blocker(trainer):
        return None
    return trainer.accelerator.unwrap_model(trainer.model_wrapped)


def prompt_shared(
    trainer, model, input_ids, attention_mask, logits_to_keep, args: tuple, kwargs: dict, whole_batch: bool = False
):
    """(the transformer body, the prompt prefix every row shares) where the loss pass can encode that prefix once
    (``run/prefix_cache.sharing_prompt``); None where it runs as TRL wrote it: where ``_loss_blocker`` says why,
    with images or a MoE's auxiliary loss, or fewer than ``prefix_cache.MIN_SHARED`` shared prompt tokens. The
    prompt is what precedes the last ``logits_to_keep`` columns (TRL's completions), left-padded. With
    ``whole_batch`` (the step's micro-batches share one prefix pass), the prefix is the one every row of the training
    batch shares (``batch_prefix``) where these rows begin with it: one pass a step, not one a prompt."""
    if _loss_blocker(trainer) or args:
        return None
    extra = {k: v for k, v in kwargs.items() if k not in ("batch_size", "compute_entropy")}
    if any(v not in (None, False) for v in extra.values()):  # images, token types, compute_aux_loss
        return None
    backbone = prefix_cache.backbone_of(trainer.accelerator.unwrap_model(model))
    if backbone is None:
        return None
    width = input_ids.shape[1] - int(logits_to_keep)
    rows = prefix_cache.unpadded(input_ids[:, :width], attention_mask[:, :width])
    shared = prefix_cache.shared_length(rows)
    common = trainer.batch_prefix if whole_batch else None
    if common and prefix_cache.MIN_SHARED <= len(common) <= shared and rows[0][: len(common)] == common:
        return backbone, common
    return (backbone, rows[0][:shared]) if shared >= prefix_cache.MIN_SHARED else None


def step_shared(trainer, model) -> "prefix_cache.StepHeads | None":
    """The step's prefix passes (``prefix_cache.StepHeads``) where a training micro-batch's loss pass reads its
    shared prompt from them: inside the Trainer's ``training_step`` (which flushes them at the step's last
    micro-batch; a loss computed and back-propagated elsewhere runs its own prefix pass), the gradient flows, one
    process trains (on several, each micro-batch's backward is what the processes average, and the prefixes'
    backward would come after), and transformers keeps a cache of layer objects (4.56 and later). None elsewhere:
    the prefix is run once a micro-batch."""
    import torch

    if trainer.step_heads is None or not trainer.in_training_step or not torch.is_grad_enabled() or not model.training:
        return None
    if trainer.accelerator.num_processes != 1 or not prefix_cache.checkpoints_with_a_cache():
        return None
    return trainer.step_heads


def _batch_prefix(batch: dict) -> list[int] | None:
    """The prompt tokens every row of a generation batch begins with (None without TRL's ``prompt_ids``)."""
    ids, mask = batch.get("prompt_ids"), batch.get("prompt_mask")
    if ids is None or mask is None:
        return None
    rows = prefix_cache.unpadded(ids, mask)
    return rows[0][: prefix_cache.shared_length(rows)] if rows else None


@contextlib.contextmanager
def _scored_positions_only() -> Iterator[None]:
    """For the length of the block, TRL's fused LM head (1.16.0, ``trl.trainer.utils``) projects only the positions
    it scores (the completions) on a CPU too. It does so on CUDA and XPU (``_use_triton``) and scores every position
    elsewhere, to keep an accelerator's compiled tile shapes fixed; a CPU runs eagerly, so scoring the prompt's
    positions as well (zeros after its mask) only costs: on a tool recipe, whose prompt is about 8 times its
    completion, most of the loss pass. The scored values are the same either way."""
    utils: Any = sys.modules.get("trl.trainer.utils")
    real = getattr(utils, "_use_triton", None)
    if real is None:
        yield
        return

    def compact(device) -> bool:
        return real(device) or device.type == "cpu"

    utils._use_triton = compact
    try:
        yield
    finally:
        utils._use_triton = real


def _step(trainer) -> Step:
    """The trainer's metrics, and TRL's own generation (past the behaviours' ``on_batch``), for a hook."""
    return Step(trainer, trainer._metrics, functools.partial(_trl_generation, trainer))


def _trl_generation(trainer, rows: list[dict]) -> dict:
    return super(trainer_class(), trainer)._generate_and_score_completions(rows)


def _hooked_loss(behaviour: Behaviour, step: Step, model, inner: Callable[[dict], Any], inputs: dict):
    return behaviour.on_loss(step, model, inputs, inner)


def make(kwargs: dict, behaviours: list[Behaviour], share_prefix: bool = True):
    """The trainer of ``trainer_class`` built from GRPOTrainer's keyword arguments, calling ``behaviours``; on a TRL
    that lacks a method the hooks are called from, a behaviour is refused in one line, never left uncalled.
    ``share_prefix``: its generation and its loss pass encode a batch's shared prompt prefix once (``prefix_shared``,
    ``prompt_shared``), and on a CPU TRL's fused head projects the scored positions only."""
    missing = [name for name in HOOKED if not hasattr(trainer_class().__base__, name)]
    if missing:
        behaviours = [b for b in behaviours if not b.optional]
    if behaviours and missing:
        newest = max(compat.tables())
        raise RunError(
            f"trl {compat.trl_version()}: GRPOTrainer has no {missing[0]}, where grpo_ext calls "
            f"{type(behaviours[0]).__name__}; install a tested TRL: pip install 'trl>={compat.MIN_TRL},<={newest}'"
        )
    trainer = trainer_class()(**kwargs)
    trainer.behaviours = list(behaviours)
    trainer.share_prefix = share_prefix
    trainer.step_heads = prefix_cache.StepHeads() if share_prefix else None
    return trainer


@contextlib.contextmanager
def behaving(trainer, behaviour: Behaviour) -> Iterator[None]:
    """For the length of the block, ``behaviour`` is called last of the trainer's behaviours."""
    trainer.behaviours.append(behaviour)
    try:
        yield
    finally:
        trainer.behaviours.remove(behaviour)


def sample_batch(trainer, rows: list[dict]) -> dict:
    """TRL's generation and scoring of ``rows`` (each prompt once per completion) as a generation batch, the
    behaviours' hooks called: in eval mode, the tool loop's conversations for an eval."""
    return trainer._generate_and_score_completions(rows)


def token_logps(trainer, model, inputs: dict):
    """The log-probability of each completion token of a micro-batch under ``model``, and its entropy, as TRL's loss
    computes them (the sampling temperature, TRL's chunking): ``(logps, entropies)``, each rows x completion tokens.
    A batch with images is refused: the model's image inputs are not passed on here."""
    import torch

    if any(inputs.get(key) is not None for key in ("pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes")):
        raise RunError("algorithm: tic_grpo does not train on images; choose another algorithm (grpo-ext algorithms)")
    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    found = trainer._get_per_token_logps_and_entropies(
        model, input_ids, attention_mask, inputs["completion_ids"].size(1), compute_entropy=True
    )
    return found[0], found[1]


def accumulation_divisor(trainer) -> int:
    """What TRL's sequence-mean loss (``grpo``) divides a training micro-batch's loss by (note 7 above), so that a
    loss computed in its place weighs the same in an accumulated step."""
    return trainer.current_gradient_accumulation_steps if compat.trl_at_least("0.22") else 1


def forget_eval_metrics(trainer) -> None:
    """Clear what TRL logged of eval sampling: those samples are not training's."""
    trainer._metrics["eval"].clear()


def logged(trainer, name: str, mode: str = "train") -> list:
    """The entries of a metric the current step has logged so far (``Step.log``, or TRL's own)."""
    return list(trainer._metrics[mode].get(name, []))


def entropy_bonus(trainer) -> bool:
    """Whether the trainer's loss has an entropy bonus (TRL 1.8 and later have one)."""
    return bool(getattr(trainer, "_entropy_bonus_enabled", False))


def sampled(trainer) -> dict | None:
    """The generation batch a GRPOTrainer sampled last, as it keeps it for its own completion printing:
    ``{"prompt": [...], "completion": [...], "rewards": {metric name: [...]}, "advantages": [...]}``, one entry per
    completion in TRL's order (the num_generations of one prompt in a row), or None where the trainer keeps none.

    TRL 0.19 keeps it in ``_textual_logs``, 0.20 and later in ``_logs``, on the main process gathered from all.
    Up to 1.14 a prompt and a completion are decoded text (the prompt through its chat template); from 1.15 they
    are what the data held and the model returned: a string, or chat messages. A shape other than these is read
    as none, so that a TRL that moves it again loses the log, never the run."""
    logs = next((found for name in ("_logs", "_textual_logs") if (found := getattr(trainer, name, None)) is not None), None)
    try:
        batch = {key: list(logs[key]) for key in ("prompt", "completion", "advantages")}
        batch["rewards"] = {str(name): list(scores) for name, scores in logs["rewards"].items()}
    except (TypeError, KeyError, AttributeError):
        return None
    n = len(batch["prompt"])
    if any(len(batch[key]) != n for key in ("completion", "advantages")) or any(len(s) != n for s in batch["rewards"].values()):
        return None
    return batch


@contextlib.contextmanager
def scripted_replies(policy: Callable[[str], str]) -> Iterator[None]:
    """For the length of the block, every GRPOTrainer's model replies by ``policy``: given the prompt so far as text
    (the chat template's, with the tool results TRL added), it returns the reply as text, its end token included,
    which the tokenizer encodes. TRL's tool loop, chat template and parser, the tools and the rewards stay real: the
    tests' stand-in for a model that has learned a task. Needs TRL 1.0 or later (see the table above)."""
    from trl import GRPOTrainer

    if not compat.trl_at_least("1.0"):
        raise RuntimeError(f"scripted replies need trl>=1.0 (generation from token ids); trl {compat.trl_version()} is here")

    def generate(self, prompt_ids, *args, **kwargs):
        tokenizer = self.processing_class
        return [tokenizer.encode(policy(tokenizer.decode(ids)), add_special_tokens=False) for ids in prompt_ids], None

    real = GRPOTrainer.__dict__["_generate_single_turn"]
    GRPOTrainer._generate_single_turn = generate
    try:
        yield
    finally:
        GRPOTrainer._generate_single_turn = real
