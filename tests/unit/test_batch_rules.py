"""Shape and value rules: refused before any model loads, with the same verdict TRL would reach later (the last
column of CASES; tests/integration/test_batch_rules_trl.py checks it against the installed GRPOConfig)."""

import pytest

from grpo_ext.settings import compat

BASE = {"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2, "max_completion_length": 8}

CASES = [
    # (training settings over BASE, text a problem must contain (None: valid), does TRL's GRPOConfig also refuse it)
    ({"num_generations": 3}, "8 completions x 1 steps per generation = 8, not divisible by num_generations=3", True),
    ({"num_generations": 1}, "training.num_generations: GRPO compares completions within a group", True),
    ({"num_generations": None}, "training.num_generations: GRPO compares completions within a group", True),
    (
        {"gradient_accumulation_steps": 3, "num_generations": 6, "per_device_train_batch_size": 4},  # 12 % 6 == 0: fine
        None,
        False,
    ),
    ({"steps_per_generation": 3, "num_generations": 6, "per_device_train_batch_size": 4}, None, False),
    ({"steps_per_generation": 3, "num_generations": 16}, "8 completions x 3 steps per generation = 24, not divisible", True),
    (
        {"generation_batch_size": 12},
        "training.generation_batch_size: 12 is not a multiple of per_device_train_batch_size=8",
        True,
    ),
    (
        {"generation_batch_size": 16, "num_generations": 3, "per_device_train_batch_size": 8},
        "training.generation_batch_size: 16 is not divisible by num_generations=3",
        True,
    ),
    (
        {"generation_batch_size": 16, "steps_per_generation": 2},
        "set generation_batch_size or steps_per_generation, not both",
        True,
    ),
    ({"per_device_train_batch_size": 0}, "training.per_device_train_batch_size: must be at least 1, got 0", False),
    ({"gradient_accumulation_steps": 0}, "training.gradient_accumulation_steps: must be at least 1, got 0", False),
    ({"max_completion_length": 0}, "training.max_completion_length: must be at least 1, got 0", False),
    ({"num_generations_eval": 0}, "training.num_generations_eval: must be at least 1, got 0", False),
    ({"num_iterations": 0}, "training.num_iterations: must be at least 1, got 0", False),
    # grpo_ext passes TRL no eval dataset: TRL's Trainer would refuse it after loading the model
    ({"eval_strategy": "steps", "eval_steps": 1}, "training.eval_strategy: 'steps' needs an eval dataset", False),
    (
        {"eval_strategy": "steps", "eval_steps": 1, "per_device_eval_batch_size": 6},  # and TRL's eval batch rule
        "training.per_device_eval_batch_size: 6 is not divisible by the eval group size 4",
        True,
    ),
    (
        {"eval_strategy": "steps", "eval_steps": 1, "num_generations_eval": 3},
        "per_device_eval_batch_size: 8 is not divisible by the eval group size 3",
        True,
    ),
    ({"eval_strategy": "sometimes"}, "training.eval_strategy: 'sometimes' is not one of 'no', 'steps', 'epoch'", True),
    ({"save_strategy": "often"}, "training.save_strategy: 'often' is not one of", True),
    ({"save_steps": 0}, "training.save_steps: must be positive with save_strategy: steps, got 0", False),
    ({"save_steps": 2.5}, "training.save_steps: 2.5 must be a whole number of steps", True),
    ({"logging_steps": 0}, "training.logging_steps: must be positive with logging_strategy: steps", True),
    ({"temperature": 0.0}, "training.temperature: must be above 0.0, got 0.0; for near-greedy sampling", False),
    ({"top_p": 1.5}, "training.top_p: must be above 0.0 and at most 1.0, got 1.5", False),
    ({"top_k": -1}, "training.top_k: must be at least 0, got -1", False),
    ({"beta": -0.1}, "training.beta: must be at least 0.0, got -0.1", False),
    ({"learning_rate": 0}, "training.learning_rate: must be positive, got 0", False),
    ({"max_steps": 0}, "training.max_steps: 0 trains nothing", False),
    ({"max_steps": -5}, "training.max_steps: -5 is not a step count", False),
    ({"max_steps": -1, "num_train_epochs": 0}, "training.num_train_epochs: must be positive when max_steps is -1", False),
    ({"bf16": True, "fp16": True}, "training.fp16: bf16 and fp16 are both true", True),
    ({"auto_find_batch_size": True}, "training.auto_find_batch_size: GRPO needs whole groups", True),
    ({"sync_ref_model": True, "beta": 0.0}, "training.sync_ref_model: there is no reference model when beta is 0", False),
    ({"log_completions_hub_repo": "me/completions"}, "training.log_completions_hub_repo: needs log_completions: true", True),
    (
        {"vllm_importance_sampling_clip_min": 3.0, "vllm_importance_sampling_clip_max": 2.0},
        "training.vllm_importance_sampling_clip_min: 3.0 must be below vllm_importance_sampling_clip_max=2.0",
        True,
    ),
    ({"save_strategy": "best"}, "training.save_strategy: 'best' and load_best_model_at_end need TRL's evaluation", False),
    (
        {"lr_scheduler_type": "reduce_lr_on_plateau"},
        "training.lr_scheduler_type: 'reduce_lr_on_plateau' needs TRL's evaluation",
        True,
    ),
    ({"dataloader_prefetch_factor": 2}, "training.dataloader_prefetch_factor: needs dataloader_num_workers above 0", True),
    ({"generation_kwargs": {"exponential_decay_length_penalty": [1, 1.3]}}, None, False),
    (
        {"use_vllm": True, "generation_kwargs": {"exponential_decay_length_penalty": [1, 1.3], "min_tokens": 1}},
        "training.generation_kwargs: exponential_decay_length_penalty works with transformers' generation only",
        False,
    ),
]


@pytest.mark.parametrize("key", ["save_strategy", "logging_strategy", "eval_strategy"])
def test_unquoted_no_is_the_strategy_no(key):
    """YAML reads an unquoted ``no`` as false; for a strategy key it means the string 'no'."""
    training = {**BASE, key: False}
    assert compat.check_training(training) == []
    assert training[key] == "no"


@pytest.mark.parametrize("settings,expected,trl_refuses", CASES, ids=[str(c[0])[:50] for c in CASES])
def test_shape_rule(settings, expected, trl_refuses):
    problems = compat.check_training({**BASE, **settings})
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems
        assert all(p.startswith("training.") and "\n" not in p for p in problems)
