"""Sampling with the tool loop, for the eval and the pre-flight of a recipe with tools or an environment.

An eval that scored single replies of a tool recipe would score a model that cannot call its tools. So these
samples come from the trainer itself: its generation of a batch in eval mode, which renders the tools,
parses each call, runs it (on a fresh environment per rollout), lets the model go on, and scores the conversations
with the recipe's rewards and the environment's ``get_reward``, as in training. Only the sampling settings of an
eval (temperature, completion length, samples per prompt) are swapped in while it runs, and the scores and
conversations are read off the reward call TRL makes (a ``Behaviour``'s ``on_rewards``, ``run/trl_internals.py``).

Each conversation is summarised for the run's health: whether the model called a tool, whether it wrote a call
the parser could not read (``<tool_call>`` in its text and no call parsed), how many results were errors (TRL's
``{'error': ...}`` for a tool that raised, or a library tool's ``error: ...`` line), how many results TRL dropped
because the conversation with them would pass the token budget (``rewards.tool_use.unanswered``), and whether it
was cut at that budget. In training, ``DroppedResults`` counts the results TRL dropped at each scored batch.
``worked_exchanges`` counts, before any sampling, the tokens a worked exchange of the
prompt's examples takes after its question, as TRL counts them against ``max_completion_length``.
"""

import contextlib
import copy
import sys
from dataclasses import dataclass, field

from grpo_ext.rewards.api import call_text
from grpo_ext.rewards.tool_use import is_error, unanswered
from grpo_ext.run import hardware, shares, trainer, trl_internals
from grpo_ext.run.trl_internals import Behaviour, Step

CALL_TAG = "<tool_call>"  # what a ChatML tool call opens with (grpo_ext's template and the Qwen family's)


@dataclass
class Rollouts:
    """Per sample, in row order (``samples`` per row): the conversation, its token ids and each reward's score."""

    completions: list = field(default_factory=list)  # each a list of messages: assistant, tool, assistant, ...
    completion_ids: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # reward name -> [score or None per sample]
    cut: list = field(default_factory=list)  # per sample: cut at the token budget (TRL's completions/clipped_ratio)
    iterations: int | None = None  # the tool loop's max_tool_calling_iterations (None: no limit)
    budget: int | None = None  # the tokens a conversation had after its prompt, tool results included

    def tool_counts(self) -> dict:
        """Shares of samples that called a tool, wrote a call that could not be read, or got an error back; the
        mean number of calls per sample; the tool results TRL dropped (a count, and a share of the calls it ran)."""
        n = len(self.completions) or 1
        calls = [sum(len(m.get("tool_calls") or []) for m in c if m.get("role") == "assistant") for c in self.completions]
        unread = [any(_unread_call(m) for m in c) for c in self.completions]
        errors = [sum(is_error(m.get("content")) for m in c if m.get("role") == "tool") for c in self.completions]
        counted = [unanswered(c, self.iterations) for c in self.completions]
        dropped, ran = sum(d for d, _ in counted), sum(calls) - sum(never for _, never in counted)
        return {
            "samples": len(self.completions),
            "called": round(sum(x > 0 for x in calls) / n, 4),
            "unread_call": round(sum(unread) / n, 4),
            "error_back": round(sum(x > 0 for x in errors) / n, 4),
            "calls_per_sample": round(sum(calls) / n, 4),
            "errors_per_call": round(sum(errors) / sum(calls), 4) if sum(calls) else 0.0,
            "dropped": dropped,
            "dropped_per_call": round(dropped / ran, 4) if ran else 0.0,
            "budget": self.budget,
        }

    def transcripts(self) -> list[str]:
        """Each conversation as a person reads it (``transcript``), a result TRL dropped named where it would be."""
        return [transcript(c, self.budget if unanswered(c, self.iterations)[0] else None) for c in self.completions]


def _unread_call(message: dict) -> bool:
    return message.get("role") == "assistant" and not message.get("tool_calls") and CALL_TAG in str(message.get("content"))


class Captured(Behaviour):
    """Each scored batch's conversations, token ids and scores, as TRL's reward call saw them (``sample``)."""

    def __init__(self):
        self.batches: list[tuple] = []

    def on_rewards(self, step: Step, completions: list, completion_ids: list, scores) -> None:
        self.batches.append((completions, completion_ids, scores))


