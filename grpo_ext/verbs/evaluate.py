"""``grpo-ext eval``: score several models on a recipe's eval prompts, side by side.

    grpo-ext eval RECIPE --model A [--model B ...] [section.key=value ...] [--out DIR]

A model is a catalog alias, a hub id, a local directory or ``.gguf`` file, or a run directory (its
``final/`` is loaded; a LoRA adapter there is put back on its base model with peft). Each model samples
``eval.samples`` completions per eval prompt with the same seed, under the precision training would use
(bf16 autocast where it chooses bf16), and the recipe's rewards score them exactly as they score
completions in training. The table goes to stdout; ``eval.json`` and ``eval.md``
go to ``--out`` (default: ``eval-NAME`` next to the recipe's ``output_dir``).
"""

import gc
import json
import time
from pathlib import Path

from grpo_ext import catalog, compat, models, report
from grpo_ext.errors import RunError
from grpo_ext.recipe import Recipe

FALLBACK_PROMPTS = 16
SHOWN_PROMPTS = 3
SHOWN_COMPLETIONS = 2


def locate(ref: str) -> tuple[str, Path | None, Path | None]:
    """(weights to load, adapter directory or None, run directory or None) for one ``--model``."""
    path = Path(ref).expanduser()
    if not path.is_dir():
        return ref, None, None
    run_dir = path if (path / "final").is_dir() else None
    weights = path / "final" if run_dir else path
    adapter_config = weights / "adapter_config.json"
    if not adapter_config.exists():
        return str(weights.resolve()), None, run_dir
    base = json.loads(adapter_config.read_text(encoding="utf-8")).get("base_model_name_or_path")
    recorded = _run_model(run_dir)
    candidates = [name for name in (base, recorded.get("name")) if name]
    usable = [n for n in candidates if n in catalog.MODELS or Path(n).expanduser().exists()]
    if not (usable or candidates):
        raise RunError(f"--model {ref}: {adapter_config} names no base model; set base_model_name_or_path in it")
    return (usable or candidates)[0], weights.resolve(), run_dir


def _run_model(run_dir: Path | None) -> dict:
    """The ``model:`` section a run was trained with (its recipe.yaml), or {}."""
    import yaml

    if run_dir is None or not (run_dir / "recipe.yaml").exists():
        return {}
    return (yaml.safe_load((run_dir / "recipe.yaml").read_text(encoding="utf-8")) or {}).get("model") or {}


def load(ref: str, model_cfg: dict, log) -> tuple[object, object, str]:
    """(model, tokenizer, description) for one ``--model``."""
    name, adapter, run_dir = locate(ref)
    cfg = {**model_cfg, **_run_model(run_dir), "name": name} if adapter else {**model_cfg, "name": name, "revision": None}
    cfg.setdefault("revision", None)
    try:
        model, tokenizer, described = models.load(cfg, Path.cwd(), log)
    except RunError as exc:
        if name in catalog.MODELS or Path(name).expanduser().exists():
            raise
        reason = str(exc).split(": could not load ", 1)[-1]
        raise RunError(f"--model {ref}: no such file or directory, and not loadable as a hub id {reason}; "
                       f"pass a catalog alias, a local path or a run directory") from None
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
        described = f"LoRA adapter {adapter} on {described}"
    elif run_dir:
        described = f"run {run_dir} (final/)"
    return model, tokenizer, described


def eval_rows(recipe: Recipe, chat: bool, log) -> list[dict]:
    from grpo_ext import data

    if recipe["data"]["eval_prompts"]:
        return list(data.dataset(recipe["data"], recipe.base_dir, chat, key="eval_prompts"))
    rows = list(data.dataset(recipe["data"], recipe.base_dir, chat))[:FALLBACK_PROMPTS]
    log(f"eval: the recipe has no data.eval_prompts; scoring the first {len(rows)} training prompts (not held out)")
    return rows


