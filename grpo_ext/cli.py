"""The ``grpo-ext`` command (also ``python -m grpo_ext``).

    grpo-ext train RECIPE [key=value ...] [--dry-run]   train (same as python -m grpo_ext.train)
    grpo-ext validate FILE [FILE ...]                   check recipes; exit 2 if any is bad
    grpo-ext ls                                         shipped recipes, rewards and model aliases
    grpo-ext cp NAME DEST.yaml                          copy a shipped recipe to edit
    grpo-ext eval RECIPE --model A [--model B ...]      score models side by side on the recipe's eval prompts
    grpo-ext rewards [ls]                               reward names with their one-line descriptions
    grpo-ext rewards show NAME                          a reward's arguments and documentation
    grpo-ext rewards score NAME --completion TEXT [--answer A] [--arg k=v]   score one completion
    grpo-ext merge RUN_DIR [--out DIR]                  fold a LoRA adapter into its base model
    grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB]   estimate peak memory; what to change if it will not fit
"""

import argparse
import shutil
import sys
from pathlib import Path

from grpo_ext import catalog
from grpo_ext.errors import RecipeError


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


def cmd_ls(_args) -> int:
    from grpo_ext import rewards

    print("recipes (grpo-ext cp NAME my.yaml; python -m grpo_ext.train NAME):")
    for name, path in catalog.shipped_recipes().items():
        print(f"  {name:<24} {catalog.recipe_summary(path)}")
        print(f"  {'':<24} {catalog.recipe_facts(path)}")
    print("rewards:")
    for name in rewards.known_names():
        print(f"  {name:<24} {_first_line(rewards.REGISTRY[name].__doc__) if name in rewards.REGISTRY else '(entry point)'}")
    print("model aliases:")
    for name, entry in catalog.MODELS.items():
        print(f"  {name:<24} {entry['about']}")
    return 0


def cmd_rewards(args) -> int:
    """``grpo-ext rewards [ls]``: every reward name with its one-line description."""
    from grpo_ext import rewards

    for name in rewards.known_names():
        doc = rewards.REGISTRY[name].__doc__ if name in rewards.REGISTRY else "registered by an installed package"
        print(f"{name:<24} {_first_line(doc)}")
    return 0


def cmd_rewards_show(args) -> int:
    """``grpo-ext rewards show NAME``: where a reward comes from, its arguments and its whole docstring."""
    import inspect

    from grpo_ext.rewards import registry

    try:
        obj, is_factory = registry.find(args.name, Path.cwd())
    except LookupError as exc:
        raise RecipeError(f"rewards show: {exc}") from None
    source = "built in" if args.name in registry.REGISTRY else "module or file" if registry.is_reference(args.name) else "entry point"
    print(f"{args.name} ({source})")
    try:
        params = [p for p in inspect.signature(obj).parameters.values() if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD]
    except (TypeError, ValueError):
        params = []
    if is_factory:
        print("args: " + (", ".join(str(p) for p in params) or "none"))
    print(inspect.cleandoc(obj.__doc__ or "(no docstring)"))
    return 0


