"""The ``eval`` verb: score several models on a recipe's eval prompts, side by side.

    grpo-ext eval RECIPE --model A [--model B ...] [section.key=value ...] [--out DIR]

A model is a catalog alias, a hub id, a local directory or ``.gguf`` file, or a run directory (its
``final/`` is loaded; a LoRA adapter there is put back on its base model with peft). Each model samples
``eval.samples`` completions per eval prompt with the same seed, under the precision training would use
(bf16 autocast where it chooses bf16), and the recipe's rewards score them exactly as they score
completions in training. The table goes to stdout; ``eval.json`` and ``eval.md``
go to ``--out`` (default: ``eval-NAME`` next to the recipe's ``output_dir``); either file already there stops
the command before a model loads, unless ``--force``.
"""

import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from grpo_ext.core import catalog, console
from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.core.files import exists, refuse_to_replace, user_path, write_atomic
from grpo_ext.recipe import Model, Recipe, load
from grpo_ext.results import preflight, report, scoring
from grpo_ext.run import chat_tools, data, hardware, heap, model_cache, models, rollouts, rundir, sampling

FALLBACK_PROMPTS = 16
SHOWN_PROMPTS = 3
SHOWN_COMPLETIONS = 2


def locate(ref: str) -> tuple[str, Path | None, Path | None]:
    """(weights to load, adapter directory or None, run directory or None) for one ``--model``."""
    path = user_path(ref)
    if not exists(path, "dir"):
        return ref, None, None
    unsaved = rundir.unsaved_final(path)
    if unsaved is not None:
        raise RecipeError(
            f"--model {ref}: the run saved no final/: {unsaved}; score one of its checkpoints (--checkpoints) or its base model"
        )
    run_dir = path if (path / "final").is_dir() else None
    weights = path / "final" if run_dir else path
    if not models.has_adapter(weights):
        return str(weights.resolve()), None, run_dir
    recorded = models.run_model_section(run_dir) if run_dir else {}
    return models.adapter_base(weights, recorded.get("name")), weights.resolve(), run_dir


def load_model(ref: str, section: Model, log) -> tuple[object, object, str]:
    """(model, tokenizer, description) for one ``--model``: a LoRA run's adapter sits on its base as in training;
    ``section``: the recipe's ``model:`` settings (dtype, quantization) it is loaded with."""
    name, adapter, run_dir = locate(ref)
    if adapter:
        return models.load_adapter(adapter, models.run_settings(section, run_dir) if run_dir else section, log)
    try:
        model, tokenizer, described = models.load(dataclasses.replace(section, name=name, revision=None), Path.cwd(), log)
    except RunError as exc:
        if name in catalog.MODELS or exists(user_path(name)):
            raise
        if isinstance(exc, model_cache.HubUnreachable):
            raise RunError(
                f"--model {ref}: no such file or directory, and not loadable as a hub id: {exc.why}; pass a catalog "
                f"alias (grpo-ext ls), a local path or a run directory, or reach the Hub (check the network, or set "
                f"HF_ENDPOINT to a Hub that answers)"
            ) from None
        reason = str(exc).split(": could not load ", 1)[-1]
        raise RunError(
            f"--model {ref}: no such file or directory, and not loadable as a hub id {reason}; "
            f"pass a catalog alias, a local path or a run directory"
        ) from None
    return model, tokenizer, f"run {run_dir} (final/)" if run_dir else described


def prompts_to_score(recipe: Recipe, chat: bool, log) -> list[dict]:
    """The recipe's held-out rows, the first ``eval.max_prompts`` of them; without any, the first training rows (said
    so)."""
    rows = data.eval_rows(recipe.data, recipe.base_dir, recipe.seed)
    if not rows:
        rows = data.train_rows(recipe.data, recipe.base_dir, FALLBACK_PROMPTS)
        log(f"eval: the recipe has no held-out prompts; scoring the first {len(rows)} training prompts (not held out)")
    cap = recipe.eval.max_prompts  # unset, every prompt: the scaling to a run's steps is the run's own
    if cap is not None and len(rows) > cap:
        log(f"eval: the first {cap} of {len(rows)} prompts (eval.max_prompts)")
        rows = rows[:cap]
    return data.formatted(rows, recipe.data, chat)


def score_loaded(recipe: Recipe, model, tokenizer, s: sampling.Settings, log, label: str) -> dict:
    """One model's scores on the recipe's eval prompts, rendered with the recipe's template; a recipe with tools or an
    environment plays them through the trainer's tool loop, as its training and its run's own eval do."""
    chat_tools.apply(tokenizer, recipe, log)
    chat = data.use_chat(recipe.data, tokenizer)
    rows = prompts_to_score(recipe, chat, log)
    if not recipe.agentic:
        return scoring.score_model(model, tokenizer, rows, recipe.reward_funcs, s, chat=chat)
    log(f"eval {label}: playing {len(rows)} prompts x {s.samples} conversations with the tool loop")
    with tempfile.TemporaryDirectory(prefix="grpo_ext_eval_") as scratch:
        sampler = rollouts.sampler(recipe, model, tokenizer, rows, scratch)
        result = scoring.score_model(model, tokenizer, rows, recipe.reward_funcs, s, chat=chat, trainer=sampler)
    log(f"eval {label}: {preflight.describe_tools(result['tools'])}")
    return result


