"""The ``grpo-ext`` command (also ``python -m grpo_ext``; ``python -m grpo_ext.train`` is ``grpo-ext train``).

    grpo-ext train RECIPE [key=value ...] [--dry-run] [--overwrite] [--resume]   train from a recipe
    grpo-ext train RECIPE --quick [key=value ...]       every phase of a run, small: does the recipe run end to end?
    grpo-ext validate FILE [FILE ...] [key=value ...]   check recipes (with overrides); exit 2 if any is bad
    grpo-ext ls                                         shipped recipes, rewards and model aliases
    grpo-ext cp NAME DEST.yaml                          copy a shipped recipe to edit
    grpo-ext eval RECIPE --model A [--model B ...]      score models side by side on the recipe's eval prompts
    grpo-ext eval RECIPE --model RUN_DIR --checkpoints  score every checkpoint of a run; eval_curve.png
    grpo-ext rewards [ls]                               reward names with their one-line descriptions
    grpo-ext rewards show NAME                          a reward's arguments and documentation
    grpo-ext rewards score NAME --completion TEXT [--prompt P] [--answer A] [--arg k=v] [--column k=v]   score one completion
    grpo-ext tools [ls] | tools show NAME               tools a recipe's model may call, and one tool's documentation
    grpo-ext filter RECIPE [--model M] [--k 8] [--keep 0.1:0.9]   keep the training rows a model solves sometimes
    grpo-ext merge RUN_DIR [--out DIR] [--force]        fold a LoRA adapter into its base model
    grpo-ext push RUN_DIR OWNER/NAME [--private] [--revision BRANCH] [--dry-run]   publish final/ on the Hub, with a card
    grpo-ext plan RECIPE [key=value ...] [--gpu-memory 8GiB] [--gpus N --sharding zero3]   peak memory; what to change
    grpo-ext doctor RUN_DIR [--samples [N]]             a run's health: findings and remedies; exit 1 when not healthy
    grpo-ext doctor --env [RECIPE]                      versions, devices and cache for a bug report; known-bad combinations
    grpo-ext algorithms [NAME]                          GRPO variants a recipe names with algorithm:, and what each sets
    grpo-ext schema [--out FILE [--force]]              the recipe's JSON Schema, for an editor's YAML language server

Exit status, for every verb: 0 done; 2 bad input (one ``error:`` line per problem, nothing written);
1 a failure while running; 130 interrupted. A verb that writes files (cp, schema, eval, filter, merge) replaces
one already there only with ``--force``, and says so before any work.
"""

import argparse
import contextlib
import inspect
import json
import os
import sys
from pathlib import Path

from grpo_ext import rewards
from grpo_ext.core import catalog, references
from grpo_ext.core.errors import RecipeError, RunError
from grpo_ext.core.files import exists, refuse_to_replace, write_atomic
from grpo_ext.core.text import first_line, shown, suggest
from grpo_ext.recipe import json_schema, load, parse_override
from grpo_ext.recipe.schema import SCHEMA
from grpo_ext.rewards import guard, judge, registry, unscored
from grpo_ext.settings import compat, shapes, variants
from grpo_ext.tools import environments
from grpo_ext.tools import library as tool_library
from grpo_ext.verbs import doctor, evaluate, merge, plan, push, sweep, train
from grpo_ext.verbs import filter as pass_filter  # the module is named for its command; the builtin stays usable here


def cmd_train(args) -> None:
    if args.dry_run:
        train.dry_run(train.recipe_for(args.recipe, args.overrides, args.quick))
        return
    train.train(
        args.recipe,
        args.overrides,
        overwrite=args.overwrite,
        resume=args.resume,
        verbose=args.verbose,
        accept_changes=args.accept_changes,
        quick=args.quick,
    )