def cmd_rewards_score(args) -> int:
    """``grpo-ext rewards score NAME --completion TEXT [--answer A] [--arg key=value]``: one score, no model."""
    from grpo_ext import rewards
    from grpo_ext.recipe import parse_override

    reward_args = {}
    for text in args.arg:
        keys, value = parse_override(text)
        if len(keys) != 1:
            raise RecipeError(f"--arg {text!r}: give key=value with a plain key, e.g. --arg max_length=256")
        reward_args[str(keys[0])] = value
    fn = rewards.build(args.name, reward_args, Path.cwd(), "rewards score")
    columns = {"answer": [args.answer]} if args.answer is not None else {}
    if args.answer is not None and "answer_column" in reward_args:
        columns = {reward_args["answer_column"]: [args.answer]}
    try:
        score = fn(prompts=[""], completions=[args.completion], **columns)[0]
    except Exception as exc:
        print(f"error: reward {args.name!r} raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"{getattr(fn, '__name__', args.name)}: {score}")
    return 0


def cmd_cp(args) -> int:
    shipped = catalog.shipped_recipes()
    if args.name not in shipped:
        from grpo_ext.recipe import suggest

        raise RecipeError(f"no shipped recipe named {args.name!r}{suggest(args.name, shipped)}")
    dest = Path(args.dest)
    if dest.is_dir():
        dest = dest / shipped[args.name].name
    if dest.exists() and not args.force:
        raise RecipeError(f"{dest} exists; pass --force to replace it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shipped[args.name], dest)
    print(f"copied {args.name} to {dest}; edit it (runs go to its output_dir), then: "
          f"grpo-ext validate {dest} && python -m grpo_ext.train {dest}")
    return 0


def cmd_validate(args) -> int:
    from grpo_ext.recipe import load

    status = 0
    for ref in args.files:
        try:
            load(ref)
            print(f"{ref}: ok")
        except RecipeError as exc:
            for line in exc.lines():
                print(line, file=sys.stderr)
            status = 2
    return status


def cmd_eval(args) -> int:
    from grpo_ext import compare, train
    from grpo_ext.errors import RunError
    from grpo_ext.recipe import load

    recipe = load(args.recipe, args.overrides)
    funcs, _weights = train.build_rewards(recipe)
    train.quiet_third_parties(args.verbose)
    try:
        result = compare.compare(recipe, list(dict.fromkeys(args.model)), funcs, train.say)
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"eval: {compare.headline(result)}")
    print("\n".join(compare.table(result) + [""] + compare.sample_lines(result)))
    as_json, as_md = compare.write(result, Path(args.out) if args.out else compare.default_out(recipe))
    train.say(f"wrote {as_json} and {as_md}")
    return 0


def cmd_merge(args) -> int:
    from grpo_ext import merge
    from grpo_ext.errors import RunError

    try:
        return merge.main(args.run_dir, args.out, check=not args.no_check)
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def cmd_plan(args) -> int:
    from grpo_ext import plan

    return plan.main(args.recipe, args.overrides, args.gpu_memory, args.device)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "train":
        from grpo_ext import train

        return train.main(argv[1:])
    p = argparse.ArgumentParser(prog="grpo-ext", description="GRPO training from YAML recipes on top of TRL.")
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("train", help="train from a recipe (python -m grpo_ext.train --help)")
    sub.add_parser("ls", help="shipped recipes, rewards and model aliases").set_defaults(fn=cmd_ls)
    rw = sub.add_parser("rewards", help="reward names (ls), one reward's documentation (show), try one (score)")
    rw.set_defaults(fn=cmd_rewards)
    rw_sub = rw.add_subparsers(dest="rewards_verb")
    rw_sub.add_parser("ls", help="every reward name with its one-line description").set_defaults(fn=cmd_rewards)
    show = rw_sub.add_parser("show", help="a reward's source, arguments and documentation")
    show.add_argument("name")
    show.set_defaults(fn=cmd_rewards_show)
    score = rw_sub.add_parser("score", help="score one completion, without a model")
    score.add_argument("name")
    score.add_argument("--completion", required=True, help="the completion text to score")
    score.add_argument("--answer", help="the reference answer (the dataset's answer column)")
    score.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE", help="a reward argument (repeatable)")
    score.set_defaults(fn=cmd_rewards_score)
    cp = sub.add_parser("cp", help="copy a shipped recipe to edit")
    cp.add_argument("name")
    cp.add_argument("dest")
    cp.add_argument("--force", action="store_true")
    cp.set_defaults(fn=cmd_cp)
    val = sub.add_parser("validate", help="check recipe files without loading any model")
    val.add_argument("files", nargs="+")
    val.set_defaults(fn=cmd_validate)
    mg = sub.add_parser("merge", help="fold a LoRA run's adapter into its base; write a plain checkpoint")
    mg.add_argument("run_dir", help="the run directory (output_dir) of a run trained with model.lora")
    mg.add_argument("--out", help="where to write the merged model (default: RUN_DIR/merged)")
    mg.add_argument("--no-check", action="store_true", help="skip comparing greedy answers on the eval prompts")
    mg.set_defaults(fn=cmd_merge)
    pl = sub.add_parser("plan", help="estimate peak memory of a recipe; say what to change when it will not fit")
    pl.add_argument("recipe", help="recipe file, or a shipped recipe's name")
    pl.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. model.quantization=4bit")
    pl.add_argument("--gpu-memory", help="memory of one GPU, e.g. 8GiB; plans for that GPU (exit 1 when it will not fit)")
    pl.add_argument("--device", choices=["cpu", "cuda"], help="plan for this device (default: cuda with --gpu-memory, else cpu)")
    pl.set_defaults(fn=cmd_plan)
    ev = sub.add_parser("eval", help="score models side by side on a recipe's eval prompts with its rewards")
    ev.add_argument("recipe", help="recipe file, or a shipped recipe's name")
    ev.add_argument("overrides", nargs="*", help="section.key=value overrides, e.g. eval.samples=16")
    ev.add_argument("--model", action="append", required=True,
                    help="catalog alias, hub id, local path, or run directory (repeat to compare)")
    ev.add_argument("--out", help="folder for eval.json and eval.md (default: eval-NAME beside the recipe's output_dir)")
    ev.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    ev.set_defaults(fn=cmd_eval)
    if not argv:
        p.print_help(sys.stderr)
        return 2
    args, extra = p.parse_known_args(argv)
    if extra and (not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra)):
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides += extra  # key=value overrides written after the options
    try:
        return args.fn(args)
    except RecipeError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
