"""The end boost (``explore:``): checked before loading, set and cleared in the trainer's sampling settings on
the right steps (seen end to end in a tiny run: tests/integration/test_explore_tiny_run.py)."""

from types import SimpleNamespace

import pytest

from grpo_ext import recipe
from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.recipe import Explore, Training
from grpo_ext.run import explore

CASES = [
    # (overrides of recipes/digit.yaml, text a problem must contain (None: valid))
    (["explore.end_boost=1.3"], None),
    (["explore.end_boost=1.3", "explore.steps=15", "explore.start=0"], None),
    (["explore.end_boost=null", "explore.steps=16"], None),  # off: its steps do not matter
    (["explore.end_boost=0.5"], "explore.end_boost: must be at least 1.0, got 0.5"),
    (["explore.end_boost=1.3", "explore.steps=0"], "explore.steps: must be at least 1, got 0"),
    (["explore.end_boost=1.3", "explore.steps=16"], None),  # a boost on every step: allowed, and the run says so
    (["explore.end_boost=1.3", "training.use_vllm=true"], "explore.end_boost: works with transformers' generation only"),
    (
        ["explore.end_boost=1.3", "training.generation_kwargs={exponential_decay_length_penalty: [1, 1.3]}"],
        "already; keep one of the two",
    ),
    (["explore.end_boots=1.3"], "explore.end_boots: unknown key"),
]


@pytest.mark.parametrize(("overrides", "problem"), CASES)
def test_explore_is_checked_before_loading(overrides, problem):
    if problem is None:
        assert recipe.load("recipes/digit.yaml", overrides)
        return
    with pytest.raises(RecipeError) as info:
        recipe.load("recipes/digit.yaml", overrides)
    assert problem in str(info.value)


def fake_trainer(with_kwargs: bool = True):
    from transformers import GenerationConfig

    config = GenerationConfig(do_sample=True, max_new_tokens=8)
    return SimpleNamespace(generation_config=config, **({"generation_kwargs": {"do_sample": True}} if with_kwargs else {}))


@pytest.mark.parametrize("with_kwargs", [True, False])  # TRL 0.19 keeps only the GenerationConfig
def test_callback_boosts_the_first_steps_then_switches_off(with_kwargs):
    trainer, lines = fake_trainer(with_kwargs), []
    cb = explore.callback(Explore(end_boost=1.3, start=1, steps=2), trainer, lines.append)
    seen = []
    for step in range(4):
        cb.on_step_begin(None, SimpleNamespace(global_step=step), None)
        seen.append(trainer.generation_config.exponential_decay_length_penalty)
        if with_kwargs:
            assert trainer.generation_kwargs.get(explore.PENALTY) == seen[-1]
    assert seen == [(1, 1.3), (1, 1.3), None, None]
    assert lines == ["explore: end-of-reply boost off from step 3"]


def test_resumed_past_the_boost_samples_without_it():
    trainer, lines = fake_trainer(), []
    cb = explore.callback(Explore(end_boost=1.3, start=1, steps=2), trainer, lines.append)
    cb.on_step_begin(None, SimpleNamespace(global_step=5), None)
    assert trainer.generation_config.exponential_decay_length_penalty is None and lines == []


def test_no_boost_no_callback_and_a_trainer_without_settings_is_refused():
    assert explore.callback(Explore(end_boost=None, start=1, steps=8), fake_trainer(), print) is None
    with pytest.raises(RunError, match="explore.end_boost: this trl's trainer keeps no generation_config"):
        explore.switch(SimpleNamespace(), True, (1, 1.3))


@pytest.mark.parametrize(
    ("start", "steps", "text"),
    [
        (0, 1, "x1.3 a token from the reply's first token, for the first 1 step;"),
        (1, 8, "x1.3 a token after the reply's first token, for the first 8 steps;"),
        (3, 8, "x1.3 a token after the reply's first 3 tokens, for the first 8 steps;"),
    ],
)
def test_the_run_says_what_the_boost_does(start, steps, text):
    assert text in explore.describe(Explore(end_boost=1.3, start=start, steps=steps))
    assert explore.describe(Explore(end_boost=None, start=start, steps=steps)) is None


def test_a_boost_on_every_step_is_said_so():
    line = explore.describe(Explore(end_boost=1.3, start=1, steps=8), max_steps=3)
    assert "for all 3 steps: no step samples as the eval does (set explore.steps below training.max_steps" in line
    assert "for the first 8 steps" in explore.describe(Explore(end_boost=1.3, start=1, steps=8), max_steps=16)


def test_pre_flight_samples_as_the_first_steps_do():
    training = Training({"temperature": 1.0, "generation_kwargs": {"repetition_penalty": 1.1}})
    first = explore.first_steps(training, Explore(end_boost=1.3, start=2, steps=8))
    assert first.settings["generation_kwargs"] == {"repetition_penalty": 1.1, explore.PENALTY: (2, 1.3)}
    assert training.settings["generation_kwargs"] == {"repetition_penalty": 1.1}  # the recipe's own is left as it was
    assert explore.first_steps(training, Explore(end_boost=None, start=1, steps=8)) is training