def cmd_validate(args) -> None:
    """Each file checked with the same overrides; every problem of every file printed, then exit 2 if any."""
    if not args.files:
        raise RecipeError("validate: give at least one recipe file before the section.key=value overrides")
    failed = []
    for ref in args.files:
        try:
            train.check_data(load(ref, args.overrides))  # every row of a local data file, too
            print(f"{ref}: ok")
        except RecipeError as exc:
            for line in exc.lines():
                print(line, file=sys.stderr)
            failed.append(ref)
    if failed:
        raise RecipeError([])  # already printed


def cmd_ls(_args) -> None:
    print("recipes (grpo-ext cp NAME my.yaml; python -m grpo_ext.train NAME):")
    for name, path in catalog.shipped_recipes().items():
        print(f"  {name:<24} {catalog.recipe_summary(path)}")
        print(f"  {'':<24} {catalog.recipe_facts(path)}")
    print("rewards:")
    for name in rewards.known_names():
        print(f"  {name:<24} {first_line(rewards.REGISTRY[name].__doc__) if name in rewards.REGISTRY else '(entry point)'}")
    print("model aliases:")
    for name, entry in catalog.MODELS.items():
        print(f"  {name:<24} {entry['about']}")
    print("model shapes grpo-ext plan knows offline (an -Instruct/-it variant shares its base's shape):")
    for line in shapes.listing():
        print(f"  {line}")


def cmd_cp(args) -> None:
    shipped = catalog.shipped_recipes()
    if args.name not in shipped:
        raise RecipeError(f"no shipped recipe named {args.name!r}{suggest(args.name, shipped)}")
    dest = Path(args.dest)
    if dest.is_dir():
        dest = dest / shipped[args.name].name
    refuse_to_replace([dest], args.force, option="DEST", command="cp")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # the shipped recipe names its schema relative to recipes/; the copy names the shipped file wherever it goes
    text = shipped[args.name].read_text(encoding="utf-8")
    write_atomic(dest, catalog.point_at_schema(text, catalog.schema_file().resolve().as_uri()))
    print(
        f"copied {args.name} to {dest}; edit it (runs go to its output_dir), then: "
        f"grpo-ext validate {dest} && python -m grpo_ext.train {dest}"
    )


def _listing(kind: references.Kind) -> None:
    """Every name of a kind (rewards, tools) with its one-line description."""
    for name in references.known_names(kind):
        doc = kind.registry[name].__doc__ if name in kind.registry else "registered by an installed package"
        print(f"{name:<24} {first_line(doc)}")


def _found(kind: references.Kind, name: str) -> tuple:
    """(object, is_factory) that ``NAME`` of ``grpo-ext rewards|tools show NAME`` names, or its one-line error."""
    try:
        return references.find(kind, name, Path.cwd())
    except LookupError as exc:
        raise RecipeError(f"{kind.word}s show: {exc}") from None


def _factory_lines(name: str, params: list[inspect.Parameter]) -> list[str]:
    """A factory's arguments, then the recipe entry that gives them (the required ones), as ``show`` prints them."""
    required = ", ".join(f"{p.name}: ..." for p in params if p.default is p.empty)
    return ["args: " + (", ".join(str(p) for p in params) or "none"), f"in a recipe: {{name: {name}, args: {{{required}}}}}"]


def _parameters(obj) -> list[inspect.Parameter]:
    """The parameters a recipe's ``args`` can name (none for an object with no signature)."""
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD]


def cmd_rewards(_args) -> None:
    """``grpo-ext rewards [ls]``: every reward name with its one-line description."""
    _listing(registry.KIND)


def cmd_rewards_show(args) -> None:
    """``grpo-ext rewards show NAME``: where a reward comes from, its arguments and its whole docstring."""
    obj, is_factory = _found(registry.KIND, args.name)
    source = "entry point"
    if args.name in registry.REGISTRY:
        source = "built in"
    elif registry.is_reference(args.name):
        source = "module or file"
    print(f"{args.name} ({source})")
    params = _parameters(obj)
    if registry.is_reference(args.name):  # a user's function: where it is, and what it takes
        with contextlib.suppress(TypeError, OSError):
            print(f"source: {Path(inspect.getsourcefile(obj)).resolve()}, line {inspect.getsourcelines(obj)[1]}")
        is_factory = "completions" not in {p.name for p in params}  # a reward takes completions; a factory its args
        if not is_factory:
            print(f"columns: {', '.join(compat.reward_columns(obj)) or 'none'} (each row's values, as keyword arguments)")
    if is_factory:
        print("\n".join(_factory_lines(args.name, params)))
    print(inspect.cleandoc(obj.__doc__ or "(no docstring)"))


