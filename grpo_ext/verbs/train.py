"""Train a model with GRPO from a recipe: the ``train`` verb.

    summary = grpo_ext.train("recipes/digit.yaml", overrides=["training.max_steps=4"])
    grpo-ext train recipes/digit.yaml training.max_steps=4      # the same from a shell
    python -m grpo_ext.train recipes/digit.yaml                  # the same
    grpo-ext train recipes/digit.yaml --quick                    # every phase, small: does the recipe run? (recipe/quick.py)

GRPO (Group Relative Policy Optimization) samples a group of completions per prompt, scores each with
the recipe's reward functions, and pushes the policy towards the completions that beat their group's
mean; there is no value network. TRL's GRPOTrainer does the work. A run goes through four phases, each
a function below: build (GRPOConfig, model, data, trainer), reward pre-flight and eval before, train, finish (eval after,
final weights, report).
"""

import errno
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grpo_ext.core import console
from grpo_ext.core.errors import ElsewhereError, RecipeError, RunError
from grpo_ext.core.files import os_problem, write_atomic
from grpo_ext.core.text import plural
from grpo_ext.core.yaml_io import load_yaml
from grpo_ext.data import examples, mixture
from grpo_ext.recipe import Data, Recipe, agents, changed_keys, quick
from grpo_ext.recipe.files import check_recipe_files
from grpo_ext.results import preflight, report, scoring, watchdog
from grpo_ext.rewards import guard
from grpo_ext.run import (
    chat_tools,
    completions,
    data,
    dynamic,
    explore,
    hardware,
    heap,
    launch,
    model_cache,
    models,
    prefix_cache,
    progress,
    rollouts,
    rundir,
    sampling,
    skipping,
    tic_grpo,
    trainer,
    trl_internals,
)
from grpo_ext.run.trl_internals import Behaviour
from grpo_ext.settings import adapters, advice, compat, model_names, variants
from grpo_ext.verbs.train_command import recipe_for


def train(
    recipe: str | Path | Recipe,
    overrides: list[str] | tuple = (),
    *,
    overwrite: bool = False,
    resume: bool = False,
    verbose: bool = False,
    callbacks: list | None = None,
    accept_changes: bool = False,
    quick: bool = False,
) -> dict:
    """Train from a recipe (a path, a shipped recipe's name, or a loaded Recipe); return the run's summary.

    ``overrides`` are ``section.key=value`` strings; ``callbacks`` are transformers TrainerCallbacks added to
    the trainer; ``accept_changes`` lets a resume continue with a recipe that differs from the run's (recorded);
    ``quick``: --quick's short run (``recipe/quick.py``), under the ``overrides``.
    Raises RecipeError for bad input (nothing written), RunError for a failure while running,
    KeyboardInterrupt when interrupted (the run directory keeps what was saved and says so).
    """
    completed, prepared = False, None
    try:
        recipe = recipe_for(recipe, overrides, quick)
        for note in recipe.notes:
            console.say(note)
        missing = adapters.missing_packages(recipe.model.lora, recipe.model.quantization)
        if missing:
            raise RecipeError(missing, str(recipe.path))
        check_recipe_files(recipe)  # a bad row of a data file stops here, before output_dir
        recipe.build_rewards()  # so does a user's reward factory that refuses its args: it first runs here
        for reward in recipe.reward_funcs:  # a reward that is a service (a judge) answers once before the model loads
            if reward.info.preflight is not None:
                reward.info.preflight()
        resuming = True if resume else (False if overwrite else recipe.resume)  # --resume, or the recipe's resume
        launch.begin(recipe.training.effective("ddp_timeout"))  # several processes: a collective waits this long at most
        models.ask_hub(recipe.model, recipe.base_dir, console.say if launch.is_main() else _silent)
        prepared = launch.on_main_first(lambda: _prepare(recipe, overwrite, resuming, accept_changes))
        summary = run(recipe, prepared, verbose, callbacks)
        completed = True
        return summary
    except launch.Terminated as exc:  # the launcher ended this process before the run's phases began or after them
        # raised only once launch.begin ran on several processes, with the recipe checked: lost() names the cause
        found = isinstance(recipe, Recipe) and launch.lost(exc, recipe.training.effective("ddp_timeout"))
        raise (found[0] if found else RunError("the launcher ended this process")) from None
    except (RunError, RecipeError) as exc:
        launch.failed(exc)  # several processes: the line the others read when their collectives fail
        raise
    finally:
        if prepared is not None and launch.is_main():
            rundir.discard_if_empty(prepared)  # lets go of the lock; a directory that got nothing is removed
        model_cache.forget_early()
        launch.close(completed)


