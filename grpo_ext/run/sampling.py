"""Sample a model on prompts, as an eval, the pre-flight and ``grpo-ext filter`` do: N completions per prompt, with
the arithmetic and the seeds that make two samplings of one model the same; or whole conversations, through the
trainer's tool loop (``run.rollouts``). What the samples score is ``results.scoring``'s. In a run on several
processes each samples its share of the prompts and every process gets them all (``run.shares``). Under DeepSpeed
ZeRO-3 single replies are sampled from the whole weights, gathered on every process as TRL gathers them for its own
generation (:func:`whole_weights`).

The settings of an eval (temperature, completion length, samples, precision, and the pass threshold its scoring
reads) are worked out in one place, :func:`settings`, for the run's own eval, ``grpo-ext eval`` and ``grpo-ext
merge``'s check alike.
"""

import contextlib
import dataclasses

from grpo_ext.recipe import Recipe, Training
from grpo_ext.run import decoding, rollouts, shares
from grpo_ext.settings import compat


@dataclasses.dataclass(frozen=True)
class Settings:
    """How an eval samples and judges: ``samples`` completions per prompt, up to ``max_new_tokens`` each."""

    samples: int
    max_new_tokens: int
    temperature: float
    batch_size: int
    pass_threshold: float
    seed: int
    bf16: bool = False  # sample under bf16 autocast, the arithmetic training uses when its bf16 is on
    pass_at: tuple[int, ...] = (1,)  # k values of pass@k
    generation: tuple = ()  # (key, value) pairs passed on to generate(): training's generation_kwargs, for the pre-flight

    def key(self) -> dict:
        """What makes two evals of one model give the same samples: equal keys, equal results."""
        skip = {"batch_size"} | ({"generation"} if not self.generation else set())
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip} | {
            "pass_at": list(self.pass_at)
        }


def settings(recipe: Recipe, bf16: bool) -> Settings:
    """The eval settings of a recipe: the ``eval:`` section, falling back to training's sampling values."""
    ev, training = recipe.eval, recipe.training
    temperature = ev.temperature if ev.temperature is not None else training.effective("temperature")
    max_new = ev.max_new_tokens or training.effective("max_completion_length")
    return Settings(
        samples=ev.samples,
        max_new_tokens=max_new,
        temperature=temperature,
        batch_size=ev.batch_size,
        pass_threshold=ev.pass_threshold,
        seed=recipe.seed,
        bf16=bf16,
        pass_at=tuple(sorted(set(ev.pass_at or (1, ev.samples)))),
    )


def as_training(s: Settings, training: Training, samples: int) -> Settings:
    """The same settings (seed, batch size, precision, threshold), ``samples`` completions per prompt drawn as
    training draws them: at its temperature and completion length, with its ``generation_kwargs``."""
    generation = training.effective("generation_kwargs")
    return dataclasses.replace(
        s,
        samples=samples,
        temperature=training.effective("temperature"),
        max_new_tokens=training.effective("max_completion_length"),
        generation=tuple(generation.items()) if isinstance(generation, dict) else (),
    )


def greedy(s: Settings) -> Settings:
    """The same settings, one greedy answer per prompt (for comparing two models' answers exactly)."""
    return dataclasses.replace(s, samples=1, temperature=0.0)


