"""Train a model with GRPO from a YAML recipe.

    python -m grpo_ext.train recipes/digit.yaml [section.key=value ...] [--dry-run] [--overwrite]

GRPO (Group Relative Policy Optimization) samples a group of completions per prompt, scores each with
the recipe's reward functions, and pushes the policy towards the completions that beat their group's
mean; there is no value network. TRL's GRPOTrainer does the work. This module reads as one story:
recipe → rewards → model → data → trainer → eval before → train → eval after → run directory.

Exit status: 0 done; 2 bad input (one ``error:`` line per problem, nothing written); 1 failed while running.
"""

import argparse
import contextlib
import json
import logging
import os
import platform
import sys
import time
import warnings

from grpo_ext import adapters, compat, launch, models, rundir
from grpo_ext.errors import RecipeError, RunError
from grpo_ext.recipe import Recipe, load


def say(message: str) -> None:
    print(f"grpo_ext: {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grpo_ext.train", description=__doc__.split("\n\n")[0])
    p.add_argument("recipe", help="recipe file, or a shipped recipe's name (see `grpo-ext ls`)")
    p.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. training.max_steps=5")
    p.add_argument("--dry-run", action="store_true", help="validate, resolve, print the effective GRPOConfig; load no weights")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run in output_dir")
    p.add_argument("--resume", action="store_true", help="continue the unfinished run in output_dir from its last complete checkpoint")
    p.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    return p.parse_intermixed_args(argv)  # overrides may follow the flags, as users type them


def build_rewards(recipe: Recipe) -> tuple[list, list[float]]:
    """Reward callables named uniquely for TRL's metrics, and their weights."""
    from grpo_ext import rewards
    from grpo_ext.rewards.guard import Guarded

    funcs, weights, seen = [], [], {}
    for i, (entry, fn) in enumerate(zip(recipe["rewards"], recipe.reward_funcs)):
        base = entry["name"] if entry["name"] in rewards.REGISTRY else getattr(fn, "__name__", f"reward_{i}")
        seen[base] = seen.get(base, 0) + 1
        funcs.append(Guarded(fn, base if seen[base] == 1 else f"{base}_{seen[base]}", where=f"rewards[{i}]",
                             on_error=entry["on_error"], timeout=entry["timeout"]))
        weights.append(entry["weight"])
    return funcs, weights


def config_kwargs(recipe: Recipe, weights: list[float], present: set[str] | None = None) -> tuple[dict, list[str], dict[str, str]]:
    """GRPOConfig kwargs for the installed TRL (``present``: its real fields, else the field table decides)."""
    training = dict(recipe["training"])
    if "reward_weights" in training:
        raise RecipeError("training.reward_weights: set each reward's weight in rewards[i].weight instead")
    kwargs, notes, marks = compat.translate(training, present=present)
    kwargs["reward_weights"] = weights
    kwargs["output_dir"] = recipe["output_dir"]
    kwargs["seed"] = recipe["seed"]
    return kwargs, notes, marks


def dry_run(recipe: Recipe, funcs: list, kwargs: dict, notes: list[str], marks: dict[str, str]) -> None:
    source = models.resolve(recipe["model"]["name"], recipe.base_dir)
    cached = models.checkpoint_dir(source)
    state = "" if cached is None else (f"; cached at {cached}" if models.is_cached(source) else "; first run fetches and converts it")
    data = recipe["data"]
    n_train = (f"file {data['file']}" if data["file"] else f"generator {data['source']}" if data["source"]
               else f"hub dataset {data['hub']} (split {data['hub_split']}; not fetched by a dry run)" if data["hub"]
               else f"{len(data['prompts'])} prompts")
    print(f"recipe: {recipe.path} (valid)")
    print(f"model: {source.describe()}{state}")
    print(f"training: {adapters.describe(recipe['model'])}")
    print("rewards: " + ", ".join(f"{f.__name__} (weight {w})" for f, w in zip(funcs, kwargs["reward_weights"])))
    n_eval = (len(data["eval_prompts"]) if data["eval_prompts"] is not None else data["source_args"].get("eval", "generated")
              if data["source"] else data["eval_size"] if data["eval_split"] else 0)
    print(f"data: {n_train}; {n_eval} eval prompts; chat format: {data['chat']}")
    print(f"output_dir: {recipe['output_dir']}")
    table = compat.table_for()
    print(f"trl {compat.trl_version()}, transformers {compat.transformers_version()}: effective GRPOConfig "
          f"(TRL defaults from the table of trl {table['trl']} with transformers {table['transformers']})")
    rows = compat.effective_rows(recipe["training"], marks)
    rows += [("reward_weights", kwargs["reward_weights"], "recipe: rewards[i].weight"),
             ("output_dir", kwargs["output_dir"], "recipe: output_dir"),
             ("seed", kwargs["seed"], "recipe: seed" if "seed" in recipe.given else "grpo_ext default")]
    for key, value, origin in rows:
        print(f"  {key:<32} {json.dumps(value, ensure_ascii=False)[:60]:<24}  {origin}")
    print("  use_cpu, bf16                    decided at launch from the device unless set (no GPU: use_cpu=true; "
          "bf16=true on a GPU or CPU with native bf16)")
    for note in notes:
        print(f"note: {note}")