def behaviours(recipe: Recipe) -> list:
    """The GRPO behaviours TRL lacks, each a ``Behaviour`` the trainer calls at its hooks (``run/trl_internals.py``), in
    the order it calls them: freed memory handed back (a run with a tool loop; a no-op off a CPU), then those the
    recipe asks for."""
    groups = recipe.groups
    found: list[Behaviour] = []
    if recipe.agentic:  # first: before each loss pass, what the generation and the last one freed goes back
        found.append(heap.ReleaseFreed())
    if groups.skip_zero_advantage:
        found.append(skipping.SkipZeroAdvantage())
    if groups.dynamic_sampling:
        found.append(dynamic.DynamicSampling(groups.max_extra_rounds))
    if recipe.agentic:
        found.append(rollouts.DroppedResults())
    if recipe.algorithm == "tic_grpo":  # its loss replaces TRL's: last, so the others wrap it as they wrap TRL's
        found.append(tic_grpo.TrajectoryCorrected())
    return found


def _prepare(recipe: Recipe, overwrite: bool, resume: bool | str, accept_changes: bool) -> rundir.Prepared:
    """Lock the run directory and decide; a resume must use the run's own recipe unless changes are accepted. Only
    once everything is decided does ``rundir.commit`` change the directory: a refused resume has lost nothing."""
    prepared = rundir.prepare(recipe.output_dir, overwrite=overwrite, resume=resume)
    try:
        if prepared.previous is not None:
            prepared.changes = _resume_changes(prepared.path / "recipe.yaml", recipe, accept_changes)
            prepared.changes += _resume_processes(prepared, recipe, accept_changes)
    except RecipeError:
        rundir.release(prepared.path)
        raise
    try:
        rundir.commit(prepared)
    except OSError as exc:  # a full disk, a folder that refuses deletion: the lock goes, a directory that got nothing too
        rundir.discard_if_empty(prepared)
        raise RunError(f"output_dir: {prepared.path} could not be prepared: {os_problem(exc)}; {_FREE}") from None
    for note in prepared.notes:
        console.say(note)
    return prepared


def _resume_changes(recorded: Path, recipe: Recipe, accept_changes: bool) -> list[str]:
    """The recipe keys this resume changes from the run's own recipe; RecipeError unless none or accepted."""
    try:
        before = load_yaml(recorded.read_text(encoding="utf-8"))  # bounded, as every recipe is read
    except (OSError, yaml.YAMLError):
        before = None
    if not isinstance(before, dict):
        if accept_changes:
            return ["(the run's recipe.yaml was missing or damaged)"]
        raise RecipeError(
            f"--resume: {recorded} is missing or damaged, so this recipe cannot be checked against the run's; "
            f"restore it, or pass --accept-changes to continue with this recipe"
        )
    changed = changed_keys(before, recipe.portable())
    if changed and not accept_changes:
        raise RecipeError(
            f"--resume: this recipe differs from the run's in {', '.join(changed)}; resume with the run's "
            f"own recipe ({recorded}), start a new run (output_dir=runs/new), or pass --accept-changes "
            f"to continue with the change recorded"
        )
    return changed


def _processes(n: int) -> str:
    return f"{n} process{'' if n == 1 else 'es'}"


def _resume_processes(prepared: rundir.Prepared, recipe: Recipe, accept_changes: bool) -> list[str]:
    """The change of process count this resume makes (``processes (2 -> 1)``), or none; RecipeError unless accepted.
    TRL's checkpoint loads on any count (DDP's optimizer state is whole on every process), but each step's batch is
    ``per_device_train_batch_size x gradient_accumulation_steps`` on each process, so it changes with the count, the
    prompts after the checkpoint follow the new layout, and a process finds its random streams only in a checkpoint
    of the same layout (transformers' ``rng_state_N.pth``, or ``rng_state.pth`` on one process)."""
    before, now = (prepared.previous or {}).get("processes"), launch.world_size()
    if not isinstance(before, int) or before == now or prepared.resume_from is None:
        return []
    training = recipe.training
    each = training.effective("per_device_train_batch_size") * training.effective("gradient_accumulation_steps")
    took, takes = each * before, each * now
    if not accept_changes:
        raise RecipeError(
            f"--resume: {prepared.path} trained on {_processes(before)} and this launch has {now}, so each step would take "
            f"{takes} completions where it took {took} (per_device_train_batch_size x gradient_accumulation_steps x "
            f"processes) and its prompts would follow another order; launch it on {_processes(before)} (accelerate launch "
            f"--num_processes {before}), start a new run (output_dir=runs/new), or pass --accept-changes to continue on "
            f"{now} with the change recorded"
        )
    checkpoint = prepared.resume_from
    fresh = now if 1 in (before, now) else max(0, now - before)  # those without an rng_state file of their own
    streams = ""
    if fresh == now:
        streams = f", and the random streams start afresh ({checkpoint.name} holds none for {_processes(now)})"
    elif fresh:
        streams = f", and {fresh} of the {now} processes start fresh random streams ({checkpoint.name} holds none of theirs)"
    prepared.notes.append(
        f"resume: processes {before} -> {now} (accepted): each step takes {takes} completions where it took {took}, the "
        f"prompts after step {rundir.step_of(checkpoint)} follow the new layout{streams}"
    )
    return [f"processes ({before} -> {now})"]


