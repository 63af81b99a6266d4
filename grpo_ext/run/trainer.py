"""GRPOConfig and GRPOTrainer for the installed TRL, built from a validated recipe.

``compat`` says what each recipe key means on this TRL (the version tables); this module turns the result
into TRL's objects. It imports TRL only inside the functions that build them.
"""

import dataclasses
import inspect

from grpo_ext.core.errors import RunError
from grpo_ext.recipe import Recipe
from grpo_ext.rewards.tool_use import unanswered
from grpo_ext.run import dynamic, skipping
from grpo_ext.settings import compat


def config_kwargs(recipe: Recipe, present: set[str] | None = None) -> tuple[dict, list[str], dict[str, str]]:
    """GRPOConfig kwargs for the installed TRL (``present``: its real fields, else the field table decides).

    Returns (kwargs, announcements, passed) as :func:`compat.translate` does, with the reward weights,
    output directory and seed added.
    """
    kwargs, notes, passed = compat.translate(dict(recipe["training"]), present=present)
    kwargs["reward_weights"] = recipe.weights
    kwargs["output_dir"] = recipe["output_dir"]
    kwargs["seed"] = recipe["seed"]
    return kwargs, notes, passed


def config_fields() -> set[str]:
    """The installed GRPOConfig's real field names (imports TRL)."""
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig)}


def make_config(kwargs: dict):
    """GRPOConfig from translated kwargs; a key this TRL lacks is refused in one line."""
    from trl import GRPOConfig

    unknown = sorted(set(kwargs) - config_fields())
    if unknown:
        raise RunError(
            f"training.{unknown[0]}: trl {compat.trl_version()} with transformers {compat.transformers_version()} "
            f"has no such GRPOConfig key; remove it from the recipe"
        )
    return GRPOConfig(**kwargs)


def fit_prompt_limit(args, longest: int) -> None:
    """On a TRL that cuts prompts longer than max_prompt_length, set it to ``longest`` (no kept prompt is longer)
    so that TRL cuts nothing, as newer TRL never does; grpo_ext has already dropped the longer prompts."""
    if compat.truncates_prompts({f.name for f in dataclasses.fields(args)}):
        args.max_prompt_length = longest


def count_dropped(trainer, completions: list) -> None:
    """Add to the step's metrics the tool results TRL dropped from ``completions`` (this process's, counted over
    every process): ``tools/dropped_results``, a count over the whole step (one entry, summed into, since TRL logs
    the mean of a metric's entries), and ``tools/dropped_frequency``, their share of the calls TRL ran (TRL's own
    ``tools/failure_frequency`` counts a dropped call as one that worked)."""
    import torch

    limit = getattr(trainer, "max_tool_calling_iterations", None)
    counted = [unanswered(c, limit) for c in completions]
    calls = sum(len(m.get("tool_calls") or []) for c in completions if isinstance(c, list) for m in c if isinstance(m, dict))
    local = torch.tensor([calls - sum(n for _, n in counted), sum(d for d, _ in counted)], device=trainer.accelerator.device)
    ran, dropped = trainer.accelerator.gather(local).view(-1, 2).sum(0).tolist()
    metrics = trainer._metrics["train" if trainer.model.training else "eval"]
    metrics["tools/dropped_frequency"].append(dropped / ran if ran else 0.0)
    step = metrics["tools/dropped_results"]
    step[:] = [(step[0] if step else 0) + dropped]


def trainer_class(skip_zero_advantage: bool = True, dynamic_sampling: int | None = None, tools: bool = False):
    """GRPOTrainer, or a subclass that does what the recipe's ``groups`` section asks: with ``skip_zero_advantage``
    its loss leaves out rows that cannot move the weights (``run/skipping.py``), logging the share it left out as
    ``skipped_rows``; with ``dynamic_sampling`` (the most extra generation rounds per batch) it replaces groups
    without reward spread by groups for new prompts (``run/dynamic.py``), logging ``groups/*``; with ``tools``
    (a recipe with tools or an environment) it counts the tool results TRL dropped (``count_dropped``)."""
    import torch
    from trl import GRPOTrainer

    if not skip_zero_advantage and dynamic_sampling is None and not tools:
        return GRPOTrainer

    class Trainer(GRPOTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if not skip_zero_advantage or return_outputs or not self.model.training:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if not hasattr(self, "_grpo_ext_blocker"):  # decided once: the settings do not change within a run
                self._grpo_ext_blocker = skipping.blocker(self)
            keep = None if self._grpo_ext_blocker else skipping.kept_rows(inputs)
            self._grpo_ext_learned = getattr(self, "_grpo_ext_learned", False) or keep is None or bool(keep.any())
            rows = inputs["advantages"].size(0)
            self._metrics["train"]["skipped_rows"].append(0.0 if keep is None else 1 - int(keep.sum()) / rows)
            if keep is None:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if not bool(keep.any()):
                # nothing to learn from: a zero loss tied to the weights, so the backward pass runs and is empty
                return sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
            factor = skipping.scale(self.loss_type, inputs, keep)
            return super().compute_loss(model, skipping.subset(inputs, keep), return_outputs, num_items_in_batch) * factor

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            scores = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self._grpo_ext_scores = scores  # every process's rows, as TRL scores them; read by the refill below
            if tools:
                count_dropped(self, completions)
            return scores

        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            if dynamic_sampling is None or not self.model.training or dynamic.blocker(self, batch):
                return batch
            group = self.num_generations
            if not hasattr(self, "_grpo_ext_draws"):  # its own stream: the training data order stays as it was
                self._grpo_ext_draws = torch.Generator().manual_seed(self.args.seed + 1)

            def more(groups: int):
                picks = torch.randint(len(self.train_dataset), (groups,), generator=self._grpo_ext_draws).tolist()
                rows = [dict(self.train_dataset[i]) for i in picks for _ in range(group)]
                new = super(Trainer, self)._generate_and_score_completions(rows)
                return new, dynamic.flat_groups(self._grpo_ext_scores, group)

            flat = dynamic.flat_groups(self._grpo_ext_scores, group)
            pad = self.processing_class.pad_token_id if hasattr(self, "processing_class") else self.tokenizer.pad_token_id
            batch, stats = dynamic.refill(batch, flat, group, more, dynamic_sampling, pad)
            for key, value in stats.items():
                self._metrics["train"][key].append(value)
            return batch

    return Trainer


def make_trainer(
    *,
    model,
    reward_funcs,
    args,
    train_dataset,
    tokenizer,
    callbacks=None,
    skip_zero_advantage=True,
    dynamic_sampling=None,
    **features,
):
    """Build the trainer (``trainer_class``) with keywords only. The tokenizer goes to ``processing_class`` or
    ``tokenizer``, whichever the signature has; optional features (peft_config, quantization_config, ...) are
    passed only when set, and one this TRL does not take is refused in one line."""
    GRPOTrainer = trainer_class(
        skip_zero_advantage, dynamic_sampling, bool(features.get("tools") or features.get("environment_factory"))
    )

    params = inspect.signature(GRPOTrainer.__init__).parameters
    kwargs = {"model": model, "reward_funcs": reward_funcs, "args": args, "train_dataset": train_dataset, "callbacks": callbacks}
    kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
    for name, value in features.items():
        if value is None:
            continue
        if name not in params:
            need = compat.TRAINER_ADDED.get(name, str(compat.MIN_TRL))
            raise RunError(f"GRPOTrainer of trl {compat.trl_version()} takes no {name}; run: pip install -U 'trl>={need}'")
        kwargs[name] = value
    return GRPOTrainer(**kwargs)