def cmd_tools(_args) -> None:
    """``grpo-ext tools [ls]``: every library tool with its one-line description, then the library's environments."""
    _listing(tool_library.KIND)
    print("\nenvironments (environment: NAME):")
    _listing(environments.KIND)


def cmd_tools_show(args) -> None:
    """``grpo-ext tools show NAME``: a tool's arguments (a factory's, with args) and the docstring the model reads."""
    obj, is_factory = _found(tool_library.KIND, args.name)
    if is_factory and not inspect.signature(obj).parameters:  # a library tool that takes no args: the tool itself
        obj, is_factory = obj(), False
    print(f"{args.name} ({'library' if args.name in tool_library.REGISTRY else 'module, file or entry point'})")
    if is_factory:
        print("\n".join(_factory_lines(args.name, _parameters(obj))))
    else:
        with contextlib.suppress(TypeError, ValueError):
            print(f"call: {getattr(obj, '__name__', args.name)}{inspect.signature(obj)}")
    if is_factory or not obj.__doc__:
        print(inspect.cleandoc(obj.__doc__ or "(no docstring: the model would see no description)"))
        return
    from transformers.utils import get_json_schema  # what TRL renders into the prompt (no torch import)

    try:
        schema = get_json_schema(obj)["function"]
    except Exception as exc:  # the checks a recipe runs say the same, in one line
        raise RecipeError(f"tools show: transformers cannot describe {args.name} to the model: {exc}") from None
    print("the model reads (the schema in its prompt):")
    print(json.dumps(schema, indent=2, ensure_ascii=False))


def cmd_rewards_score(args) -> None:
    """``grpo-ext rewards score NAME --completion TEXT [--prompt P] [--answer A] [--arg k=v] [--column k=v]
    [--column-yaml k=v]``: one score, no model; ``--completion`` given several times scores them as one group of
    the prompt, as training hands a group (``llm_judge``'s ``mode: group`` grades them together). The reward runs
    under training's guard (its time limit, its checks of the scores, an exit caught), so a score training refuses
    is refused here with training's line; None comes with its reason, and a judge's reply is shown."""
    reward_args = _key_values(args.arg, "--arg", "max_length=256")
    fn = rewards.build(args.name, reward_args, Path.cwd(), "rewards score")
    row = _columns(args.column) | _key_values(args.column_yaml, "--column-yaml", "'tests=[{input: 2, output: 4}]'")
    prompt = args.prompt if args.prompt is not None else row.get("prompt", "")
    if args.prompt is not None and "prompt" in row:
        raise RecipeError("rewards score: the prompt is given twice (--prompt and --column prompt=...); keep --prompt")
    row.pop("prompt", None)  # the prompt goes to the reward as its prompts, as TRL hands it, not as a column
    if args.answer is not None:
        row[reward_args.get("answer_column", "answer")] = args.answer
    missing = [c for c in compat.reward_columns(fn) if c not in row]
    if missing:
        answer = reward_args.get("answer_column", "answer")
        given = " ".join("--answer VALUE" if c == answer else f"--column {c}=VALUE" for c in missing)
        raise RecipeError(f"rewards score: {args.name} reads column {', '.join(map(repr, missing))} of each row; pass {given}")
    timeout = SCHEMA["reward"]["timeout"].default  # a recipe's rewards[i].timeout when it sets none
    guarded = rewards.Guarded(fn, guard.metric_name(args.name, fn), timeout=timeout)
    n = len(args.completion)
    columns = {name: [value] * n for name, value in row.items()}
    scores = guarded(prompts=[prompt] * n, completions=args.completion, **columns)
    replies = fn.replies if isinstance(fn, judge.Judge) else [None] * n
    group = isinstance(fn, judge.Judge) and fn.settings["mode"] == "group"  # one reply grades them all
    for i, score in enumerate(scores):
        label = guarded.__name__ if n == 1 else f"{guarded.__name__} #{i + 1}"
        if score is None:
            print(f"{label}: None; {unscored.reason(fn, row, i)}")
        else:
            print(f"{label}: {round(score, 6)}")  # 0.72, not 0.7200000000000001
        if replies[i] is not None and not group:
            print(f"judge said: {shown(replies[i], judge.SAID_CHARS)}")
    if group and replies[0] is not None:
        print(f"judge said: {shown(replies[0], judge.SAID_CHARS)}")
    if _counts_tokens(fn):
        print("note: lengths counted in characters here (no tokenizer); training and eval count tokens")


