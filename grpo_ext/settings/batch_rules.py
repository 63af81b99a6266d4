"""GRPO's shape and value rules, checked before any model loads.

TRL's GRPOConfig, transformers' TrainingArguments and GRPOTrainer refuse these settings only after
torch is imported and (for the trainer) after the model is loaded. Here each rule is one function over
the effective ``training:`` values (the recipe's, else grpo_ext's default, else TRL's); each problem is
one line naming the key and the fix. The checks assume one process; TRL re-checks per run with the real
process count.
"""

from collections.abc import Callable
from typing import Any

from grpo_ext.settings import limits

Value = Callable[[str], Any]  # a training key -> its effective value, of whichever kind GRPOConfig gives it

# Keys that must be integers of at least 1 when set (None means "derive it").
POSITIVE_INTS = [
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "per_device_eval_batch_size",
    "max_completion_length",
    "max_prompt_length",
    "generation_batch_size",
    "steps_per_generation",
    "num_generations_eval",
    "num_iterations",
]

# Keys whose value is one of a fixed set in every supported transformers version.
STRATEGIES = {
    "save_strategy": ("no", "steps", "epoch", "best"),
    "eval_strategy": ("no", "steps", "epoch"),
    "logging_strategy": ("no", "steps", "epoch"),
}

# Sampling values: key → (lowest allowed, whether the lowest itself is allowed, highest or None).
RANGES = {
    "temperature": (0.0, False, None),
    "top_p": (0.0, False, 1.0),
    "min_p": (0.0, True, 1.0),
    "top_k": (0, True, None),
    "repetition_penalty": (0.0, False, None),
    "beta": (0.0, True, None),
    "epsilon": (0.0, True, None),
    "warmup_steps": (0, True, None),
    "weight_decay": (0.0, True, None),
    "max_grad_norm": (0.0, True, None),
}


# Generation settings that transformers' generate() takes and vLLM's SamplingParams does not.
TRANSFORMERS_ONLY_GENERATION = frozenset(
    {
        "exponential_decay_length_penalty",
        "no_repeat_ngram_size",
        "num_beams",
        "renormalize_logits",
        "suppress_tokens",
        "begin_suppress_tokens",
        "forced_eos_token_id",
        "sequence_bias",
        "epsilon_cutoff",
        "eta_cutoff",
        "typical_p",
        "encoder_repetition_penalty",
    }
)


def _sizes(v: Value) -> list[str]:
    return [
        f"training.{key}: must be at least 1, got {v(key)}"
        for key in POSITIVE_INTS
        if isinstance(v(key), int) and not isinstance(v(key), bool) and v(key) < 1
    ]


def _maxima(v: Value) -> list[str]:
    """Counts a run allocates or loops over, each at most its bound (``settings/limits.py``)."""
    found = (limits.over(f"training.{key}", v(key), maximum) for key, maximum in limits.TRAINING.items())
    return [problem for problem in found if problem]


def generation_batch(v: Value) -> int | None:
    """Completions TRL samples per generation on one process: generation_batch_size, else
    per_device_train_batch_size x steps_per_generation (gradient_accumulation_steps when unset). None when the
    settings give no positive count (the rules below name what is wrong)."""

    def count(n) -> bool:
        return isinstance(n, int) and not isinstance(n, bool) and n > 0

    if v("generation_batch_size") is not None:
        n = v("generation_batch_size")
        return n if count(n) else None
    batch, steps = v("per_device_train_batch_size"), v("steps_per_generation") or v("gradient_accumulation_steps")
    return batch * steps if count(batch) and count(steps) else None


def _generation_batch(v: Value) -> list[str]:
    """TRL's rule: one generation batch holds whole groups of num_generations completions."""
    g, batch, gen_batch, spg = (
        v("num_generations"),
        v("per_device_train_batch_size"),
        v("generation_batch_size"),
        v("steps_per_generation"),
    )
    if g is None or g < 2:
        return [f"training.num_generations: GRPO compares completions within a group, so it needs at least 2, got {g}"]
    if gen_batch is not None and spg is not None:
        return ["training.generation_batch_size: set generation_batch_size or steps_per_generation, not both"]
    if gen_batch is not None:
        if gen_batch % batch:
            return [
                f"training.generation_batch_size: {gen_batch} is not a multiple of per_device_train_batch_size={batch}; "
                f"make it {batch * max(1, round(gen_batch / batch))}"
            ]
        if gen_batch % g:
            return [f"training.generation_batch_size: {gen_batch} is not divisible by num_generations={g}"]
        return []
    steps = spg or v("gradient_accumulation_steps")
    if (batch * steps) % g:
        return [
            f"training.per_device_train_batch_size: {batch} completions x {steps} steps per generation = {batch * steps}, "
            f"not divisible by num_generations={g}; make per_device_train_batch_size a multiple of {g}"
        ]
    return []


def _eval(v: Value) -> list[str]:
    """grpo_ext scores held-out prompts itself (the ``eval:`` section) and gives TRL no eval dataset."""
    if v("eval_strategy") not in STRATEGIES["eval_strategy"][1:]:
        return []
    problems = [
        f"training.eval_strategy: {v('eval_strategy')!r} needs an eval dataset that grpo_ext does not pass to TRL; "
        f"held-out prompts are scored by the eval: section, so set eval_strategy: no"
    ]
    g = v("num_generations_eval") or v("num_generations")
    if v("per_device_eval_batch_size") % g:
        problems.append(
            f"training.per_device_eval_batch_size: {v('per_device_eval_batch_size')} is not divisible by the "
            f"eval group size {g} (num_generations_eval or num_generations)"
        )
    return problems