def prepare_run_dir(recipe: Recipe, overwrite: bool, resume: bool = False) -> rundir.Prepared:
    auto = recipe["resume"] in (True, "auto") and not overwrite
    return rundir.prepare(recipe["output_dir"], overwrite=overwrite, resume=resume or auto)


def quiet_third_parties(verbose: bool) -> None:
    if verbose:
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    for name in ("transformers", "trl", "accelerate", "datasets", "peft", "bitsandbytes", "torch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with contextlib.suppress(ImportError):
        import datasets

        datasets.disable_progress_bars()
    with contextlib.suppress(ImportError):
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()


def versions() -> dict[str, str]:
    import importlib.metadata as md

    return {name: md.version(name) for name in ("trl", "transformers", "torch", "accelerate", "datasets")} | {
        "python": platform.python_version()}


def device_defaults(kwargs: dict, recipe: Recipe) -> list[str]:
    """use_cpu and bf16 for this machine where the recipe leaves them open (in place); the announcements."""
    import torch

    has_cuda = torch.cuda.is_available()
    return compat.hardware_defaults(kwargs, has_cuda, has_cuda and torch.cuda.is_bf16_supported(),
                                    compat.cpu_bf16(), bool(recipe["model"].get("quantization")))


def run(recipe: Recipe, funcs: list, weights: list[float], prepared: rundir.Prepared, verbose: bool,
        callbacks: list | None = None) -> dict:
    quiet_third_parties(verbose)
    from transformers import set_seed

    from grpo_ext import data, evaluate, report
    from grpo_ext.rewards import guard

    processes = launch.state()
    is_main = processes.is_main_process
    log = say if is_main else (lambda _msg: None)
    kwargs, notes, _ = config_kwargs(recipe, weights, compat.config_fields())
    for note in notes:
        log(note)
    for note in device_defaults(kwargs, recipe):
        log(note)
    set_seed(recipe["seed"])
    run_dir = prepared.path

    # Model and data
    model, tokenizer, described = models.load(recipe["model"], recipe.base_dir, log)
    log(f"training: {adapters.describe(recipe['model'])}")
    chat = data.use_chat(recipe["data"], tokenizer)
    train_set = data.dataset(recipe["data"], recipe.base_dir, chat)
    eval_rows = list(data.dataset(recipe["data"], recipe.base_dir, chat, key="eval_prompts")) if recipe["eval"]["enabled"] else []
    log(f"data: {len(train_set)} training prompts, {len(eval_rows)} eval prompts, {'chat messages' if chat else 'plain text'}")

    # Trainer
    keep = kwargs.get("save_total_limit")
    args = compat.make_config({**kwargs, "save_total_limit": None})  # rundir keeps the newest complete checkpoints
    metrics = report.MetricsLog(run_dir / "metrics.jsonl", is_main, log)
    trainer = compat.make_trainer(model=model, reward_funcs=funcs, args=args, train_dataset=train_set,
                                  tokenizer=tokenizer, peft_config=adapters.lora_config(recipe["model"]),
                                  callbacks=[guard.error_counter(funcs), metrics, rundir.marker_callback(is_main, keep),
                                             *(callbacks or [])])
    if args.disable_tqdm:
        from transformers import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # our own progress line replaces the raw log dicts

    summary = {"recipe": str(recipe.path), "model": described, "versions": versions(), "status": "running",
               "steps": 0, "train_seconds": None, "reward_first": None, "reward_last": None,
               "eval_before": None, "eval_after": None, "processes": processes.num_processes}
    if is_main:
        (run_dir / "recipe.yaml").write_text(recipe.to_yaml(), encoding="utf-8")
        report.write_summary(run_dir, summary)

    eval_cfg = recipe["eval"]
    temperature = eval_cfg["temperature"] if eval_cfg["temperature"] is not None else args.temperature
    max_new = eval_cfg["max_new_tokens"] or args.max_completion_length

    def run_eval(label: str) -> dict | None:
        if not eval_rows or not is_main:
            return None
        t0 = time.monotonic()
        result = evaluate.evaluate(trainer.model, tokenizer, eval_rows, funcs, eval_cfg, chat=chat, temperature=temperature,
                                   max_new_tokens=max_new, seed=recipe["seed"], bf16=args.bf16)  # training's arithmetic
        result["seconds"] = round(time.monotonic() - t0, 1)
        rates = ", ".join(f"{k} {v['pass_rate']}" for k, v in result["rewards"].items())
        log(f"eval {label}: pass rate {rates} ({result['samples']} samples, {result['seconds']} s)")
        return result

    if prepared.resume_from:
        log(f"resuming from {prepared.resume_from.name}; metrics.jsonl kept up to step {rundir.step_of(prepared.resume_from)}")
    summary["eval_before"] = (prepared.previous or {}).get("eval_before") or run_eval("before")
    log(f"training: {args.max_steps if args.max_steps > 0 else 'epochs'} steps of {args.per_device_train_batch_size} "
        f"completions ({args.num_generations} per prompt); metrics in {run_dir / 'metrics.jsonl'}")
    t0 = time.monotonic()
    try:
        trainer.train(resume_from_checkpoint=str(prepared.resume_from) if prepared.resume_from else None)
    except KeyboardInterrupt:
        summary["status"] = "interrupted"
        if is_main:
            report.finish(run_dir, summary, log)
        raise
    except Exception as exc:
        summary.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
        if is_main:
            report.finish(run_dir, summary, log)
        if isinstance(exc, (RunError, RecipeError)):
            raise
        raise RunError(f"training failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
    summary["train_seconds"] = round(time.monotonic() - t0, 1)
    summary["steps"] = trainer.state.global_step
    rewards = [line["reward"] for line in rundir.read_metrics(run_dir / "metrics.jsonl")] or [r for _, r in metrics.rewards]
    if rewards:
        summary["reward_first"], summary["reward_last"] = rewards[0], rewards[-1]
    summary["eval_after"] = run_eval("after")

    trainer.save_model(str(run_dir / "final"))  # every process: sharded engines gather the weights; only the main one writes
    if is_main:
        tokenizer.save_pretrained(str(run_dir / "final"))
        summary["status"] = "completed"
        report.finish(run_dir, summary, log)
        for line in report.eval_table(summary["eval_before"], summary["eval_after"]):
            print(line)
        log(f"done in {summary['train_seconds']} s of training; run directory {run_dir}")
    return summary


def main(argv: list[str] | None = None, callbacks: list | None = None) -> int:
    """Command-line entry; ``callbacks`` (transformers TrainerCallbacks) are added to the trainer."""
    opts = parse_args(argv)
    try:
        recipe = load(opts.recipe, opts.overrides)
        funcs, weights = build_rewards(recipe)
        kwargs, notes, marks = config_kwargs(recipe, weights)
        missing = adapters.missing_packages(recipe["model"])
        if opts.dry_run:
            dry_run(recipe, funcs, kwargs, notes + missing, marks)
            return 0
        if missing:
            raise RecipeError(missing, str(recipe.path))
        prepared = launch.on_main_first(lambda: prepare_run_dir(recipe, opts.overwrite, opts.resume))
    except RecipeError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        launch.close(completed=False)
        return 2
    completed = False
    try:
        run(recipe, funcs, weights, prepared, opts.verbose, callbacks)
        completed = True
    except (RunError, RecipeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; the run directory keeps what was saved", file=sys.stderr)
        return 130
    finally:
        launch.close(completed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