def _key_values(texts: list[str], option: str, example: str) -> dict:
    """``key=value`` strings (values read as YAML) as a mapping."""
    out = {}
    for text in texts:
        keys, value = parse_override(text)
        if len(keys) != 1:
            raise RecipeError(f"{option} {text!r}: give key=value with a plain key, e.g. {option} {example}")
        out[str(keys[0])] = value
    return out


def _columns(texts: list[str]) -> dict[str, str]:
    """``--column NAME=TEXT`` strings as a mapping; each text kept as given, line breaks and all."""
    out = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise RecipeError(f"--column {shown(text)}: give NAME=TEXT, e.g. --column topic=cats")
        out[name] = value
    return out


def _counts_tokens(fn) -> bool:
    """Whether a reward measures ``completion_ids`` (token counts), which this command cannot give it."""
    try:
        return "completion_ids" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def cmd_schema(args) -> None:
    """``grpo-ext schema [--out FILE [--force]]``: the recipe's JSON Schema, for an editor's YAML language server."""
    text = json_schema.text()
    if args.out is None:
        sys.stdout.write(text)
        return
    out = Path(args.out)
    if out.is_dir():
        raise RecipeError(f"--out: {out} is a folder; give a file name, e.g. {out / catalog.SCHEMA_FILE}")
    if not out.parent.is_dir():
        raise RecipeError(f"--out: folder {out.parent} does not exist; create it or give another path")
    refuse_to_replace([out], args.force, command="schema")
    write_atomic(out, text)
    print(f"wrote {out}; put this line in a recipe to use it: {catalog.SCHEMA_LINE}{out.resolve().as_uri()}")


def cmd_algorithms(args) -> None:
    """``grpo-ext algorithms [NAME]``: the GRPO variants a recipe can name, or one variant's settings and why."""
    if args.name and args.name not in variants.VARIANTS:
        raise RecipeError(f"algorithms: unknown variant {args.name!r}{suggest(args.name, variants.VARIANTS)}")
    print("\n".join(variants.details(args.name) if args.name else variants.listing()))


def cmd_eval(args) -> None:
    if args.checkpoints:
        if len(args.model) != 1:
            raise RecipeError("--checkpoints: give one --model, the run directory whose checkpoint-N to score")
        sweep.sweep(args.recipe, args.model[0], args.overrides, out=args.out, force=args.force, verbose=args.verbose)
        return
    evaluate.evaluate_models(args.recipe, args.model, args.overrides, out=args.out, force=args.force, verbose=args.verbose)


def cmd_filter(args) -> None:
    pass_filter.filter_rows(
        args.recipe,
        args.overrides,
        model=args.model,
        k=args.k,
        keep=args.keep,
        out=args.out,
        reward=args.reward,
        force=args.force,
        verbose=args.verbose,
    )


def cmd_merge(args) -> None:
    merge.merge(args.run_dir, args.out, check=not args.no_check, force=args.force)


def cmd_push(args) -> None:
    upload = push.push(args.run_dir, args.repo_id, private=args.private, revision=args.revision, dry_run=args.dry_run)
    if args.dry_run:
        print("\n".join(upload.lines()))
    else:
        print(f"pushed {len(upload.files)} files to {args.repo_id}: {upload.url}")