def _training_data(d: Data) -> str:
    if d.file:
        how = f"prompt column {d.prompt_column!r}"
        if d.prompt_template:
            how = f"prompts from template {d.prompt_template!r}"
        return f"file {d.file} ({how})"
    if d.source == "verifiers":
        return f"verifiers taskset {d.source_args['taskset']}"
    if d.source:
        return f"generator {d.source}"
    if d.hub:
        return f"hub dataset {d.hub} (split {d.hub_split}; not fetched by a dry run)"
    if d.prompts is None:
        return "none: the environment's reset writes each prompt (a generation batch of empty prompts)"
    return f"{len(d.prompts)} prompts"


def _eval_prompts(d: Data) -> str:
    first = f" (first {d.eval_size})" if d.eval_size else ""
    if d.eval_prompts is not None:
        return plural(len(d.eval_prompts), "eval prompt")
    if d.eval_file:
        return f"eval rows from {d.eval_file}{first}"
    if d.eval_split:
        return f"eval rows from split {d.eval_split}{first}"
    if d.holds_out:
        share = d.eval_size if d.eval_size is not None else f"a share of {d.eval_fraction}"
        return f"eval rows held out of the training rows ({share}, by seed; never trained on)"
    if d.source:
        return plural(len(d.generated()[1]), "eval prompt")
    return "no eval prompts"


def dry_run(recipe: Recipe) -> None:
    """Print what a run of ``recipe`` would do: model, rewards, data, the effective GRPOConfig. Loads no weights. A bad
    row of a local data file is refused here, as ``validate`` and a run refuse it."""
    check_recipe_files(recipe)
    kwargs, notes, passed = trainer.config_kwargs(recipe)
    source = model_names.resolve(recipe.model.name, recipe.base_dir)
    cached = model_names.checkpoint_dir(source)
    state = ""
    if cached is not None:
        state = f"; cached at {cached}" if model_names.is_cached(source) else "; first run fetches and converts it"
    d, model, training = recipe.data, recipe.model, recipe.training
    for note in recipe.notes:
        print(note)
    print(f"recipe: {recipe.path} (valid)")
    print(f"model: {source.describe()}{state}")
    print(f"training: {adapters.describe(model.lora, model.quantization)}")
    if recipe.algorithm:
        print(f"algorithm: {recipe.algorithm} ({variants.VARIANTS[recipe.algorithm].paper}); keys the recipe sets win")
    named = [f"{name} (weight {w})" for name, w in zip(recipe.reward_names, recipe.weights, strict=True)]
    whose = "environment's" if recipe.environment_class is not None else "environments'"
    for cls in recipe.environment_types:  # TRL adds each class's, of weight 1, under its name
        if callable(getattr(cls, "get_reward", None)):
            named.append(f"{cls.__name__} (the {whose} get_reward, weight 1.0)")
    print("rewards: " + ", ".join(named))
    if isinstance(recipe.environment, dict):  # each row is shown the tools and its own environment's methods
        print("tools the model sees, and an environment per completion, the one its row's environment column names:")
        for line in agents.describe(recipe.tool_functions, []):
            print(f"  {line}")
        for name, entry in recipe.environment.items():
            for line in agents.describe([], [recipe.environment_classes[name]]) or ["no tool methods"]:
                print(f"  {name} ({entry.name}): {line}")
    elif recipe.agentic:
        where = f", and an environment per completion ({recipe.environment.written})" if recipe.environment else ""
        print(f"tools the model sees{where}:")
        for line in agents.describe(recipe.tool_functions, recipe.environment_types):
            print(f"  {line}")
    if model.chat_template:
        print(f"chat template: {model.chat_template} (model.chat_template)")
    elif recipe.agentic:  # which one needs the tokenizer, which a dry run does not load
        print("chat template: the model's own if it can show tools, else grpo_ext's ChatML tool template (said at load)")
    if d.examples:
        turns = examples.messages(d.examples)
        calls = [c for c in examples.called(d.examples) if c[2] is not None]  # the calls, not their results
        print(
            f"worked examples: {plural(len(turns), 'message')} before every prompt, after the system prompt"
            + (f", with {plural(len(calls), 'tool call')}" if calls else "")
            + " (data.examples)"
        )
    if d.mixture:
        line, *shortfalls = data.mixture_plan(d, recipe.base_dir, recipe.eval.enabled)
        print(f"data: {line}; chat format: {d.chat}")
        for note in shortfalls:
            print(note)
    else:
        print(f"data: {_training_data(d)}; {_eval_prompts(d)}; chat format: {d.chat}")
    boost = explore.describe(recipe.explore, training.effective("max_steps"))
    if boost:
        print(boost)
    for line in quick.describe(recipe):
        print(line)
    print(f"output_dir: {recipe.output_dir}")
    table = compat.table_for()
    print(
        f"trl {compat.trl_version()}, transformers {compat.transformers_version()}: effective GRPOConfig "
        f"(TRL defaults from the table of trl {table['trl']} with transformers {table['transformers']})"
    )
    launch_decides = {"gradient_checkpointing"} - set(training.settings)  # shown below, not as TRL's default
    rows = compat.effective_rows(training.settings, passed, origins=recipe.origins)
    rows = [row for row in rows if row[0] not in launch_decides]
    rows += [
        ("reward_weights", kwargs["reward_weights"], "recipe: rewards[i].weight"),
        ("output_dir", kwargs["output_dir"], "recipe: output_dir"),
        ("seed", kwargs["seed"], "recipe: seed" if "seed" in recipe.given else "grpo_ext default"),
    ]
    for key, value, origin in rows:
        print(f"  {key:<32} {json.dumps(value, ensure_ascii=False)[:60]:<24}  {origin}")
    print(
        "  use_cpu, bf16                    decided at launch from the device unless set (no GPU: use_cpu=true; "
        "bf16=true on a GPU or CPU with native bf16)"
    )
    if not training.sets("max_prompt_length"):
        print("  max_prompt_length                null                      no limit: a prompt is never cut, on every TRL")
    if not training.sets("gradient_checkpointing"):
        print(
            "  gradient_checkpointing           decided at launch unless set (off on a CPU; on a GPU, on for models "
            f"of {hardware.CHECKPOINTING_FROM / 1e9:.0f}B parameters or more)"
        )
    for note in notes + adapters.missing_packages(model.lora, model.quantization):
        print(f"note: {note}")
    preset = variants.preset_keys(recipe.origins)
    lora = adapters.lora_settings(model.lora)
    lines = advice.check(training.effective, preset=preset, lora=bool(lora))
    for line in lines + (advice.lora(lora["r"]) if lora else []):
        print(f"advice: {line}")