def _prompt_texts(tokenizer, prompts: list) -> list[str]:
    if prompts and isinstance(prompts[0], list):
        return [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    return list(prompts)


def generate(model, tokenizer, prompts: list, s: Settings) -> list[list[str]]:
    """``s.samples`` completions for each prompt (a list per prompt)."""
    return sample(model, tokenizer, prompts, s)[0]


def _completion_ids(row, eos_id: int | None) -> list[int]:
    """A generated row's token ids as TRL hands them to rewards: up to and including the first end token."""
    ids = row.tolist()
    if eos_id is not None and eos_id in ids:
        return ids[: ids.index(eos_id) + 1]
    return ids


def sample(
    model, tokenizer, prompts: list, s: Settings, *, shared: bool = False
) -> tuple[list[list[str]], list[list[list[int]]]]:
    """(texts, token ids): ``s.samples`` completions for each prompt, as text and as TRL's ``completion_ids``. With
    ``shared``, on several processes each samples its batches (``run.shares``) and every process gets them all."""
    import torch

    samples, temperature = s.samples, s.temperature
    texts = _prompt_texts(tokenizer, prompts)
    index, count = shares.processes() if shared else (0, 1)
    per_batch = shares.per_batch(len(texts), s.batch_size, samples, count)
    mine: list[tuple[int, list[list[str]], list[list[list[int]]]]] = []
    eos_id = tokenizer.eos_token_id
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    together = count > 1 and _zero3()  # every process generates as often as the busiest one (see _zero3)
    batches = (shares.in_step if together else shares.plan)(len(texts), per_batch, index, count)
    try:
        for batch in batches:
            start, chunk = batch.start, [texts[i] for i in batch.rows]
            torch.manual_seed(s.seed + start)  # the same draws for the same prompts, whatever the model did before
            enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False, return_token_type_ids=False).to(
                device
            )
            sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
            with torch.no_grad():
                settings = {"max_new_tokens": s.max_new_tokens, "pad_token_id": tokenizer.pad_token_id, "top_k": 0, "top_p": 1.0}
                settings |= sampling | dict(s.generation)  # training's generation_kwargs win, as they do in TRL
                # greedy: one reply a prompt, given `samples` times (generate refuses several greedy replies, each the same)
                returned = samples if temperature > 0 else 1
                ids = model.generate(**enc, num_return_sequences=returned, **settings)
            if not batch.kept:  # a spare: its samples are dropped
                continue
            generated = ids[:, enc["input_ids"].shape[1] :].repeat_interleave(samples // returned, dim=0)
            decoded = tokenizer.batch_decode(generated, skip_special_tokens=True)
            kept = [_completion_ids(row, eos_id) for row in generated]
            mine.append(
                (
                    start,
                    [decoded[i * samples : (i + 1) * samples] for i in range(len(chunk))],
                    [kept[i * samples : (i + 1) * samples] for i in range(len(chunk))],
                )
            )
    finally:
        model.train(was_training)
    every = sorted(shares.gather(mine) if count > 1 else mine, key=lambda batch: batch[0])
    return [c for _, out, _ in every for c in out], [x for _, _, out_ids in every for x in out_ids]


def _zero3() -> bool:
    """Whether DeepSpeed ZeRO-3 partitions the weights. Each process then samples inside :func:`whole_weights`, as TRL
    generates, with the steps of every process's generate() in line: transformers keeps the processes' tokens in step
    (``synced_gpus``), and DeepSpeed's hook on the model's forward, left in place after the first training step, talks
    to every process at each call; so each process makes as many generate() calls as the busiest one."""
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

    return is_deepspeed_zero3_enabled()


@contextlib.contextmanager
def whole_weights(trainer):
    """Sample single replies from ``trainer``'s model under DeepSpeed ZeRO-3 as TRL generates: inside TRL's
    ``unwrap_model_for_generation``, which gathers the partitioned weights on every process (each must enter, at the
    same point of the run) and lifts DeepSpeed's per-layer hooks from the model while it generates. Whatever
    ``ds3_gather_for_generation`` says: before the first step there are no hooks to fetch the weights a layer at a
    time. Without ZeRO-3 (one process, DDP, ZeRO-2), or with ``trainer`` None (the tool loop, whose generation
    through TRL gathers on its own), nothing happens."""
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None) if trainer is not None else None
    if plugin is None or plugin.zero_stage != 3:
        yield
        return
    from trl.models import unwrap_model_for_generation

    kwargs = compat.unwrap_kwargs(unwrap_model_for_generation, trainer.args.gradient_checkpointing_kwargs)
    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator, gather_deepspeed3_params=True, **kwargs):
        yield


def precision(model, s: Settings):
    """The arithmetic samples are drawn under: bf16 autocast when ``s.bf16`` (as training), each weight cast once a
    call (``decoding.bf16_decoding``), else as loaded."""
    return decoding.bf16_decoding(model, model.device.type) if s.bf16 else contextlib.nullcontext()


@contextlib.contextmanager
def random_state_kept():
    """Leave the random streams (torch's on the CPU and each GPU in use, Python's, numpy's) as they were found: an
    eval or the pre-flight seeds and draws its own samples, and training then draws what it would have without it."""
    import random

    import numpy as np
    import torch

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []  # no GPU state before use
    python, numpy = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)


def play(trainer, rows: list[dict], s: Settings, *, shared: bool = False) -> rollouts.Rollouts:
    """``s.samples`` conversations for each row, played by ``trainer`` through its tool loop under the sampling
    settings of ``s`` (``run.rollouts.sample``); with ``shared``, on every process of the run, each its share."""
    return rollouts.sample(
        trainer,
        rows,
        samples=s.samples,
        temperature=s.temperature,
        max_new_tokens=s.max_new_tokens,
        seed=s.seed,
        batch_size=s.batch_size,
        shared=shared,
    )