class DroppedResults(Behaviour):
    """A recipe with tools or an environment: at each scored batch, the tool results TRL dropped from this process's
    conversations, counted over every process, go into the step's metrics: ``tools/dropped_results``, a count over
    the whole step, and ``tools/dropped_frequency``, their share of the calls TRL ran (TRL's own
    ``tools/failure_frequency`` counts a dropped call as one that worked)."""

    def on_rewards(self, step: Step, completions: list, completion_ids: list, scores) -> None:
        import torch

        trainer = step.trainer
        limit = getattr(trainer, "max_tool_calling_iterations", None)
        counted = [unanswered(c, limit) for c in completions]
        calls = sum(len(m.get("tool_calls") or []) for c in completions if isinstance(c, list) for m in c if isinstance(m, dict))
        local = torch.tensor([calls - sum(n for _, n in counted), sum(d for d, _ in counted)], device=trainer.accelerator.device)
        ran, dropped = trainer.accelerator.gather(local).view(-1, 2).sum(0).tolist()
        step.log("tools/dropped_frequency", dropped / ran if ran else 0.0)
        step.tally("tools/dropped_results", dropped)


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
        trl_internals.forget_eval_metrics(trainer)


def sample(
    trainer,
    rows: list[dict],
    *,
    samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    batch_size: int,
    shared: bool = False,
):
    """``samples`` conversations for each row (its columns reach the environment's ``reset`` and the rewards, as in
    training), ``batch_size`` at a time, each batch seeded by ``seed`` and its position; returns ``Rollouts``. With
    ``shared``, every process of the run plays its batches in step with the others (``run.shares``: TRL gathers
    each batch's rewards across them) and every process gets every conversation."""
    import torch

    out = Rollouts()
    names = list(trainer.reward_func_names)
    seen = Captured()
    index, count = shares.processes() if shared else (0, 1)
    per_batch = shares.per_batch(len(rows), batch_size, samples, count)
    batches = shares.plan(len(rows), per_batch, index, count, lockstep=True)
    was_training = trainer.model.training
    trainer.model.eval()
    try:
        with _eval_sampling(trainer, samples, temperature, max_new_tokens), trl_internals.behaving(trainer, seen):
            for batch in batches:
                # each sample its own copy: a reset's text is added to the last message of its own prompt (TRL 1.8 in place)
                inputs = [copy.deepcopy(rows[i]) for i in batch.rows for _ in range(samples)]
                torch.manual_seed(seed + batch.start)
                with torch.no_grad():
                    trl_internals.sample_batch(trainer, inputs)
    finally:
        trainer.model.train(was_training)
    stops = stop_ids(trainer.model, trainer.processing_class)
    out.iterations, out.budget = _iterations(trainer), max_new_tokens
    mine = []
    for batch, (completions, ids, scores) in zip(batches, seen.batches, strict=True):
        n = batch.kept * samples  # the filling's samples are dropped
        own = scores[index * len(ids) : (index + 1) * len(ids)]  # TRL's scores are every process's rows, in process order
        columns = {name: [None if x != x else x for x in own[:n, j].tolist()] for j, name in enumerate(names)}  # NaN: None
        mine.append((batch.start, [list(c) for c in completions[:n]], [list(x) for x in ids[:n]], columns))
    for _, completions, ids, columns in sorted(shares.gather(mine) if count > 1 else mine, key=lambda b: b[0]):
        out.completions += completions
        out.completion_ids += ids
        out.cut += [cut_short(x, stops) for x in ids]
        for name, column in columns.items():
            out.scores.setdefault(name, []).extend(column)
    return out


def _iterations(trainer) -> int | None:
    """The trainer's max_tool_calling_iterations; None where there is no limit (TRL keeps sys.maxsize for it)."""
    limit = getattr(trainer, "max_tool_calling_iterations", None)
    return limit if isinstance(limit, int) and limit < sys.maxsize else None


def stop_ids(model, tokenizer) -> set[int]:
    """The tokens that end a completion as TRL reads them for ``completions/clipped_ratio``: the tokenizer's end
    token, every end token the model's generation config declares, and padding."""
    generation = getattr(model, "generation_config", None)  # a model that generates has one; a wrapped one may not
    declared = generation.eos_token_id if generation is not None else None
    declared = [declared] if isinstance(declared, int) else list(declared or [])
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's
    own = (getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None))
    return {t for t in (*own, *declared) if t is not None}