@dataclass
class Run:
    """What the phases of one run share."""

    recipe: Recipe
    prepared: rundir.Prepared
    grpo: Any  # the GRPOTrainer (TRL is imported when the run starts)
    tokenizer: Any
    chat: bool
    eval_rows: list[dict]
    eval_settings: sampling.Settings
    metrics: Any  # the progress.MetricsLog callback
    summary: dict[str, Any]
    is_main: bool
    log: Callable[[str], None]
    watchdog: watchdog.Watchdog
    started: float | None = None  # when the training loop began (time.monotonic)

    @property
    def dir(self) -> Path:
        return self.prepared.path


def _silent(_message: str) -> None:
    pass


def _config_kwargs(recipe: Recipe, log) -> dict:
    """GRPOConfig keywords for this TRL and this machine, each translation and device choice announced."""
    kwargs, notes, _ = trainer.config_kwargs(recipe, trainer.config_fields())
    for note in notes + hardware.device_defaults(kwargs, recipe.model.quantization is not None):
        log(note)
    return kwargs


def _config(recipe: Recipe, kwargs: dict, log):
    """GRPOConfig (gradient checkpointing by the model's size, read from its config), and the save_total_limit
    that rundir applies itself (TRL's own rotation is off). Built before the model loads: a model loaded first
    trained about 8% slower per step on a CPU (benchmarks/step_order.py: ratio 1.080 over 4 alternated rounds)."""
    count = lambda: models.parameter_count(recipe.model, recipe.base_dir)  # noqa: E731 (called only on a GPU)
    for note in hardware.checkpointing_default(kwargs, count):
        log(note)
    return trainer.make_config({**kwargs, "save_total_limit": None}), kwargs.get("save_total_limit")


def _rows(recipe: Recipe, log, owned: int) -> data.Rows:
    """The training and eval rows, loaded (and hub columns checked) before the model; ``owned``: how many empty
    prompts a recipe whose environment writes them trains on (one generation batch, cycled, as TRL's own)."""
    environment = recipe.environment_class
    try:
        rows = data.load(recipe.data, recipe.base_dir, recipe.seed, recipe.reward_funcs, recipe.eval.enabled, environment, owned)
        _check_routes(recipe, rows)
    except RecipeError as exc:  # what only loading tells (a hub dataset's rows), named as every recipe error is
        raise RecipeError(exc.found, str(recipe.path) if recipe.path else None) from None
    for note in rows.notes:
        log(note)
    return rows


def _check_routes(recipe: Recipe, rows: data.Rows) -> None:
    """Several environments: each loaded row names one in its environment column (a hub dataset's rows are first
    read here; a file's were read with the recipe), in the line validation writes; TRL would stop at its batch."""
    names = list(recipe.environment_classes)
    if not names:
        return
    loaded = [("the training rows", rows.train), ("the eval rows", rows.eval)]
    found = [
        agents.check_routes(names, ((f"row {i}", row) for i, row in enumerate(rows_of, 1)), described)
        for described, rows_of in loaded
    ]
    if any(found):
        raise RecipeError([p for p in found if p is not None])


