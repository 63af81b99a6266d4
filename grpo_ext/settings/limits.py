"""The largest counts a recipe may ask for, each with where it comes from.

A count a run allocates or loops over (rows drawn, steps, completions in a batch, tokens of a completion) is
refused past its bound in one line naming the key and the bound, at validation: a typo of a few digits too many
otherwise passes ``validate``, ``plan`` and ``--dry-run``, then runs for days or never ends. Each bound lies far past
what any published GRPO run uses, so that no real recipe meets one. The recipe's own keys carry theirs in the schema
(``recipe/schema.py``: ``maximum=``, shown in the key reference and the JSON Schema); the ``training:`` keys, which
are TRL's, in ``TRAINING`` below; the generators' sizes in ``data/generators.py``.
"""

from grpo_ext.core.text import shown

# Rows a recipe asks for by number (data.size, a mixture source's rows, eval_size, a generator's train and held_out):
# a mixture of a million rows is drawn in 15 s and 1.6 GB on a 2-core machine; the largest open RL prompt sets
# (NuminaMath-1.5, about 900,000 problems) fit in it.
MAX_ROWS = 1_000_000
# Optimizer steps, and windows counted in steps: at a few seconds a step (the fastest a GRPO step goes), a million
# steps is a month; published GRPO runs take hundreds to a few thousand.
MAX_STEPS = 1_000_000
# Completions (or prompts) at once: a group, a batch, a generation batch, samples of one eval prompt. 65,536 is eight
# times DAPO's generation batch (512 prompts x 16 completions) and 64 times DeepSeekMath's (1,024).
MAX_BATCH = 65_536
# Tokens of a prompt or a completion: 2**20, the longest context of released models (Qwen2.5-7B-Instruct-1M).
MAX_TOKENS = 1_048_576
# Rounds within one step (passes over one generation batch, tool-calling turns, extra rounds of dynamic sampling),
# and worker processes: published runs use 1 to 16.
MAX_ROUNDS = 1_024

# training: keys (TRL's GRPOConfig and TrainingArguments) that a run allocates or loops over, and their bounds.
TRAINING: dict[str, int] = {
    "max_steps": MAX_STEPS,
    "num_train_epochs": MAX_STEPS,  # an epoch is at least one step
    "warmup_steps": MAX_STEPS,
    "num_generations": MAX_BATCH,
    "num_generations_eval": MAX_BATCH,
    "per_device_train_batch_size": MAX_BATCH,
    "per_device_eval_batch_size": MAX_BATCH,
    "generation_batch_size": MAX_BATCH,
    "gradient_accumulation_steps": MAX_BATCH,
    "steps_per_generation": MAX_BATCH,
    "num_completions_to_print": MAX_BATCH,
    "max_completion_length": MAX_TOKENS,
    "max_prompt_length": MAX_TOKENS,
    "vllm_max_model_length": MAX_TOKENS,
    "num_iterations": MAX_ROUNDS,
    "max_tool_calling_iterations": MAX_ROUNDS,
    "dataloader_num_workers": MAX_ROUNDS,  # a process each
    "dataloader_prefetch_factor": MAX_ROUNDS,  # batches each worker holds ahead
}


def over(key: str, value, maximum: int) -> str | None:
    """The problem with a count past its bound (``{key}: must be at most ...``), else None; a NaN is past every bound.

    >>> over("training.max_steps", 10**20, MAX_STEPS), over("data.size", 5, MAX_ROWS)
    ('training.max_steps: must be at most 1000000, got 100000000000000000000', None)
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= maximum:
        return None
    return f"{key}: must be at most {maximum}, got {shown(value)}"