def cut_short(ids: list[int], stops: set[int]) -> bool:
    """A completion cut at the token budget: its last token is not one that ends it (TRL's rule for
    ``completions/clipped_ratio``).

    >>> cut_short([5, 6, 7], {2}), cut_short([5, 2], {2}), cut_short([], {2})
    (True, False, False)
    """
    return bool(ids) and ids[-1] not in stops


@dataclass(frozen=True)
class Exchange:
    """A worked exchange among a prompt's messages (a question, calls and their results, a closing reply): where it
    starts, and the tokens it takes after its question through each turn of results (the next turn's opening
    included) and through its closing reply, as TRL counts a conversation against ``max_completion_length``."""

    start: int
    through_results: tuple[int, ...]
    whole: int


def worked_exchanges(tokenizer, prompt) -> list[Exchange]:
    """The exchanges with tool calls among a chat prompt's messages (``data.examples`` as the model reads them),
    measured by rendering them with ``tokenizer``'s chat template: the turns after the question less the question
    with its generation prompt, as TRL builds the call, its result and what follows by concatenation. Held against
    TRL's own count on SmolLM2 with grpo_ext's ChatML tool template: 57 tokens through the result and 63 in all for
    ``recipes/arith-tools.yaml``'s first example, TRL's 33 (the call) + 24 (the result) and + 6 (the answer)."""
    if not isinstance(prompt, list):
        return []

    def ids(messages, generation: bool) -> list[int]:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    found, start = [], None
    for i, message in enumerate(prompt):
        role = message.get("role")
        if role == "user":
            start = i
        elif role == "assistant" and not message.get("tool_calls") and start is not None:
            turns = prompt[start + 1 : i + 1]
            if any(m.get("tool_calls") for m in turns):
                head = prompt[: start + 1]
                base = len(ids(head, True))
                through = [
                    len(ids(head + turns[: j + 1], True)) - base
                    for j, m in enumerate(turns)
                    if m.get("role") == "tool" and (j + 1 == len(turns) or turns[j + 1].get("role") != "tool")
                ]
                whole = ids(head + turns, False)
                ends = [k for k, t in enumerate(whole) if t == tokenizer.eos_token_id]
                found.append(Exchange(start, tuple(through), (ends[-1] + 1 if ends else len(whole)) - base))
            start = None
    return found


def has_tool_turns(completion) -> bool:
    """A conversation with a tool call or a tool result in it (not a plain reply)."""
    return isinstance(completion, list) and any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")) for m in completion
    )


def transcript(completion, budget: int | None = None) -> str:
    """One conversation as a person reads it: the model's text, each call as ``→ name(arguments)`` and each result as
    ``← result``; a plain completion is returned as it is. With ``budget``, the closing call's results were dropped
    (``Rollouts.transcripts``), and a ``←`` line says so in their place."""
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
    if budget is not None:
        lines.append(f"← (result dropped: the conversation would pass max_completion_length ({budget}))")
    return "\n".join(lines)


def sampler(recipe, model, tokenizer, rows: list[dict], scratch):
    """A trainer around ``model`` that plays the recipe's tool loop outside a training run (``grpo-ext eval`` and its
    checkpoint sweep): the recipe's GRPOConfig on this machine, its tools and environment, its rewards. It never
    trains: no reference model (``beta`` 0, so none loads), no tracker, ``scratch`` as its output folder, and
    ``rows`` (the prompts it will play) as the dataset TRL wants to be given."""
    from datasets import Dataset

    kwargs, _, _ = trainer.config_kwargs(recipe, trainer.config_fields())
    hardware.device_defaults(kwargs, recipe.model.quantization is not None)
    kwargs.update(output_dir=str(scratch), beta=0.0, report_to=[], save_strategy="no", logging_strategy="no")
    return trainer.make_trainer(
        model=model,
        reward_funcs=recipe.reward_funcs,
        args=trainer.make_config({**kwargs, "save_total_limit": None}),
        train_dataset=Dataset.from_list([dict(r) for r in rows]),
        tokenizer=tokenizer,
        behaviours=[DroppedResults()] if recipe.agentic else [],
        share_prompt=recipe.groups.share_prompt,
        tools=recipe.tool_functions or None,
        environment_factory=recipe.environment_factory,
    )