def _datasets(recipe: Recipe, rows: data.Rows, tokenizer, args, log, context: int | None) -> tuple[bool, object, list[dict], int]:
    """(chat format or not, the training dataset, the formatted eval rows, how many tokens every training prompt
    begins with alike), with max_prompt_length applied and every prompt checked to fit the model's ``context`` with
    max_completion_length."""
    d, limit = recipe.data, recipe.training.settings.get("max_prompt_length")
    chat = data.use_chat(d, tokenizer)
    train_set, eval_rows = data.formatted_set(rows.train, d, chat), data.formatted(rows.eval, d, chat)
    completion = args.max_completion_length
    tools = agents.functions_shown(recipe.tool_functions, recipe.environment_types) or None  # they count in the prompt
    train_set, eval_rows, longest, notes, shared = data.fit_prompts(
        train_set, eval_rows, limit, tokenizer, context, completion, tools
    )
    trainer.fit_prompt_limit(args, limit or longest)
    shown = "chat messages" if chat else "plain text"
    log(f"data: {plural(len(train_set), 'training prompt')}, {plural(len(eval_rows), 'eval prompt')}, {shown}")
    for note in notes:
        log(note)
    return chat, train_set, eval_rows, shared


def build(recipe: Recipe, prepared: rundir.Prepared, callbacks: list | None) -> Run:
    """Phase 1: GRPOConfig for this TRL and machine, model and tokenizer, datasets, the trainer; record the run."""
    from transformers import PrinterCallback, set_seed

    processes = launch.state()
    is_main = processes.is_main_process
    log = console.say if is_main else _silent
    args, keep = _config(recipe, _config_kwargs(recipe, log), log)
    set_seed(recipe.seed)
    rows = _rows(recipe, log, args.generation_batch_size // args.num_generations)
    model, tokenizer, described = models.load(recipe.model, recipe.base_dir, log)
    chat_tools.apply(tokenizer, recipe, log)
    log(f"training: {adapters.describe(recipe.model.lora, recipe.model.quantization)}")
    chat, train_set, eval_rows, shared = _datasets(recipe, rows, tokenizer, args, log, data.context_of(model.config))
    cap = quick.eval_prompts(recipe)
    if recipe.eval.enabled and cap is not None and len(eval_rows) > cap:
        source = quick.why("eval.max_prompts", recipe.eval.max_prompts, recipe.training)
        log(f"eval: the first {cap} of {len(eval_rows)} eval prompts ({source})")
        eval_rows = eval_rows[:cap]
    dog = watchdog.Watchdog(recipe.health, watchdog.pass_marks(recipe.reward_funcs), recipe.eval.pass_threshold)
    watch = dog.hook(log, stop=recipe.health.on_problem == "stop")
    metrics = progress.MetricsLog(
        prepared.path / "metrics.jsonl", is_main, log, watch=watch, trained_before=_trained_before(prepared)
    )
    own = [guard.reward_meter(recipe.reward_funcs), metrics, rundir.marker_callback(is_main, keep)]
    grpo: Any  # the trainer, built below: the completions writer reads it once the run starts
    own.append(completions.writer(recipe.logging, prepared.path, log, lambda: grpo))
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=recipe.reward_funcs,
        args=args,
        train_dataset=train_set,
        tokenizer=tokenizer,
        peft_config=models.lora_config(recipe.model),
        callbacks=own + list(callbacks or []),
        behaviours=behaviours(recipe),
        share_prompt=recipe.groups.share_prompt,
        tools=recipe.tool_functions or None,
        environment_factory=recipe.environment_factory,
    )
    if recipe.groups.skip_zero_advantage:
        why = skipping.blocker(grpo)
        log(
            "groups: every row kept in the loss (" + why + ")"
            if why
            else "groups: rows with zero advantage are left out of the loss's forward and backward (the gradient is the same)"
        )
    if recipe.groups.share_prompt and shared >= prefix_cache.MIN_SHARED:
        log(trl_internals.sharing(grpo, shared))
    if recipe.groups.dynamic_sampling:
        why = dynamic.blocker(grpo)
        rounds = recipe.groups.max_extra_rounds
        log(
            "groups: every group kept as drawn (" + why + ")"
            if why
            else f"groups: groups without reward spread are replaced by new prompts' (up to {rounds} extra rounds a batch)"
        )
    if args.disable_tqdm:
        grpo.remove_callback(PrinterCallback)  # our own progress line replaces the raw log dicts
    boost = explore.callback(recipe.explore, grpo, log)
    if boost is not None:
        grpo.add_callback(boost)
        log(explore.describe(recipe.explore, args.max_steps) or "")
    summary = report.new_summary(str(recipe.path), described, processes.num_processes)
    summary["run_id"] = prepared.run_id  # the marker's: summary.json shows the folder is this run's
    summary["changes"] = (prepared.previous or {}).get("changes") or []
    summary["resumed_at"] = (prepared.previous or {}).get("resumed_at") or []
    if prepared.resume_from:
        summary["resumed_at"].append(rundir.step_of(prepared.resume_from))
    if prepared.changes:
        at = rundir.step_of(prepared.resume_from) if prepared.resume_from else 0
        summary["changes"].append({"at_step": at, "keys": prepared.changes})
        log(f"resumed with a changed recipe (accepted): {', '.join(prepared.changes)} from step {at}")
    if is_main:
        rundir.record(prepared.path, "recipe.yaml")
        write_atomic(prepared.path / "recipe.yaml", recipe.to_yaml())
        report.write_summary(prepared.path, summary)
    settings = sampling.settings(recipe, bf16=args.bf16)
    return Run(recipe, prepared, grpo, tokenizer, chat, eval_rows, settings, metrics, summary, is_main, log, watchdog=dog)


