"""Score a model on held-out prompts: N completions per prompt, sampled by ``run.sampling``, scored with the rewards.

Completions are handed to the rewards exactly as TRL hands them during training (message lists for
chat prompts, strings otherwise), so an eval score means the same as a training reward. The settings of an
eval (temperature, completion length, samples, precision, pass threshold) are ``run.sampling.settings``'s.
"""

import statistics

from grpo_ext.results import evalstats
from grpo_ext.rewards.api import RewardInfo, describe
from grpo_ext.run import launch, rollouts, sampling


def reward_inputs(
    rows: list[dict], completions: list[list[str]], *, chat: bool, completion_ids: list[list[list[int]]] | None = None
) -> tuple[list, list, dict]:
    """(prompts, completions, keyword columns) as TRL hands them to a reward: one entry per sample, flattened."""
    flat_prompts, flat_completions, extra = [], [], {}
    if completion_ids is not None:
        extra["completion_ids"] = [ids for per_prompt in completion_ids for ids in per_prompt]
    for row, comps in zip(rows, completions, strict=True):
        for text in comps:
            flat_prompts.append(row["prompt"])
            flat_completions.append([{"role": "assistant", "content": text}] if chat else text)
            for key, value in row.items():
                if key != "prompt":
                    extra.setdefault(key, []).append(value)
    return flat_prompts, flat_completions, extra


def score(
    rows: list[dict],
    completions: list[list[str]],
    reward_funcs: list,
    *,
    chat: bool,
    pass_threshold: float,
    tokenizer=None,
    completion_ids: list[list[list[int]]] | None = None,
    pass_at: tuple[int, ...] = (1,),
) -> dict:
    """Per reward: mean score and pass rate (share of samples scoring ≥ the reward's pass threshold, else
    ``pass_threshold``), each with its 95% interval over prompts, pass@k for each k in ``pass_at``, maj@n for
    a reward that extracts an answer (an ``answer_of`` method), and the per-prompt scores (for paired comparisons).

    With ``completion_ids`` the rewards get them as in training (length rewards count tokens), and the mean
    length counts them as TRL's ``completions/mean_length`` does; else lengths come from ``tokenizer``.
    """
    flat_prompts, flat_completions, extra = reward_inputs(rows, completions, chat=chat, completion_ids=completion_ids)
    scored = {fn.__name__: (fn, fn(prompts=flat_prompts, completions=flat_completions, **extra)) for fn in reward_funcs}
    result = summarize(rows, completions, flat_completions, scored, pass_threshold, pass_at)
    if completion_ids is not None:
        lengths = [len(ids) for ids in extra["completion_ids"]]
        result["mean_length"] = round(statistics.fmean(lengths), 2) if lengths else 0.0
    elif tokenizer is not None:
        lengths = [len(tokenizer(c, add_special_tokens=False)["input_ids"]) for comps in completions for c in comps]
        result["mean_length"] = round(statistics.fmean(lengths), 2) if lengths else 0.0
    return result


def summarize(rows: list[dict], completions: list[list], flat_completions: list, scored: dict, threshold: float, pass_at) -> dict:
    """The eval's result from each reward's flat scores (``scored``: name -> (the reward function or None, scores)),
    ``completions`` per row as a person reads them."""
    result = {"rewards": {}, "prompts": len(rows), "samples": len(flat_completions)}
    sizes = [len(c) for c in completions]
    for name, (fn, scores) in scored.items():
        info = describe(fn)  # fn None: an environment's get_reward, which declares nothing
        own = threshold if info.pass_threshold is None else info.pass_threshold
        judged = [x for x in scores if x is not None]
        result["rewards"][name] = {
            "mean": round(statistics.fmean(judged), 4) if judged else None,
            "pass_rate": round(sum(x >= own for x in judged) / len(judged), 4) if judged else None,
            "judged": len(judged),
            "pass_threshold": own,
            **_per_prompt_stats(info, scores, flat_completions, sizes, own, pass_at),
        }
    result["examples"] = [
        {"prompt": row["prompt"] if isinstance(row["prompt"], str) else row["prompt"][-1]["content"], "completions": comps[:3]}
        for row, comps in zip(rows[:3], completions[:3], strict=True)
    ]
    return result


