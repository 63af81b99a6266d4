"""``grpo-ext merge RUN_DIR [--out DIR]``: turn a LoRA run's adapter into a plain model checkpoint.

The base model and its loading settings (dtype, quantization) come from the run's ``recipe.yaml``; the
base weights from the path recorded in the adapter's config. The merged model is then loaded back with
``AutoModelForCausalLM.from_pretrained`` and its greedy answers on the recipe's eval prompts are
compared with those of the trained model (base plus adapter), unless ``--no-check``.
"""

import json
from pathlib import Path

import yaml

from grpo_ext.errors import RecipeError, RunError


def _say(message: str) -> None:
    import sys

    print(f"grpo_ext: {message}", file=sys.stderr, flush=True)


def read_run(run_dir: Path):
    """The run's recipe (validated) with the model name pointing at the base the adapter was trained on."""
    from grpo_ext.recipe import validate

    final = run_dir / "final"
    if not (run_dir / "recipe.yaml").is_file():
        raise RecipeError(f"{run_dir}: no recipe.yaml here; give the run directory of a finished run (its output_dir)")
    if not (final / "adapter_config.json").is_file():
        what = "a full model, already loadable with from_pretrained" if (final / "config.json").is_file() else "no adapter"
        raise RecipeError(f"{final}: holds {what}; merge needs a run trained with model.lora")
    recipe = validate(yaml.safe_load((run_dir / "recipe.yaml").read_text(encoding="utf-8")), run_dir / "recipe.yaml")
    base = json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"]
    if base and Path(base).is_dir():
        recipe.data["model"]["name"] = base
    return recipe


def greedy_answers(model, tokenizer, recipe) -> list[str]:
    from grpo_ext import data, evaluate

    chat = data.use_chat(recipe["data"], tokenizer)
    rows = data.dataset(recipe["data"], recipe.base_dir, chat, key="eval_prompts")
    max_new = recipe["eval"]["max_new_tokens"] or recipe["training"].get("max_completion_length") or 64
    answers = evaluate.generate(model, tokenizer, [r["prompt"] for r in rows], samples=1, max_new_tokens=max_new,
                                temperature=0.0, batch_size=recipe["eval"]["batch_size"], seed=recipe["seed"])
    return [a[0] for a in answers]


def main(run_dir: str, out: str | None, check: bool) -> int:
    from grpo_ext import adapters
    from grpo_ext.train import quiet_third_parties

    run = Path(run_dir)
    recipe = read_run(run)
    dest = Path(out) if out else run / "merged"
    if dest.exists() and any(dest.iterdir()):
        raise RecipeError(f"--out: {dest} is not empty; remove it or give another: --out {dest}-2")
    quiet_third_parties(verbose=False)
    trained_answers = None
    if check and recipe["data"]["eval_prompts"]:
        trained, tokenizer = adapters.load_trained(run, recipe["model"], recipe.base_dir, _say)
        trained_answers = greedy_answers(trained, tokenizer, recipe)
        del trained
    adapters.merge(run, recipe["model"], recipe.base_dir, dest, _say)
    _say(f"merge: wrote {dest} ({adapters.describe(recipe['model'])} folded in)")
    if trained_answers is None:
        return 0
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(dest)
    tokenizer.padding_side = "left"
    merged_answers = greedy_answers(AutoModelForCausalLM.from_pretrained(dest), tokenizer, recipe)
    same = sum(a == b for a, b in zip(trained_answers, merged_answers))
    _say(f"merge: greedy answers on {len(trained_answers)} eval prompts: {same} identical to the trained model's")
    if same != len(trained_answers):
        first = next(i for i, (a, b) in enumerate(zip(trained_answers, merged_answers)) if a != b)
        raise RunError(f"merged model answers eval prompt {first} with {merged_answers[first]!r}, the trained model "
                       f"with {trained_answers[first]!r}; the merge is not faithful (8-bit bases compute differently)")
    return 0