def eval_pass(r: Run, label: str) -> dict | None:
    """Phases 2 and 4: score the held-out rows with the rewards, under training's arithmetic; None without eval. On
    several processes each samples its share of the rows and the main process scores them all (None on the others)."""
    if not r.eval_rows:
        return None
    agent = _tool_loop(r)
    t0 = time.monotonic()
    if agent is not None:  # whole conversations, each turn a generate call: minutes on a CPU, where one reply takes seconds
        r.log(f"eval {label}: playing {len(r.eval_rows)} prompts x {r.eval_settings.samples} conversations with the tool loop")
    with sampling.whole_weights(r.grpo if agent is None else None):  # ZeRO-3: gathered; the tool loop gathers itself
        result = scoring.score_shared(
            r.grpo.model, r.tokenizer, r.eval_rows, r.recipe.reward_funcs, r.eval_settings, chat=r.chat, trainer=agent
        )
    if result is None:  # another process than the main one: its samples went there
        return None
    result["seconds"] = round(time.monotonic() - t0, 1)
    _say_shared(r, f"eval {label}", len(r.eval_rows))
    rates = ", ".join(f"{k} {v['pass_rate']}" for k, v in result["rewards"].items())
    r.log(f"eval {label}: pass rate {rates} ({report.sample_count(result)}, {result['seconds']} s)")
    if "tools" in result:
        r.log(f"eval {label}: {preflight.describe_tools(result['tools'])}")
    if r.recipe.data.mixture:  # each eval row names its source: the pass rates of each
        result["sources"] = mixture.by_source([row[mixture.COLUMN] for row in r.eval_rows], result)
        each = "; ".join(f"{name} {', '.join(f'{k} {v}' for k, v in by.items())}" for name, by in result["sources"].items())
        r.log(f"eval {label} by source: pass rate {each}")
    return result


def _tool_loop(r: Run):
    """The trainer, whose tool loop an eval or the pre-flight samples with when the recipe has tools or an
    environment; None for single replies."""
    return r.grpo if r.recipe.agentic else None


def check_rewards(r: Run) -> None:
    """Phase 2a, the reward pre-flight (``health.preflight``): score the base model's samples on a few training
    prompts before step 1; a warning is printed, or with ``fail`` stops the run. On several processes each samples
    its share of the prompts, the main process judges them all, and every process stops when it says so."""
    cfg = r.recipe.health
    if not cfg.preflight_on or r.prepared.resume_from:
        return
    agent = _tool_loop(r)
    rows = list(r.grpo.train_dataset.select(range(min(quick.preflight_prompts(r.recipe), len(r.grpo.train_dataset)))))
    training = explore.first_steps(r.recipe.training, r.recipe.explore)
    if agent is not None:
        group = training.effective("num_generations")
        scaled = quick.preflight_prompts(r.recipe) < quick.PREFLIGHT_PROMPTS and cfg.preflight_prompts is None
        why = f" ({quick.why('health.preflight_prompts', cfg.preflight_prompts, r.recipe.training)})" if scaled else ""
        r.log(f"pre-flight: playing {plural(len(rows), 'prompt')} x {group} conversations with the tool loop{why}")
        found = preflight.sample_conversations(agent, rows, r.recipe.weights, training, r.eval_settings, limits=cfg, shared=True)
    else:
        funcs, weights = r.recipe.reward_funcs, r.recipe.weights
        with sampling.whole_weights(r.grpo):  # ZeRO-3: the weights gathered on every process while it samples
            found = preflight.sample_and_score(
                r.grpo.model, r.tokenizer, rows, funcs, weights, training, r.eval_settings, chat=r.chat, limits=cfg, shared=True
            )
    stop = launch.on_main_first(lambda: _preflight_verdict(r, found, len(rows)))  # every process stops, or none
    if stop is not None:
        raise watchdog.Unhealthy(stop)


def _say_shared(r: Run, what: str, prompts: int) -> None:
    """On several processes, one line saying that each sampled its share of the prompts (``run.shares``)."""
    count = launch.world_size()
    if count > 1:
        r.log(f"{what}: {plural(prompts, 'prompt')} sampled by {count} processes, each its share")


def _preflight_verdict(r: Run, found, prompts: int) -> str | None:
    """On the main process: the pre-flight's lines and its record in the summary; the line a run stops on (``fail``
    and a warning), else None."""
    stats, findings, seconds = found
    _say_shared(r, "pre-flight", prompts)
    r.log(f"pre-flight ({stats['total']['samples']} samples, {seconds} s): {preflight.describe(stats)}")
    if "tools" in stats:
        r.log(f"pre-flight: {preflight.describe_tools(stats['tools'])}")
    for finding in findings:
        r.log(finding.line())
    r.summary["health"] = {"preflight": {**stats, "seconds": seconds, "findings": [f.to_dict() for f in findings]}}
    warning = next((f for f in findings if f.severity == "warning"), None)
    if warning is not None and r.recipe.health.preflight == "fail":
        return f"{warning.line()} (health.preflight: fail)"
    return None