def score_rollouts(rows: list[dict], sampled: "rollouts.Rollouts", reward_funcs: list, s: sampling.Settings) -> dict:
    """The eval's result from conversations sampled with the tool loop (``run.rollouts.sample``), scored there as
    in training: every reward of the recipe, and the environment's ``get_reward`` under its class name; how often
    the model called a tool, got an error back, or had a result dropped."""
    funcs = {fn.__name__: fn for fn in reward_funcs}
    scored = {name: (funcs.get(name), scores) for name, scores in sampled.scores.items()}
    texts = sampled.transcripts()
    per_row = [texts[i * s.samples : (i + 1) * s.samples] for i in range(len(rows))]
    result = summarize(rows, per_row, sampled.completions, scored, s.pass_threshold, s.pass_at)
    lengths = [len(ids) for ids in sampled.completion_ids]
    result["mean_length"] = round(statistics.fmean(lengths), 2) if lengths else 0.0
    result["tools"] = sampled.tool_counts()
    return result


def _per_prompt_stats(
    info: RewardInfo, scores: list, completions: list, sizes: list[int], threshold: float, pass_at: tuple
) -> dict:
    """Intervals, pass@k and maj@n of one reward's flat ``scores`` (maj@n where it declares ``answer_of``), and the
    judged scores of each prompt."""
    per_prompt, answers, start = [], [], 0
    answer_of = info.answer_of
    for size in sizes:
        chunk = range(start, start + size)
        per_prompt.append([scores[i] for i in chunk if scores[i] is not None])
        if answer_of is not None:
            answers.append([answer_of(completions[i]) for i in chunk if scores[i] is not None])
        start += size
    stats = evalstats.summarize(
        per_prompt, threshold, list(pass_at), answers if answer_of is not None else None, info.score_range
    )
    return {**stats, "per_prompt": per_prompt}


def score_model(
    model, tokenizer, rows: list[dict], reward_funcs: list, s: sampling.Settings, *, chat: bool, trainer=None
) -> dict:
    """Sample ``s.samples`` completions per row (under bf16 autocast when ``s.bf16``) and score them with the rewards.
    With ``trainer`` (a recipe with tools or an environment), the trainer samples whole conversations with its tool
    loop and scores them (``run.rollouts``)."""
    result = _score_model(model, tokenizer, rows, reward_funcs, s, chat, trainer, shared=False)
    assert result is not None  # one process scores what it sampled
    return result


def score_shared(
    model, tokenizer, rows: list[dict], reward_funcs: list, s: sampling.Settings, *, chat: bool, trainer=None
) -> dict | None:
    """``score_model`` on every process of a run: each samples its share of the rows (``run.shares``), the main
    process scores them all and returns the result, the others None. On one process, ``score_model``."""
    return _score_model(model, tokenizer, rows, reward_funcs, s, chat, trainer, shared=True)


def _score_model(model, tokenizer, rows: list[dict], reward_funcs: list, s: sampling.Settings, chat: bool, trainer, shared: bool):
    with sampling.random_state_kept():  # training then draws what it would have drawn without an eval
        if trainer is not None:
            played = sampling.play(trainer, rows, s, shared=shared)
            if shared and not launch.is_main():
                return None
            result = score_rollouts(rows, played, reward_funcs, s)
        else:
            with sampling.precision(model, s):
                completions, ids = sampling.sample(model, tokenizer, [r["prompt"] for r in rows], s, shared=shared)
            if shared and not launch.is_main():
                return None
            result = score(
                rows, completions, reward_funcs, chat=chat, pass_threshold=s.pass_threshold, completion_ids=ids, pass_at=s.pass_at
            )
    result["settings"] = s.key()
    return result


def change(before: dict | None, after: dict | None) -> dict:
    """Per reward scored on both sides: the pass rate of ``after`` minus that of ``before``, paired by prompt
    (both sampled the same prompts with the same seeds), with its 95% interval and a one-line verdict. Empty
    when either side is missing or the two evals did not score the same prompts."""
    if not before or not after or before.get("prompts") != after.get("prompts"):
        return {}
    out = {}
    for name, b in before["rewards"].items():
        a = after["rewards"].get(name)
        if a is None or "per_prompt" not in b or "per_prompt" not in a:
            continue
        rates = [
            [sum(x >= side["pass_threshold"] for x in scores) / len(scores) if scores else None for scores in side["per_prompt"]]
            for side in (b, a)
        ]
        weights = [(len(x) + len(y)) / 2 for x, y in zip(b["per_prompt"], a["per_prompt"], strict=True)]
        diff = evalstats.paired(rates[0], rates[1], weights)
        if diff is not None and diff.low is not None:
            diff = evalstats.Estimate(diff.value, max(-1.0, diff.low), min(1.0, diff.high))
        out[name] = {"difference": diff.as_dict() if diff else None, "verdict": evalstats.verdict(diff)}
    return out
