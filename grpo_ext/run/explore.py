"""Exploration help for the first steps of a run: the end boost.

A small model that writes a right start and then keeps going ("7. 8. 9.") may never sample the end of its
reply right after the answer, so no group ever shows what stopping earns, and GRPO has nothing to push
towards it. ``explore.end_boost`` makes the end-of-reply token more likely while training samples its
first ``explore.steps`` steps, with transformers' own ``exponential_decay_length_penalty`` (after
``explore.start`` tokens, the end token's score grows by the factor per token). Then the boost is switched
off, so that the last steps train on the model's own sampling, the sampling the eval scores: a boost left
on trains a model that stops only when pushed.
"""

from grpo_ext.core.errors import RunError
from grpo_ext.core.text import plural
from grpo_ext.recipe import Explore, Training

PENALTY = "exponential_decay_length_penalty"


def describe(explore: Explore, max_steps: int | None = None) -> str | None:
    """One line for the run's log, or None when the section asks for nothing. A boost that covers every one of
    ``max_steps`` is allowed (a short trial run) and said so, since then no step samples as the eval does."""
    if explore.end_boost is None:
        return None
    start, steps = explore.start, explore.steps
    where = {0: "from the reply's first token", 1: "after the reply's first token"}.get(
        start, f"after the reply's first {start} tokens"
    )
    line = f"explore: end-of-reply boost x{explore.end_boost} a token {where}, "
    if isinstance(max_steps, int) and 0 < max_steps <= steps:
        return line + (
            f"for all {plural(max_steps, 'step')}: no step samples as the eval does "
            f"(set explore.steps below training.max_steps, half of them is a start)"
        )
    return line + f"for the first {plural(steps, 'step')}; then the model's own sampling"


def first_steps(training: Training, explore: Explore) -> Training:
    """The training section as the first steps sample: with the boost in its ``generation_kwargs`` (for the
    pre-flight, which samples as step 1 will)."""
    boost = _boost(explore)
    if boost is None:
        return training
    return training.replaced(generation_kwargs={**(training.settings.get("generation_kwargs") or {}), PENALTY: boost})


def _boost(explore: Explore) -> tuple[int, float] | None:
    """(the token the boost starts after, its factor), or None without one."""
    return None if explore.end_boost is None else (explore.start, float(explore.end_boost))


def switch(trainer, on: bool, boost: tuple[int, float]) -> None:
    """Set or clear the boost in the trainer's sampling settings: its GenerationConfig, and the
    ``generation_kwargs`` dict that newer TRL also applies to the model while it generates."""
    config = getattr(trainer, "generation_config", None)
    if config is None:
        raise RunError("explore.end_boost: this trl's trainer keeps no generation_config to set it in; remove explore.end_boost")
    setattr(config, PENALTY, boost if on else None)
    kwargs = getattr(trainer, "generation_kwargs", None)
    if isinstance(kwargs, dict):
        if on:
            kwargs[PENALTY] = boost
        else:
            kwargs.pop(PENALTY, None)


def callback(explore: Explore, trainer, log):
    """A TrainerCallback that boosts the first ``steps`` steps' sampling and then switches the boost off
    (a resumed run past them samples without it); None when the recipe has no end boost."""
    found, steps = _boost(explore), explore.steps
    if found is None:
        return None
    boost = found
    from transformers import TrainerCallback

    class _EndBoost(TrainerCallback):
        on: bool | None = None

        def on_step_begin(self, args, state, control, **kwargs):
            on = state.global_step < steps
            if on != self.on:
                switch(trainer, on, boost)
                if self.on is not None:
                    log(f"explore: end-of-reply boost off from step {state.global_step + 1}")
                self.on = on

    return _EndBoost()