def compare(recipe: Recipe, refs: list[str], log) -> dict:
    """Evaluate each model in turn; the result keeps every model's scores under its ``--model`` label."""
    s = sampling.settings(recipe, bf16=hardware.uses_bf16(recipe))  # the run's arithmetic
    result: dict[str, Any] = {
        "recipe": str(recipe.path),
        "samples": s.samples,
        "temperature": s.temperature,
        "max_new_tokens": s.max_new_tokens,
        "pass_threshold": s.pass_threshold,
        "seed": s.seed,
        "held_out": data.has_eval(recipe.data),
        "bf16": s.bf16,
        "models": {},
    }
    for ref in refs:
        model, tokenizer, described = load_model(ref, recipe.model, log)
        t0 = time.monotonic()
        scores = score_loaded(recipe, model, tokenizer, s, log, ref)
        scores.update(model=described, seconds=round(time.monotonic() - t0, 1))
        result["models"][ref] = scores
        result["prompts"] = scores["prompts"]
        log(
            f"eval {ref}: "
            + ", ".join(f"{k} pass rate {v['pass_rate']}" for k, v in scores["rewards"].items())
            + f" ({report.sample_count(scores)}, {scores['seconds']} s)"
        )
        del model
        heap.release()  # the next model loads into the memory this one held
    first, *others = result["models"]
    result["comparisons"] = {ref: scoring.change(result["models"][first], result["models"][ref]) for ref in others}
    return result


def comparison_lines(result: dict) -> list[str]:
    """Each model against the first, paired by prompt: one verdict line per reward."""
    first = next(iter(result["models"]))
    return [
        line
        for ref, changes in result.get("comparisons", {}).items()
        for line in report.change_lines(changes, f"{ref} vs {first}")
    ]


def headline(result: dict) -> str:
    prompts = "held-out eval prompts" if result["held_out"] else "training prompts (no eval_prompts in the recipe)"
    return (
        f"{result.get('prompts', 0)} {prompts} x {result['samples']} samples, temperature {result['temperature']}"
        f"{', bf16 autocast' if result.get('bf16') else ''}, a sample passes when it scores at least {result['pass_threshold']}"
    )


def sample_lines(result: dict) -> list[str]:
    """A few completions per model for the first prompts, quoted so whitespace shows."""
    labels = list(result["models"])
    width = max(len(label) for label in labels) + 2
    first = result["models"][labels[0]]["examples"]
    per_model = min(SHOWN_COMPLETIONS, result["samples"])
    lines = [f"samples ({per_model} per model for the first {min(SHOWN_PROMPTS, len(first))} prompts):"]
    for i, example in enumerate(first[:SHOWN_PROMPTS]):
        lines.append(f"  {json.dumps(example['prompt'], ensure_ascii=False)[:120]}")  # one line, as the completions
        for label in labels:
            examples = result["models"][label]["examples"]
            shown = examples[i]["completions"][:SHOWN_COMPLETIONS] if i < len(examples) else []
            lines.append(f"    {label:<{width}}" + "  ".join(json.dumps(c, ensure_ascii=False)[:80] for c in shown))
    return lines


def markdown(result: dict) -> str:
    labels = list(result["models"])
    lines = [
        "# Eval: " + ", ".join(f"`{label}`" for label in labels),
        "",
        f"Recipe `{result['recipe']}`: {headline(result)}.",
        "",
        "## Scores",
        "",
    ]
    lines += report.score_markdown(result["models"])
    lines += ["", report.INTERVALS_NOTE.replace("after vs before", "of each model against the first")]
    lines += [f"- {line}" for line in comparison_lines(result)]
    lines += ["", "## Models", ""] + [f"- `{label}`: {result['models'][label]['model']}" for label in labels]
    lines += ["", "## Sample completions", ""] + report.samples_markdown(result["models"])
    return "\n".join(lines).rstrip() + "\n"


def default_out(recipe: Recipe) -> Path:
    run = Path(recipe.output_dir)
    return run.parent / f"eval-{run.name}"


def written(out: Path) -> tuple[Path, Path]:
    """The files an eval writes into ``out``: eval.json and eval.md."""
    return out / "eval.json", out / "eval.md"


def write(result: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    as_json, as_md = written(out)
    write_atomic(as_json, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    write_atomic(as_md, markdown(result))
    return as_json, as_md


def evaluate_models(
    recipe: str | Path | Recipe,
    refs: list[str],
    overrides: list[str] | tuple = (),
    *,
    out: str | Path | None = None,
    force: bool = False,
    verbose: bool = False,
    log=console.say,
) -> dict:
    """Score each model (alias, hub id, local path or run directory) on the recipe's eval prompts with its
    rewards; print the table and a few samples; write eval.json and eval.md to ``out`` (either file already there
    is replaced only with ``force``). Returns the result."""
    recipe = recipe if isinstance(recipe, Recipe) else load(str(recipe), list(overrides))
    dest = user_path(out) if out else default_out(recipe)
    refuse_to_replace(written(dest), force, command="eval")
    recipe.build_rewards()  # a user's reward factory that refuses its args stops here, before any model loads
    console.quiet_third_parties(verbose)
    result = compare(recipe, list(dict.fromkeys(refs)), log)
    print(f"eval: {headline(result)}")
    print("\n".join(report.score_table(result["models"]) + comparison_lines(result) + [""] + sample_lines(result)))
    as_json, as_md = write(result, dest)
    log(f"wrote {as_json} and {as_md}")
    return result