def cmd_plan(args) -> int:
    fits = plan.plan(args.recipe, args.overrides, args.gpu_memory, args.device, args.gpus, args.sharding)
    return 1 if fits is False else 0


def cmd_doctor(args) -> int:
    """A run's health (exit 1 when not healthy) and with --samples its last completions, or with --env the facts a bug
    report needs (exit 1 on a known-bad mix)."""
    if args.env and args.samples is not None:
        raise RecipeError("doctor: --samples reads a run directory; drop --env")
    if args.env:
        facts, problems = doctor.environment(load(args.target)["training"] if args.target else None)
        for line in facts + [f"problem: {p}" for p in problems]:
            print(line)
        return 1 if problems else 0
    if not args.target:
        raise RecipeError("doctor: give a run directory (grpo-ext doctor runs/digit), or --env")
    logged = doctor.samples(args.target, args.samples) if args.samples is not None else None  # a bad count: before any line
    lines, healthy = doctor.diagnose(args.target)
    print("\n".join(lines))
    if logged is not None:
        doctor.show_samples(*logged)
    return 0 if healthy else 1


def _recipe_args(p: argparse.ArgumentParser, overrides_help: str = "section.key=value overrides, e.g. training.max_steps=5"):
    p.add_argument("recipe", help="recipe file, or a shipped recipe's name (see `grpo-ext ls`)")
    p.add_argument("overrides", nargs="*", help=overrides_help)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpo-ext", description="GRPO training from YAML recipes on top of TRL.")
    sub = p.add_subparsers(dest="verb", required=True)

    tr = sub.add_parser("train", help="train from a recipe", description="Train a model with GRPO from a YAML recipe.")
    _recipe_args(tr)
    tr.add_argument("--dry-run", action="store_true", help="validate, resolve, print the effective GRPOConfig; load no weights")
    tr.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: 2 steps, an eval of 2 prompts x 2 samples, no final/, into OUTPUT_DIR-quick (its first "
        "line lists each change; a key=value you give wins)",
    )
    tr.add_argument("--overwrite", action="store_true", help="replace a previous run in output_dir")
    tr.add_argument(
        "--resume", action="store_true", help="continue the unfinished run in output_dir from its last complete checkpoint"
    )
    tr.add_argument(
        "--accept-changes", action="store_true", help="with --resume: continue although the recipe differs (recorded)"
    )
    tr.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    tr.set_defaults(fn=cmd_train)

    val = sub.add_parser("validate", help="check recipe files without loading any model")
    val.add_argument("files", nargs="+", help="recipe files or shipped recipe names, then any section.key=value overrides")
    val.set_defaults(fn=cmd_validate)

    sub.add_parser("ls", help="shipped recipes, rewards and model aliases").set_defaults(fn=cmd_ls)
    cp = sub.add_parser("cp", help="copy a shipped recipe to edit")
    cp.add_argument("name")
    cp.add_argument("dest")
    cp.add_argument("--force", action="store_true", help="replace DEST if it exists")
    cp.set_defaults(fn=cmd_cp)

    rw = sub.add_parser("rewards", help="reward names (ls), one reward's documentation (show), try one (score)")
    rw.set_defaults(fn=cmd_rewards)
    rw_sub = rw.add_subparsers(dest="rewards_verb")
    rw_sub.add_parser("ls", help="every reward name with its one-line description").set_defaults(fn=cmd_rewards)
    show = rw_sub.add_parser("show", help="a reward's source, arguments and documentation")
    show.add_argument("name")
    show.set_defaults(fn=cmd_rewards_show)
    score = rw_sub.add_parser(
        "score",
        help="score one completion, without a model",
        description="Score one completion with one reward, under the guard training runs it under: a score training "
        "refuses, or a reward that raises or exits, is an error (exit 1); a None score comes with its reason. "
        "--column keeps a value's text as given (line breaks included); --column-yaml reads it as YAML.",
    )
    score.add_argument("name", help="registry name, module:function or file.py:function, as in a recipe")
    score.add_argument(
        "--completion",
        action="append",
        required=True,
        help="a completion to score; given several times, the completions of one prompt, scored as one group",
    )
    score.add_argument("--prompt", help="the prompt the completions answer (a judge's rubric shows it as {prompt})")
    score.add_argument("--answer", help="the reference answer (the dataset's answer column)")
    score.add_argument(
        "--arg", action="append", default=[], metavar="KEY=VALUE", help="a reward argument, read as YAML (repeatable)"
    )
    score.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=TEXT",
        help="a dataset column the reward reads, its text kept as given, line breaks and all (repeatable)",
    )
    score.add_argument(
        "--column-yaml",
        action="append",
        default=[],
        metavar="NAME=YAML",
        help="a dataset column whose value is read as YAML: a list, a mapping, a number (repeatable)",
    )
    score.set_defaults(fn=cmd_rewards_score)

    tl = sub.add_parser("tools", help="tools a recipe's model may call (ls), one tool's documentation (show)")
    tl.set_defaults(fn=cmd_tools)
    tl_sub = tl.add_subparsers(dest="tools_verb")
    tl_sub.add_parser("ls", help="every library tool with its one-line description").set_defaults(fn=cmd_tools)
    tshow = tl_sub.add_parser("show", help="a tool's arguments and the documentation the model reads")
    tshow.add_argument("name", help="library name, module:function or file.py:function")
    tshow.set_defaults(fn=cmd_tools_show)
    sc = sub.add_parser("schema", help="the recipe's JSON Schema, for editors (completion and docs on every key)")
    sc.add_argument("--out", help="write it to this file instead of printing it")
    sc.add_argument("--force", action="store_true", help="replace the --out file if it exists")
    sc.set_defaults(fn=cmd_schema)

    al = sub.add_parser("algorithms", help="GRPO variants by name (algorithm: NAME in a recipe) and what each sets")
    al.add_argument("name", nargs="?", help="one variant: its paper, each setting and why")
    al.set_defaults(fn=cmd_algorithms)

    ev = sub.add_parser("eval", help="score models side by side on a recipe's eval prompts with its rewards")
    _recipe_args(ev, "section.key=value overrides, e.g. eval.samples=16")
    ev.add_argument(
        "--model", action="append", required=True, help="catalog alias, hub id, local path, or run directory (repeat to compare)"
    )
    ev.add_argument(
        "--out",
        help="folder for eval.json and eval.md (default: eval-NAME beside the recipe's output_dir); with --checkpoints, "
        "for eval_curve.json, eval_curve.md and eval_curve.png (default: the run directory)",
    )
    ev.add_argument(
        "--force",
        "--overwrite",
        action="store_true",
        dest="force",
        help="replace those files if they exist (--overwrite: the older name)",
    )
    ev.add_argument(
        "--checkpoints",
        action="store_true",
        help="score every complete checkpoint-N of the one --model run directory; eval_curve.png there (or in --out)",
    )
    ev.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    ev.set_defaults(fn=cmd_eval)

    fl = sub.add_parser(
        "filter",
        help="sample each training prompt k times; keep the rows whose pass rate is in --keep (neither always nor never solved)",
    )
    _recipe_args(fl, "section.key=value overrides, e.g. data.source_args.train=64")
    fl.add_argument("--model", help="catalog alias, hub id, local path or run directory (default: the recipe's model.name)")
    fl.add_argument("--k", type=int, default=pass_filter.K, help=f"samples per prompt (default {pass_filter.K})")
    low, high = pass_filter.KEEP
    fl.add_argument(
        "--keep", default=f"{low}:{high}", metavar="LOW:HIGH", help=f"pass rates kept, both ends included (default {low}:{high})"
    )
    fl.add_argument("--reward", help="the reward whose pass rate decides (default: the recipe's first)")
    fl.add_argument(
        "--out",
        help=f"the JSONL file of kept rows (default: NAME{pass_filter.SUFFIX} beside the data file, or here); the histogram "
        "goes beside it as NAME.png, and NAME.progress.jsonl while it runs",
    )
    fl.add_argument("--force", action="store_true", help="replace the --out file and its .png if they exist")
    fl.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    fl.set_defaults(fn=cmd_filter)

    mg = sub.add_parser("merge", help="fold a LoRA run's adapter into its base; write a plain checkpoint")
    mg.add_argument("run_dir", help="the run directory (output_dir) of a run trained with model.lora")
    mg.add_argument("--out", help="the folder to write the merged model into (default: RUN_DIR/merged); new or empty")
    mg.add_argument("--force", action="store_true", help="write into an --out folder that is not empty")
    mg.add_argument("--no-check", action="store_true", help="skip comparing greedy answers on the eval prompts")
    mg.set_defaults(fn=cmd_merge)

    ps = sub.add_parser("push", help="publish a finished run's model (or LoRA adapter) on the Hugging Face Hub, with a card")
    ps.add_argument("run_dir", help="the run directory (output_dir) of a finished run; its final/ is uploaded")
    ps.add_argument("repo_id", help="the Hub model repo, OWNER/NAME (created if missing); token: HF_TOKEN or `hf auth login`")
    ps.add_argument("--private", action="store_true", help="create the repo private (an existing repo keeps its visibility)")
    ps.add_argument("--revision", metavar="BRANCH", help="the branch to commit to, created if missing (default: main)")
    ps.add_argument(
        "--dry-run", action="store_true", help="write the card; list the files and the card's first lines; send nothing"
    )
    ps.set_defaults(fn=cmd_push)

    pl = sub.add_parser("plan", help="estimate peak memory of a recipe; say what to change when it will not fit")
    _recipe_args(pl, "section.key=value overrides, e.g. model.quantization=4bit")
    pl.add_argument("--gpu-memory", help="memory of one GPU, e.g. 8GiB; plans for that GPU (exit 1 when it will not fit)")
    pl.add_argument("--device", choices=["cpu", "cuda"], help="plan for this device (default: cuda with --gpu-memory, else cpu)")
    pl.add_argument("--gpus", type=int, default=1, help="processes (one per GPU) sharing the run (default 1)")
    pl.add_argument("--sharding", default="ddp", help="ddp (default), zero2, zero3 (DeepSpeed) or fsdp: what the processes split")
    pl.set_defaults(fn=cmd_plan)

    dr = sub.add_parser("doctor", help="diagnose a run directory (exit 1 when not healthy); --env: facts for a bug report")
    dr.add_argument("target", nargs="?", help="a run directory; with --env, optionally a recipe whose settings to check too")
    dr.add_argument("--env", action="store_true", help="versions, devices, cache; known-bad combinations")
    dr.add_argument(
        "--samples",
        nargs="?",
        type=int,
        const=doctor.SAMPLES,
        metavar="N",
        help=f"also print the last N completions the run logged (completions.jsonl), default {doctor.SAMPLES}",
    )
    dr.set_defaults(fn=cmd_doctor)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse a command line; ``key=value`` overrides may stand before or after the options."""
    p = parser()
    args, extra = p.parse_known_args(argv)
    if args.verb == "validate":  # files first, then overrides: a word with '=' that is not a file is an override
        args.overrides = [f for f in args.files if "=" in f and not exists(Path(f))]
        args.files = [f for f in args.files if f not in args.overrides]
    if extra and (not hasattr(args, "overrides") or any(x.startswith("-") or "=" not in x for x in extra)):
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides += extra  # key=value overrides written after the options
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one verb; every error becomes its exit status here, and only here."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        parser().print_help(sys.stderr)
        return 2
    args = parse_args(argv)
    try:
        status = args.fn(args) or 0
        sys.stdout.flush()  # a reader that went away shows here, not as a traceback at exit
        return status
    except RecipeError as exc:
        for line in exc.lines():
            print(line, file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; the run directory keeps what was saved", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`grpo-ext train X --dry-run | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