def _step_completions(args) -> str:
    """The completions an optimizer step learns from, over every micro-batch and process, and how they are split."""
    per_batch, accumulated, processes = args.per_device_train_batch_size, args.gradient_accumulation_steps, args.world_size
    parts = [f"{args.num_generations} per prompt"]
    if accumulated > 1:
        parts.append(f"{accumulated} micro-batches of {per_batch}")
    if processes > 1:
        parts.append(f"{per_batch * accumulated} on each of {processes} processes")
    return f"{per_batch * accumulated * processes} completions ({'; '.join(parts)})"


def optimize(r: Run) -> None:
    """Phase 3: TRL's training loop, from the last complete checkpoint when resuming."""
    args, resume_from = r.grpo.args, r.prepared.resume_from
    if resume_from:
        r.log(f"resuming from {resume_from.name}; metrics.jsonl kept up to step {rundir.step_of(resume_from)}")
    r.log(
        f"training: {args.max_steps if args.max_steps > 0 else 'epochs'} steps of {_step_completions(args)}; "
        f"metrics in {r.dir / 'metrics.jsonl'}"
    )
    if r.is_main and any(type(c).__name__ == "TensorBoardCallback" for c in r.grpo.callback_handler.callbacks):
        rundir.record(r.dir, "runs")  # transformers' logging_dir for TensorBoard's event files: output_dir/runs/
    r.started = time.monotonic()
    r.grpo.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    _record_progress(r)
    if r.watchdog.stopped_by is not None:
        raise watchdog.Unhealthy(f"{r.watchdog.stopped_by.line()} (health.on_problem: stop; checkpoint saved)")


def _trained_before(prepared: rundir.Prepared) -> float:
    """Seconds of training up to the checkpoint a resume starts from: those of the last metrics line kept (each
    line holds the time up to its step), else, for a run that recorded none, the previous summary's."""
    if not prepared.resume_from:
        return 0.0
    kept = rundir.read_metrics(prepared.path / "metrics.jsonl")
    if kept and isinstance(kept[-1].get("train_seconds"), (int, float)):
        return float(kept[-1]["train_seconds"])
    return float((prepared.previous or {}).get("train_seconds") or 0.0)


def _record_progress(r: Run) -> None:
    """Steps done, training time, the reward at the first and last step, and health, so far (also after a stop)."""
    r.summary["health"] = watchdog.verdict(
        r.watchdog.findings, (r.summary.get("health") or {}).get("preflight"), r.watchdog.seconds
    )
    if r.started is None:
        return
    r.summary["train_seconds"] = round(r.metrics.train_seconds(), 1)  # with the steps before a resume
    r.summary["steps"] = r.grpo.state.global_step
    rewards = [line["reward"] for line in rundir.read_metrics(r.dir / "metrics.jsonl")] or [x for _, x in r.metrics.rewards]
    if rewards:
        r.summary["reward_first"], r.summary["reward_last"] = rewards[0], rewards[-1]


NOT_SAVED = "save_final was false (the eval after scored the trained model in memory)"


def _unchanged(r: Run) -> str | None:
    """Why the trained weights are exactly the base model's, or None: every row of every step had zero advantage
    and was left out of the loss (a resumed run's earlier steps are not known here, so it says nothing)."""
    if r.prepared.resume_from or r.grpo.state.global_step == 0 or not skipping.learned_nothing(r.grpo):
        return None
    return "every row of every step had zero advantage and was left out of the loss"


def finish(r: Run) -> None:
    """Phase 4: eval after, the final weights (or adapter) in ``final/`` unless ``save_final`` is false, summary and
    report. A run whose weights never moved still saves them, as every completed run does, and says so: what reads a
    run (``eval --model RUN``, ``merge``, ``push``, a script's from_pretrained) finds final/ where it looks."""
    trainer.release_training_state(r.grpo)  # the last step is taken: the eval after samples in the optimizer's memory
    with heap.large_blocks_mapped(on=heap.on_cpu(r.grpo)):  # in a heap the steps cut into holes
        r.summary["eval_after"] = eval_pass(r, "after")
    save = r.recipe.save_final
    if save:
        if r.is_main:
            rundir.record(r.dir, "final")
        r.grpo.save_model(str(r.dir / "final"))  # every process: sharded engines gather the weights; only the main one writes
    if not r.is_main:
        return
    unchanged = _unchanged(r)
    if save:
        r.tokenizer.save_pretrained(str(r.dir / "final"))
    else:
        r.log(f"final/ not saved: {NOT_SAVED}")
    if unchanged:
        r.log(f"trained weights: the base model's, unchanged ({unchanged}); grpo-ext doctor {r.dir} says why no group had spread")
    r.summary["final"] = {"saved": save, "why": None if save else NOT_SAVED, "unchanged": unchanged}
    r.summary["status"] = "completed"
    r.summary["eval_change"] = scoring.change(r.summary["eval_before"], r.summary["eval_after"])
    report.finish(r.dir, r.summary, r.log)
    for line in report.score_table({"before": r.summary["eval_before"], "after": r.summary["eval_after"]}):
        print(line)
    for line in report.change_lines(r.summary["eval_change"], "after vs before"):
        print(line)
    r.log(f"done in {r.summary['train_seconds']} s of training; run directory {r.dir}")


