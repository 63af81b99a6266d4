"""The ``merge`` verb: turn a LoRA run's adapter into a plain model checkpoint.

    grpo-ext merge RUN_DIR [--out DIR] [--force] [--no-check]
    grpo_ext.merge("runs/digit-lora")

The base model and its loading settings (dtype, quantization) come from the run's ``recipe.yaml``; the
base weights from the path recorded in the adapter's config. The merged model is then loaded back with
``AutoModelForCausalLM.from_pretrained`` and its greedy answers on the recipe's eval prompts are
compared with those of the trained model (base plus adapter), unless ``check=False``. The merged model goes
into a folder that does not exist yet or is empty; one with something in it only with ``--force``, and a file there
never; both are said before any model loads.
"""

import dataclasses
from pathlib import Path

from grpo_ext.core import console
from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.core.files import refuse_to_replace, user_path
from grpo_ext.recipe import Recipe, read_yaml, validate
from grpo_ext.run import data, models, rundir, sampling
from grpo_ext.settings import adapters


def read_run(run_dir: Path) -> Recipe:
    """The run's recipe (validated) with the model name pointing at the base the adapter was trained on."""
    final = run_dir / "final"
    if not (run_dir / "recipe.yaml").is_file():
        raise RecipeError(f"{run_dir}: no recipe.yaml here; give the run directory of a finished run (its output_dir)")
    unsaved = rundir.unsaved_final(run_dir)
    if unsaved is not None:
        raise RecipeError(f"{run_dir}: no final/ to merge: {unsaved}; train with save_final: true to keep the adapter")
    if not models.has_adapter(final):
        what = "a full model, already loadable with from_pretrained" if (final / "config.json").is_file() else "no adapter"
        raise RecipeError(f"{final}: holds {what}; merge needs a run trained with model.lora")
    recipe = validate(read_yaml(run_dir / "recipe.yaml"), run_dir / "recipe.yaml")  # a damaged one: one error line
    recipe.model = dataclasses.replace(recipe.model, name=models.adapter_base(final, recipe.model.name))
    return recipe


def greedy_answers(model, tokenizer, recipe: Recipe) -> list[str]:
    """One greedy answer per eval prompt, with the recipe's eval completion length."""
    chat = data.use_chat(recipe.data, tokenizer)
    rows = data.formatted(data.eval_rows(recipe.data, recipe.base_dir, recipe.seed), recipe.data, chat)
    answers = sampling.generate(
        model, tokenizer, [r["prompt"] for r in rows], sampling.greedy(sampling.settings(recipe, bf16=False))
    )
    return [a[0] for a in answers]


def _once(log):
    """``log`` that says each distinct line once."""
    said: set[str] = set()

    def say(message: str) -> None:
        if message not in said:
            said.add(message)
            log(message)

    return say


def merge(
    run_dir: str | Path, out: str | Path | None = None, *, check: bool = True, force: bool = False, log=console.say
) -> Path:
    """Fold the adapter of ``run_dir/final`` into its base; write the plain checkpoint to ``out`` (default
    ``RUN_DIR/merged``; a folder with something in it only with ``force``) and return its path. With ``check``, the
    merged model must answer the eval prompts greedily exactly as the trained model does (RunError otherwise)."""
    run = Path(run_dir)
    recipe = read_run(run)
    dest = user_path(out) if out else run / "merged"
    refuse_to_replace([dest], force, command="merge", folder=True)
    console.quiet_third_parties(verbose=False)
    log = _once(log)  # the base loads twice (trained model, then the merge): its model line is said once
    trained_answers = None
    if check and data.has_eval(recipe.data):
        trained, tokenizer, _ = models.load_adapter(run / "final", recipe.model, log)
        trained_answers = greedy_answers(trained, tokenizer, recipe)
        del trained
    rundir.record(dest.parent, dest.name)  # RUN/merged is the run's: in its marker before it is made
    models.merge(run / "final", recipe.model, dest, log)
    log(f"merge: wrote {dest} ({adapters.describe(recipe.model.lora, recipe.model.quantization)} folded in)")
    if trained_answers is None:
        return dest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(dest)
    tokenizer.padding_side = "left"
    merged_answers = greedy_answers(AutoModelForCausalLM.from_pretrained(dest), tokenizer, recipe)
    same = sum(a == b for a, b in zip(trained_answers, merged_answers, strict=True))
    log(f"merge: greedy answers on {len(trained_answers)} eval prompts: {same} identical to the trained model's")
    if same != len(trained_answers):
        first = next(i for i, (a, b) in enumerate(zip(trained_answers, merged_answers, strict=True)) if a != b)
        raise RunError(
            f"merged model answers eval prompt {first} with {merged_answers[first]!r}, the trained model "
            f"with {trained_answers[first]!r}; the merge is not faithful (8-bit bases compute differently)"
        )
    return dest


def cmd_merge(args) -> None:
    merge(args.run_dir, args.out, check=not args.no_check, force=args.force)


def add_parser(subparsers) -> None:
    """``grpo-ext merge RUN_DIR [--out DIR] [--force] [--no-check]``."""
    p = subparsers.add_parser("merge", help="fold a LoRA run's adapter into its base; write a plain checkpoint")
    p.add_argument("run_dir", help="the run directory (output_dir) of a run trained with model.lora")
    p.add_argument("--out", help="the folder to write the merged model into (default: RUN_DIR/merged); new or empty")
    p.add_argument("--force", action="store_true", help="write into an --out folder that is not empty")
    p.add_argument("--no-check", action="store_true", help="skip comparing greedy answers on the eval prompts")
    p.set_defaults(fn=cmd_merge)
