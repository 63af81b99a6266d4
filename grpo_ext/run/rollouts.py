"""Sampling with the tool loop, for the eval and the pre-flight of a recipe with tools or an environment.

An eval that scored single replies of a tool recipe would score a model that cannot call its tools. So these
samples come from the trainer itself: ``_generate_and_score_completions`` in eval mode, which renders the tools,
parses each call, runs it (on a fresh environment per rollout), lets the model go on, and scores the conversations
with the recipe's rewards and the environment's ``get_reward``, as in training. Only the sampling settings of an
eval (temperature, completion length, samples per prompt) are swapped in while it runs, and the scores and
conversations are read off the reward call TRL makes (``_calculate_rewards``).

Each conversation is summarised for the run's health: whether the model called a tool, whether it wrote a call
the parser could not read (``<tool_call>`` in its text and no call parsed), and how many results were errors (TRL's
``{'error': ...}`` for a tool that raised, or a library tool's ``error: ...`` line).
"""

import contextlib
import copy
from dataclasses import dataclass, field

from grpo_ext.rewards.registry import call_text
from grpo_ext.rewards.tool_use import is_error
from grpo_ext.run import hardware, trainer

CALL_TAG = "<tool_call>"  # what a ChatML tool call opens with (grpo_ext's template and the Qwen family's)


@dataclass
class Rollouts:
    """Per sample, in row order (``samples`` per row): the conversation, its token ids and each reward's score."""

    completions: list = field(default_factory=list)  # each a list of messages: assistant, tool, assistant, ...
    completion_ids: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # reward name -> [score or None per sample]

    def tool_counts(self) -> dict:
        """Shares of samples that called a tool, wrote a call that could not be read, or got an error back, and the
        mean number of calls per sample."""
        n = len(self.completions) or 1
        calls = [sum(len(m.get("tool_calls") or []) for m in c if m.get("role") == "assistant") for c in self.completions]
        unread = [any(_unread_call(m) for m in c) for c in self.completions]
        errors = [sum(is_error(m.get("content")) for m in c if m.get("role") == "tool") for c in self.completions]
        return {
            "samples": len(self.completions),
            "called": round(sum(x > 0 for x in calls) / n, 4),
            "unread_call": round(sum(unread) / n, 4),
            "error_back": round(sum(x > 0 for x in errors) / n, 4),
            "calls_per_sample": round(sum(calls) / n, 4),
            "errors_per_call": round(sum(errors) / sum(calls), 4) if sum(calls) else 0.0,
        }


def _unread_call(message: dict) -> bool:
    return message.get("role") == "assistant" and not message.get("tool_calls") and CALL_TAG in str(message.get("content"))


@contextlib.contextmanager
def _eval_sampling(trainer, samples: int, temperature: float, max_new_tokens: int):
    """The trainer's sampling settings for an eval while it runs: ``samples`` per prompt, at ``temperature``, up to
    ``max_new_tokens`` tokens a conversation (the tool results count, as in training)."""
    config = getattr(trainer, "generation_config", None)  # the transformers generation path's; vLLM samples as training
    saved = (trainer.num_generations_eval, trainer.max_completion_length)
    kept = {k: getattr(config, k) for k in ("temperature", "max_new_tokens", "do_sample")} if config is not None else {}
    trainer.num_generations_eval, trainer.max_completion_length = samples, max_new_tokens
    if config is not None:
        config.max_new_tokens = max_new_tokens
        config.do_sample = temperature > 0
        config.temperature = temperature if temperature > 0 else 1.0
    try:
        yield
    finally:
        trainer.num_generations_eval, trainer.max_completion_length = saved
        for key, value in kept.items():
            setattr(config, key, value)
        trainer._metrics["eval"].clear()  # what TRL logged of these samples is not training's


def sample(trainer, rows: list[dict], *, samples: int, temperature: float, max_new_tokens: int, seed: int, batch_size: int):
    """``samples`` conversations for each row (its columns reach the environment's ``reset`` and the rewards, as in
    training), ``batch_size`` at a time, each batch seeded by ``seed`` and its position; returns ``Rollouts``."""
    import torch

    out = Rollouts()
    names = list(trainer.reward_func_names)
    seen = []
    per_batch = max(1, batch_size // samples)
    original = trainer._calculate_rewards

    def capture(inputs, prompts, completions, completion_ids_list):
        scores = original(inputs, prompts, completions, completion_ids_list)
        seen.append((completions, completion_ids_list, scores))
        return scores

    was_training = trainer.model.training
    trainer.model.eval()
    trainer._calculate_rewards = capture  # an attribute of this trainer only, removed below
    try:
        with _eval_sampling(trainer, samples, temperature, max_new_tokens):
            for start in range(0, len(rows), per_batch):
                # each sample its own copy: a reset's text is added to the last message of its own prompt (TRL 1.8 in place)
                inputs = [copy.deepcopy(row) for row in rows[start : start + per_batch] for _ in range(samples)]
                torch.manual_seed(seed + start)
                with torch.no_grad():
                    trainer._generate_and_score_completions(inputs)
    finally:
        del trainer._calculate_rewards
        trainer.model.train(was_training)
    for completions, ids, scores in seen:
        out.completions += [list(c) for c in completions]
        out.completion_ids += [list(x) for x in ids]
        for j, name in enumerate(names):
            column = scores[:, j].tolist()
            out.scores.setdefault(name, []).extend(None if x != x else x for x in column)  # TRL's NaN is a None score
    return out


def has_tool_turns(completion) -> bool:
    """A conversation with a tool call or a tool result in it (not a plain reply)."""
    return isinstance(completion, list) and any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")) for m in completion
    )


def transcript(completion) -> str:
    """One conversation as a person reads it: the model's text, each call as ``→ name(arguments)`` and each result as
    ``← result``; a plain completion is returned as it is."""
    if isinstance(completion, str):
        return completion
    lines = []
    for message in completion:
        if message.get("role") == "tool":
            lines.append(f"← {str(message.get('content') or '').strip()}")
            continue
        text = str(message.get("content") or "").strip()
        if text:
            lines.append(text)
        lines += [call_text(call) for call in message.get("tool_calls") or []]
    return "\n".join(lines)


def sampler(recipe, model, tokenizer, rows: list[dict], scratch):
    """A trainer around ``model`` that plays the recipe's tool loop outside a training run (``grpo-ext eval`` and its
    checkpoint sweep): the recipe's GRPOConfig on this machine, its tools and environment, its rewards. It never
    trains: no reference model (``beta`` 0, so none loads), no tracker, ``scratch`` as its output folder, and
    ``rows`` (the prompts it will play) as the dataset TRL wants to be given."""
    from datasets import Dataset

    kwargs, _, _ = trainer.config_kwargs(recipe, trainer.config_fields())
    hardware.device_defaults(kwargs, recipe["model"])
    kwargs.update(output_dir=str(scratch), beta=0.0, report_to=[], save_strategy="no", logging_strategy="no")
    return trainer.make_trainer(
        model=model,
        reward_funcs=recipe.reward_funcs,
        args=trainer.make_config({**kwargs, "save_total_limit": None}),
        train_dataset=Dataset.from_list([dict(r) for r in rows]),
        tokenizer=tokenizer,
        skip_zero_advantage=False,
        tools=recipe.tools or None,
        environment_factory=recipe.environment_factory,
    )