def _ranges(v: Value) -> list[str]:
    problems = []
    for key, (low, low_ok, high) in RANGES.items():
        value = v(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if value < low or (value == low and not low_ok) or (high is not None and value > high):
            bound = f"{'at least' if low_ok else 'above'} {low}" + (f" and at most {high}" if high is not None else "")
            hint = "; for near-greedy sampling use a small value such as 0.01" if key == "temperature" else ""
            problems.append(f"training.{key}: must be {bound}, got {value}{hint}")
    return problems


def _schedule(v: Value) -> list[str]:
    problems = []
    lr = v("learning_rate")
    if isinstance(lr, (int, float)) and lr <= 0:
        problems.append(f"training.learning_rate: must be positive, got {lr}")
    steps = v("max_steps")
    if isinstance(steps, int) and steps == 0:
        problems.append("training.max_steps: 0 trains nothing; give a positive number, or -1 to use num_train_epochs")
    elif isinstance(steps, int) and steps < -1:
        problems.append(f"training.max_steps: {steps} is not a step count; give a positive number, or -1 to use num_train_epochs")
    epochs = v("num_train_epochs")
    if isinstance(steps, int) and steps <= 0 and isinstance(epochs, (int, float)) and epochs <= 0:
        problems.append(f"training.num_train_epochs: must be positive when max_steps is -1, got {epochs}")
    for key, choices in STRATEGIES.items():
        if isinstance(v(key), str) and v(key) not in choices:
            problems.append(f"training.{key}: {v(key)!r} is not one of {', '.join(map(repr, choices))}")
    for strategy, key in (
        ("save_strategy", "save_steps"),
        ("logging_strategy", "logging_steps"),
        ("eval_strategy", "eval_steps"),
    ):
        value = v(key)
        if v(strategy) == "steps" and isinstance(value, (int, float)) and not isinstance(value, bool):
            if value <= 0:
                problems.append(f"training.{key}: must be positive with {strategy}: steps, got {value}")
            elif value > 1 and value != int(value):
                problems.append(f"training.{key}: {value} must be a whole number of steps (or a fraction of the run below 1)")
    if v("save_strategy") == "best" or v("load_best_model_at_end"):
        problems.append(
            "training.save_strategy: 'best' and load_best_model_at_end need TRL's evaluation, which grpo_ext "
            "does not run; use save_strategy: steps"
        )
    return problems


def _combinations(v: Value) -> list[str]:
    problems = []
    if v("bf16") is True and v("fp16") is True:
        problems.append("training.fp16: bf16 and fp16 are both true; keep one")
    if v("auto_find_batch_size") is True:
        problems.append(
            "training.auto_find_batch_size: GRPO needs whole groups in every batch, which shrinking the batch "
            "breaks; set it to false and lower per_device_train_batch_size"
        )
    if v("sync_ref_model") is True and v("beta") == 0:
        problems.append(
            "training.sync_ref_model: there is no reference model when beta is 0; set beta above 0 or sync_ref_model: false"
        )
    if v("log_completions_hub_repo") is not None and not v("log_completions"):
        problems.append("training.log_completions_hub_repo: needs log_completions: true")
    low, high = v("vllm_importance_sampling_clip_min"), v("vllm_importance_sampling_clip_max")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low >= high:
        problems.append(
            f"training.vllm_importance_sampling_clip_min: {low} must be below vllm_importance_sampling_clip_max={high}"
        )
    if v("lr_scheduler_type") in ("reduce_lr_on_plateau", "greedy"):
        problems.append(
            f"training.lr_scheduler_type: {v('lr_scheduler_type')!r} needs TRL's evaluation, which grpo_ext does "
            f"not run; use constant, linear or cosine"
        )
    generation = v("generation_kwargs")
    if isinstance(generation, dict) and v("use_vllm") is True:
        only = sorted(set(generation) & TRANSFORMERS_ONLY_GENERATION)
        if only:
            problems.append(
                f"training.generation_kwargs: {', '.join(only)} works with transformers' generation only, "
                f"and vLLM has no such setting; remove it or set use_vllm: false"
            )
    if v("dataloader_prefetch_factor") is not None and not v("dataloader_num_workers"):
        problems.append("training.dataloader_prefetch_factor: needs dataloader_num_workers above 0")
    return problems


RULES = [_generation_batch, _eval, _ranges, _schedule, _combinations]


def check_explore(explore: dict, v: Value) -> list[str]:
    """The ``explore:`` section against the effective training values: the end boost is a setting of
    transformers' sampling, set in one place."""
    if explore.get("end_boost") is None:
        return []
    problems = []
    if v("use_vllm") is True:
        problems.append(
            "explore.end_boost: works with transformers' generation only, and vLLM has no such setting; "
            "set explore.end_boost: null to sample with vLLM, or training.use_vllm: false"
        )
    generation = v("generation_kwargs")
    if isinstance(generation, dict) and "exponential_decay_length_penalty" in generation:
        problems.append(
            "explore.end_boost: training.generation_kwargs sets exponential_decay_length_penalty for every step "
            "already; keep one of the two (explore.end_boost: null keeps the generation_kwargs one)"
        )
    return problems


def check(value: Value) -> list[str]:
    """Every problem with the effective training values; sizes and bounds first, since the other rules divide and
    multiply by them."""
    problems = _sizes(value) + _maxima(value)
    if problems:
        return problems
    for rule in RULES:
        problems.extend(rule(value))
    return problems
