"""GRPOConfig and GRPOTrainer for the installed TRL, built from a validated recipe.

``compat`` says what each recipe key means on this TRL (the version tables); this module turns the result
into TRL's objects. It imports TRL only inside the functions that build them.
"""

import dataclasses
import inspect

from grpo_ext.core.errors import RunError
from grpo_ext.recipe import Recipe
from grpo_ext.run import hardware, heap, trl_internals
from grpo_ext.settings import compat


def config_kwargs(recipe: Recipe, present: set[str] | None = None) -> tuple[dict, list[str], dict[str, str]]:
    """GRPOConfig kwargs for the installed TRL (``present``: its real fields, else the field table decides).

    Returns (kwargs, announcements, passed) as :func:`compat.translate` does, with the reward weights,
    output directory and seed added.
    """
    kwargs, notes, passed = compat.translate(dict(recipe.training.settings), present=present)
    kwargs |= {"reward_weights": recipe.weights, "output_dir": recipe.output_dir, "seed": recipe.seed}
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


def make_trainer(
    *,
    model,
    reward_funcs,
    args,
    train_dataset,
    tokenizer,
    callbacks=None,
    behaviours=(),
    share_prompt: bool = True,
    **features,
):
    """Build the trainer with keywords only: GRPOTrainer calling ``behaviours``, the GRPO behaviours TRL lacks that
    the recipe asks for, at their hooks (``run/trl_internals.py``). The tokenizer goes to ``processing_class`` or
    ``tokenizer``, whichever the signature has; optional features (peft_config, quantization_config, ...) are
    passed only when set, and one this TRL does not take is refused in one line."""
    params = inspect.signature(trl_internals.trainer_class().__init__).parameters
    kwargs = {"model": model, "reward_funcs": reward_funcs, "args": args, "train_dataset": train_dataset, "callbacks": callbacks}
    kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
    for name, value in features.items():
        if value is None:
            continue
        if name not in params:
            need = compat.TRAINER_ADDED.get(name, str(compat.MIN_TRL))
            raise RunError(f"GRPOTrainer of trl {compat.trl_version()} takes no {name}; run: pip install -U 'trl>={need}'")
        kwargs[name] = value
    trainer = trl_internals.make(kwargs, list(behaviours), share_prompt)
    heap.uncached_casts(trainer)
    trainer.cast_once = hardware.decodes_from_bf16_copies(trainer.accelerator.device.type, trainer.accelerator.native_amp)
    return trainer


def release_training_state(grpo) -> None:
    """Let go of what only another optimizer step reads, once training has ended: the optimizer's state (AdamW's two
    moments: twice the trainable weights, in float32) and the gradients, so that the eval after samples in the memory
    they held rather than beside it. A sharded optimizer (DeepSpeed) keeps its own and is left alone."""
    import torch

    optimizer = getattr(grpo, "optimizer", None)
    inner = getattr(optimizer, "optimizer", optimizer)  # under accelerate's wrapper
    if isinstance(inner, torch.optim.Optimizer) and getattr(grpo, "is_deepspeed_enabled", False) is not True:
        inner.state.clear()
    grpo.model.zero_grad(set_to_none=True)
    heap.release()  # freed is not yet given back: the C library would keep it beside what the eval allocates