_FREE = "free space there (or fix its permissions), then run again"
_DISK = (errno.ENOSPC, errno.EDQUOT)  # a full disk, or the user's quota reached
_REFUSED = (errno.EROFS, errno.EACCES, errno.EPERM)


def _stopped(r: Run, status: str, error: str | None = None) -> OSError | None:
    """Record a run that ended early (summary, report) before the error goes up. A file that cannot be written (the
    disk that stopped the run is full) raises nothing more: its OSError is returned, for the one line to say."""
    _record_progress(r)
    r.summary["status"] = status
    if error:
        r.summary["error"] = error[:500]
    if not r.is_main:
        return None
    try:
        report.finish(r.dir, r.summary, r.log)
    except OSError as exc:
        return exc
    return None


def _disk_error(exc: BaseException | None) -> OSError | None:
    """The OSError of a full disk or a refused write behind ``exc`` (torch and safetensors wrap it), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _DISK + _REFUSED:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _failure(run_dir: Path, exc: BaseException, unrecorded: OSError | None = None) -> RunError:
    """One line for a run that failed. A full disk (or a refused write) says so and where, also when only the
    recording of the failure met it (torch reports a full disk as a RuntimeError of its own); else the error's
    type and first line."""
    disk = _disk_error(exc) or _disk_error(unrecorded)
    tail = ""
    if unrecorded is not None:
        tail = "; summary.json and report.md were not updated" + ("" if unrecorded is disk else f" ({os_problem(unrecorded)})")
    if disk is None:
        return RunError(f"training failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{tail}")
    name = errno.errorcode.get(disk.errno or 0, "")
    full = disk.errno in _DISK
    what, fix = ("the disk is full", "free space on it") if full else ("a file could not be written", "fix its permissions")
    at = disk.filename if disk.filename and disk is not unrecorded else run_dir
    return RunError(
        f"training failed: {what} ({disk.strerror}, {name}) at {at}{tail}; {fix}, then continue from the last complete "
        f"checkpoint with --resume"
    )


def run(recipe: Recipe, prepared: rundir.Prepared, verbose: bool = False, callbacks: list | None = None) -> dict:
    """The four phases in order; a failure or an interrupt after the build is recorded in the run directory."""
    console.quiet_third_parties(verbose)
    with heap.objects_frozen():
        return _phases(recipe, prepared, callbacks)


def _phases(recipe: Recipe, prepared: rundir.Prepared, callbacks: list | None) -> dict:
    try:
        r = build(recipe, prepared, callbacks)
    except Exception as exc:  # a full disk while it writes recipe.yaml or summary.json: one line too
        if _disk_error(exc) is None:
            raise
        raise _failure(prepared.path, exc) from exc
    try:
        check_rewards(r)
        r.summary["eval_before"] = (prepared.previous or {}).get("eval_before") or eval_pass(r, "before")
        heap.release()  # what the eval's sampling freed, before the optimizer's state is allocated
        optimize(r)
        finish(r)  # inside: a reward that fails in the eval after is a failed run, recorded as one
    except KeyboardInterrupt:
        _stopped(r, "interrupted")
        raise
    except watchdog.Unhealthy as exc:
        _stopped(r, "stopped_unhealthy", str(exc))
        if not r.is_main:  # every process stops alike (the checks read the whole batch): the main process says why
            raise ElsewhereError("stopped with the main process by the run's health checks; its error line says why") from None
        raise
    except (RunError, RecipeError) as exc:
        _stopped(r, "failed", f"{type(exc).__name__}: {exc}")
        raise
    except (Exception, launch.Terminated) as exc:
        peer = launch.lost(exc, recipe.training.effective("ddp_timeout"))  # another process failed, ended or hangs
        if peer is not None:
            _stopped(r, "failed", peer[1])
            raise peer[0] from None
        raise _failure(r.dir, exc, _stopped(r, "failed", f"{type(exc).__name__}: {exc}")) from exc
    return r.summary


def cmd_train(args, recipe: Recipe) -> None:
    """``grpo-ext train``'s work, once ``verbs/train_command.py`` has checked the ``recipe`` (with --quick's changes)."""
    if args.dry_run:
        dry_run(recipe)
        return
    train(
        recipe,
        overwrite=args.overwrite,
        resume=args.resume,
        verbose=args.verbose,
        accept_changes=args.accept_changes,
    )