def compare(recipe: Recipe, refs: list[str], funcs: list, log) -> dict:
    """Evaluate each model in turn; the result keeps every model's scores under its ``--model`` label."""
    from grpo_ext import data, evaluate
    from grpo_ext.train import device_defaults

    training = recipe["training"]
    cfg = recipe["eval"]
    temperature = cfg["temperature"] if cfg["temperature"] is not None else compat.effective(training, "temperature")
    max_new = cfg["max_new_tokens"] or compat.effective(training, "max_completion_length")
    result = {"recipe": str(recipe.path), "samples": cfg["samples"], "temperature": temperature,
              "max_new_tokens": max_new, "pass_threshold": cfg["pass_threshold"], "seed": recipe["seed"],
              "held_out": bool(recipe["data"]["eval_prompts"]), "models": {}}
    precision = {key: training[key] for key in ("bf16", "fp16") if key in training}
    device_defaults(precision, recipe)  # the arithmetic training would use here: bf16 autocast or float32
    result["bf16"] = bool(precision.get("bf16"))
    for ref in refs:
        model, tokenizer, described = load(ref, recipe["model"], log)
        chat = data.use_chat(recipe["data"], tokenizer)
        rows = eval_rows(recipe, chat, log)
        t0 = time.monotonic()
        scores = evaluate.evaluate(model, tokenizer, rows, funcs, cfg, chat=chat, temperature=temperature,
                                   max_new_tokens=max_new, seed=recipe["seed"], bf16=result["bf16"])
        scores.update(model=described, seconds=round(time.monotonic() - t0, 1))
        result["models"][ref] = scores
        result["prompts"] = scores["prompts"]
        log(f"eval {ref}: " + ", ".join(f"{k} pass rate {v['pass_rate']}" for k, v in scores["rewards"].items())
            + f" ({scores['samples']} samples, {scores['seconds']} s)")
        del model
        gc.collect()
    return result


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def headline(result: dict) -> str:
    prompts = "held-out eval prompts" if result["held_out"] else "training prompts (no eval_prompts in the recipe)"
    return (f"{result.get('prompts', 0)} {prompts} x {result['samples']} samples, temperature {result['temperature']}"
            f"{', bf16 autocast' if result.get('bf16') else ''}, a sample passes when it scores at least {result['pass_threshold']}")


def table(result: dict) -> list[str]:
    """Per reward, mean and pass rate for each model side by side; then mean completion length."""
    labels = list(result["models"])
    width = max([18, *(len(label) + 2 for label in labels)])
    names = list(dict.fromkeys(n for scores in result["models"].values() for n in scores["rewards"]))
    lines = [f"{'':<24}" + "".join(f"{label:>{width}}" for label in labels),
             f"{'reward':<24}" + "".join(f"{'mean':>{width - 8}}{'pass':>8}" for _ in labels)]
    for name in names:
        cells = [result["models"][label]["rewards"].get(name, {}) for label in labels]
        lines.append(f"{name:<24}" + "".join(f"{_fmt(c.get('mean')):>{width - 8}}{_fmt(c.get('pass_rate')):>8}" for c in cells))
    lines.append(f"{'mean length (tokens)':<24}"
                 + "".join(f"{_fmt(result['models'][label].get('mean_length'), 1):>{width - 8}}{'':>8}" for label in labels))
    return [line.rstrip() for line in lines]


def sample_lines(result: dict) -> list[str]:
    """A few completions per model for the first prompts, quoted so whitespace shows."""
    labels = list(result["models"])
    width = max(len(label) for label in labels) + 2
    first = result["models"][labels[0]]["examples"]
    per_model = min(SHOWN_COMPLETIONS, result["samples"])
    lines = [f"samples ({per_model} per model for the first {min(SHOWN_PROMPTS, len(first))} prompts):"]
    for i, example in enumerate(first[:SHOWN_PROMPTS]):
        lines.append(f"  {example['prompt']}")
        for label in labels:
            examples = result["models"][label]["examples"]
            shown = examples[i]["completions"][:SHOWN_COMPLETIONS] if i < len(examples) else []
            lines.append(f"    {label:<{width}}" + "  ".join(json.dumps(c, ensure_ascii=False)[:80] for c in shown))
    return lines


def markdown(result: dict) -> str:
    labels = list(result["models"])
    names = list(dict.fromkeys(n for scores in result["models"].values() for n in scores["rewards"]))
    lines = ["# Eval: " + ", ".join(f"`{label}`" for label in labels), "",
             f"Recipe `{result['recipe']}`: {headline(result)}.", "", "## Scores", "",
             "| reward | " + " | ".join(f"{label}: mean | {label}: pass rate" for label in labels) + " |",
             "|---|" + "---:|---:|" * len(labels)]
    for name in names:
        cells = [result["models"][label]["rewards"].get(name, {}) for label in labels]
        lines.append(f"| {name} | " + " | ".join(f"{_fmt(c.get('mean'))} | {_fmt(c.get('pass_rate'))}" for c in cells) + " |")
    lines.append("| mean completion length (tokens) | "
                 + " | ".join(f"{_fmt(result['models'][label].get('mean_length'), 1)} | " for label in labels) + " |")
    lines += ["", "## Models", ""] + [f"- `{label}`: {result['models'][label]['model']}" for label in labels]
    lines += ["", "## Sample completions", ""] + report.samples_markdown(result["models"])
    return "\n".join(lines).rstrip() + "\n"


def default_out(recipe: Recipe) -> Path:
    run = Path(recipe["output_dir"])
    return run.parent / f"eval-{run.name}"


def write(result: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    as_json, as_md = out / "eval.json", out / "eval.md"
    as_json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    as_md.write_text(markdown(result), encoding="utf-8")
    return as_json, as_md
