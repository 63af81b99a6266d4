"""A recipe checked completely against the schema and the settings rules, all problems reported at once with their
key paths, before torch, transformers or trl is imported: ``check`` returns what passed (``Passed``), which
``checked.typed`` makes a ``Recipe``, so that a refused recipe never loads the typed recipe's module.

The checks read the mapping as the file holds it: each section is first checked key by key (``_check_section``), and
the rules across keys then run on what passed, also in a section where another key was refused, so that one round
reports every problem. Only a recipe without a problem is built into its typed sections.
"""

import copy
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from grpo_ext import rewards
from grpo_ext.core.errors import Loc, Problem, RecipeError, problem, where
from grpo_ext.core.files import resolve_path
from grpo_ext.core.text import clip, plural, shown, suggest
from grpo_ext.core.values import coerce, kind_of, wrong_kind
from grpo_ext.data import datafiles, examples, generators, mixture, verifiers_tasks
from grpo_ext.recipe import agents
from grpo_ext.recipe.read import apply_overrides, locate, read_yaml
from grpo_ext.recipe.schema import MIXTURE_SOURCE, SCHEMA, TOP_LEVEL, Spec
from grpo_ext.recipe.training import Training
from grpo_ext.rewards.guard import Guarded, guarded_rewards
from grpo_ext.rewards.registry import Resolved
from grpo_ext.settings import adapters, batch_rules, compat, model_names, output_dir, trackers, variants

Section = dict[str, Any]  # a section as the recipe file holds it: the keys that passed their own check so far
Columns = dict[str, tuple[list[str] | None, str]]  # stage -> (its rows' columns, None where only loading tells; the rows)


def _nul_places(value: object, loc: Loc) -> list[Loc]:
    """Where a key or a text of the recipe holds a NUL character, as ``data.system_prompt`` or ``rewards[1]``."""
    if isinstance(value, str):
        return [loc or ("the recipe",)] if "\0" in value else []
    if isinstance(value, dict):
        places = []
        for key, item in value.items():
            inner = (*loc, clip(str(key).replace("\0", "\\0")))  # shown, not written to the terminal
            places += ([inner] if isinstance(key, str) and "\0" in key else []) + _nul_places(item, inner)
        return places
    if isinstance(value, list):
        return [place for i, item in enumerate(value) for place in _nul_places(item, (*loc, i))]
    return []


def _check_section(section: Section, schema: dict[str, Spec], loc: Loc, problems: list[Problem]) -> Section:
    """Fill defaults and check kinds, choices and minimums; unknown keys get a suggestion."""
    out = {}
    for key, value in section.items():
        at = (*loc, clip(str(key)))
        if key not in schema:
            problems.append(Problem(at, f"unknown key{suggest(str(key), schema)}"))
            continue
        spec = schema[key]
        value, ok = coerce(value, spec.kinds)
        if not ok:
            problems.append(Problem(at, wrong_kind(spec.kinds, value)))
            continue
        if spec.choices is not None and value not in spec.choices:
            problems.append(Problem(at, f"{shown(value)} is not one of {', '.join(map(repr, spec.choices))}"))
            continue
        if spec.minimum is not None and isinstance(value, (int, float)) and value < spec.minimum:
            problems.append(Problem(at, f"must be at least {spec.minimum}, got {shown(value)}"))
            continue
        if spec.maximum is not None and isinstance(value, (int, float)) and value > spec.maximum:
            problems.append(Problem(at, f"must be at most {spec.maximum}, got {shown(value)}"))
            continue
        out[key] = value
    for key, spec in schema.items():
        if key not in section:
            if spec.required:
                problems.append(Problem((*loc, key), f"missing; {spec.doc or 'required'}"))
            else:
                out[key] = copy.deepcopy(spec.default)
    return out


def _check_prompts(value: list[Any] | None, loc: Loc, problems: list[Problem], mappings: bool = False) -> None:
    """Prompts are non-empty strings; eval prompts may also be mappings with a ``prompt`` and reward columns."""
    if value is None:
        return
    if not value:
        problems.append(Problem(loc, "is empty; give at least one prompt"))
    for i, p in enumerate(value):
        if mappings and isinstance(p, dict):
            if not isinstance(p.get("prompt"), str) or not p["prompt"].strip():
                problems.append(
                    Problem((*loc, i), "a mapping needs a non-empty prompt string, e.g. {prompt: '2+3?', answer: '5'}")
                )
            elif set(p) != set(value[0] if isinstance(value[0], dict) else {"prompt"}):
                first = ", ".join(value[0])
                problems.append(
                    Problem((*loc, i), f"has columns {', '.join(p)}, the first has {first}; give each the same columns")
                )
        elif not isinstance(p, str) or not p.strip():
            form = "a non-empty string or a mapping {prompt: ..., answer: ...}" if mappings else "a non-empty string"
            problems.append(Problem((*loc, i), f"each prompt is {form}, got {kind_of(p)} {shown(p, 40)}"))


def _model_reward(entry: Section, loc: Loc, base_dir: Path, problems: list[Problem]) -> Section:
    """``{model: PATH_OR_ID, ...}``, the shorthand for the reward_model reward: ``{name: reward_model, args: {model:
    ...}}``, a path read from the recipe's folder as everywhere in a recipe."""
    entry = dict(entry)
    model, args = entry.pop("model"), entry.get("args", {})
    if "name" in entry or not isinstance(model, str) or not model or not isinstance(args, dict) or "model" in args:
        problems.append(Problem((*loc, "model"), "a reward model is {model: PATH_OR_ID} with no name and no args.model"))
        return entry
    local = resolve_path(model, base_dir)
    if model.startswith((".", "/", "~")) and not local.exists():
        problems.append(Problem((*loc, "model"), f"{local} does not exist; give a reward model's directory or a hub id"))
    named = str(local.resolve()) if local.exists() or model.startswith((".", "/", "~")) else model
    return {**entry, "name": "reward_model", "args": {"model": named, **args}}


def _check_rewards(value: list[Any], base_dir: Path, problems: list[Problem], environment: bool = False) -> list[Section]:
    out = []
    if not value and not environment:  # an environment's get_reward may be the whole reward (checked once it is found)
        problems.append(Problem(("rewards",), "is empty; name at least one reward (see `grpo-ext rewards`)"))
    for i, entry in enumerate(value):
        loc = ("rewards", i)
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            problems.append(Problem(loc, f"a reward is a name or a mapping with name, weight, args; got {kind_of(entry)}"))
            continue
        if "model" in entry:
            entry = _model_reward(entry, loc, base_dir, problems)
        out.append(_check_section(entry, SCHEMA["reward"], loc, problems))
    return out


def _check_pass_at(ev: Section, problems: list[Problem]) -> None:
    """eval.pass_at: whole numbers from 1 to eval.samples (pass@k needs k of the samples); null means 1 and samples."""
    ks, samples = ev.get("pass_at"), ev.get("samples")
    if ks is None or not isinstance(samples, int):
        return
    bad = [k for k in ks if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= samples]
    if bad or not ks:
        problems.append(
            Problem(
                ("eval", "pass_at"), f"{shown(ks)}: give whole numbers from 1 to eval.samples ({samples}), e.g. [1, {samples}]"
            )
        )


TRAIN_SOURCES = ("prompts", "file", "source", "hub")
# the training rows of a recipe whose environment writes its prompts (data names no training rows): TRL's own
# placeholder rows when it is given no dataset, here also carrying data.system_prompt and data.examples
ENVIRONMENT_ROWS = "data names none: each an empty prompt that reset adds to"
EVAL_SOURCES = ("eval_prompts", "eval_file", "eval_split")  # and rows held out of the training rows
COLUMN_KEYS = ("prompt_column", "hub_split", "source_args")  # what the rules on the rows' columns read of data:
DATA: Loc = ("data",)


def _holds_out(d: Section) -> bool:
    return datafiles.holds_out(d.get("eval_fraction"), d.get("eval_size"), d.get("eval_file"), d.get("eval_split"))


def _check_sources(
    d: Section, given: Section, eval_enabled: bool, base_dir: Path, needs_eval: bool = True, environment: bool = False
) -> list[Problem]:
    """Exactly one source of training rows and at most one of eval rows, each usable; with ``needs_eval`` (not a
    mixture's source, whose eval rows may come from the whole mixture's or another source's), eval rows too. With an
    ``environment``, no source of training rows is one too: its reset writes each prompt (``ENVIRONMENT_ROWS``)."""
    problems: list[Problem] = []
    if d.get("source") == "verifiers" and isinstance(d.get("source_args"), dict):  # a taskset file beside the recipe
        d["source_args"] = verifiers_tasks.absolute(d["source_args"], base_dir)
    _check_prompts(d.get("prompts"), ("data", "prompts"), problems)
    _check_prompts(d.get("eval_prompts"), ("data", "eval_prompts"), problems, mappings=True)
    if d.get("prompt_template") is not None:
        try:
            datafiles.template_fields(d["prompt_template"])
        except ValueError as exc:
            problems.append(Problem(("data", "prompt_template"), str(exc)))
        column = SCHEMA["data"]["prompt_column"].default  # the template's text lands in this column
        if given.get("prompt_column", column) != column:  # so a recorded recipe, which names it, still validates
            problems.append(Problem(DATA, "prompt_template and prompt_column are both given; the template names its columns"))
    sources = [k for k in TRAIN_SOURCES if d.get(k) is not None]
    if len(sources) > 1:
        problems.append(Problem(DATA, f"{' and '.join(sources)} are all given; keep one source of training prompts"))
    if not sources and all(k in d for k in TRAIN_SOURCES) and not environment:  # each passed its own check
        problems.append(
            Problem(
                DATA,
                f"give prompts (a list of strings), file ({datafiles.FORMATS}), source (a generator: arith) or hub "
                "(a dataset id)",
            )
        )
    for key in ("file", "eval_file"):
        if d.get(key) is not None:
            found = datafiles.check_path(resolve_path(d[key], base_dir), ("data", key))
            problems.extend([found] if found else [])
    hub = d.get("hub")
    if isinstance(hub, str) and hub.count("/") != 1:
        problems.append(Problem(("data", "hub"), f"{hub!r} is not a dataset id; give org/name, e.g. openai/gsm8k"))
    if d.get("source") is not None:
        problems.extend(generators.check_source(d["source"], d.get("source_args", {})))
    problems.extend(examples.check(d.get("examples")))
    if d.get("examples") and d.get("chat") is False:
        problems.append(
            Problem(
                ("data", "examples"), "worked examples are chat turns, and data.chat is false; set data.chat: auto or drop them"
            )
        )
    fraction = d.get("eval_fraction")
    if fraction is not None and not 0 < fraction < 1:
        problems.append(
            Problem(("data", "eval_fraction"), f"{fraction} is not between 0 and 1; e.g. 0.1 holds out a tenth of the rows")
        )
    if fraction is not None and d.get("eval_size") is not None:
        problems.append(Problem(DATA, "eval_fraction and eval_size are both given; hold out a share or a number of rows"))
    holds_out = _holds_out(d)
    key = "eval_fraction" if fraction is not None else "eval_size"
    eval_sources = [k for k in EVAL_SOURCES if d.get(k) is not None] + ([key] if holds_out else [])
    if len(eval_sources) > 1:
        problems.append(Problem(DATA, f"{' and '.join(eval_sources)} are all given; keep one source of eval rows"))
    if holds_out and not (d.get("file") or d.get("hub")):
        instead = "the generator keeps its own held-out rows" if d.get("source") else "give eval_prompts instead"
        problems.append(Problem(("data", key), f"holds out rows of data.file or data.hub only; {instead}"))
    if d.get("eval_split") is not None and not d.get("hub"):
        file = resolve_path(d["file"], base_dir) if d.get("file") else None
        if file is None or not file.exists() or datafiles.splits(file) is None:
            problems.append(
                Problem(
                    ("data", "eval_split"),
                    "names a split of data.hub or of a saved DatasetDict in data.file; for a file use eval_file",
                )
            )
    tasks = d.get("source") == "verifiers" and not problems  # a taskset that loaded: its eval tasks are known
    for key in [k for k in EVAL_SOURCES if d.get(k) is not None] if tasks else ():
        problems.append(
            Problem(
                ("data", key),
                "holds rows the taskset's rewards cannot score (they score its own tasks); give its eval split with "
                "source_args.eval_args, or source_args.held_out: N",
            )
        )
    if eval_enabled and needs_eval and tasks and not eval_sources and not generators.generated("verifiers", d["source_args"])[1]:
        problems.append(
            Problem(
                ("data", "source_args"),
                "the taskset gives no eval tasks; give eval_args (its eval split, e.g. {split: test}) or held_out: N, "
                "or set eval.enabled: false",
            )
        )
    if eval_enabled and needs_eval and not (eval_sources or holds_out or d.get("source") is not None):
        problems.append(
            Problem(
                ("data", "eval_prompts"),
                "missing; give eval_prompts, eval_file, eval_split or eval_fraction, or set eval.enabled: false",
            )
        )
    return problems


def held_out_size(eval_size: int | None, eval_fraction: float | None, rows: int) -> tuple[int, str]:
    """(training rows held out for eval, the key that says how many) of a data: section's ``rows`` training rows:
    its eval_size, else its eval_fraction share."""
    if eval_size is not None:
        return eval_size, "eval_size"
    return round((eval_fraction or 0.0) * rows), "eval_fraction"


def _prompts_per_step(training: Training) -> tuple[int, int, int] | None:
    """(prompts, completions, group) of one generation batch on one process, completions in groups of
    num_generations, each group from one prompt. None when the batch settings are wrong (batch_rules says so)."""
    group, completions = training.effective("num_generations"), batch_rules.generation_batch(training.effective)
    if not (isinstance(group, int) and not isinstance(group, bool) and group > 0) or completions is None or completions % group:
        return None
    return completions // group, completions, group


def _check_hold_out(d: Section, training: Training, base_dir: Path) -> list[Problem]:
    """Rows held out of data.file must leave at least one generation batch of prompts to train on (a hub dataset's
    rows are counted when it loads)."""
    batch = _prompts_per_step(training)
    if not _holds_out(d) or not d.get("file") or batch is None or not {"eval_size", "eval_fraction"} <= set(d):
        return []
    try:
        path = datafiles.split_path(resolve_path(d["file"], base_dir), d["hub_split"], ("data", "hub_split"))
        rows = sum(1 for _ in datafiles.rows(path, ("data", "file")))
    except RecipeError:  # a file that cannot be read: its own check (recipe/files.check_recipe_files) names the row
        return []
    size, key = held_out_size(d["eval_size"], d["eval_fraction"], rows)
    prompts, completions, group = batch
    if size < 1:
        return [Problem(("data", key), f"holds out {size} of {plural(rows, 'training row')}; hold out at least one")]
    if rows - size >= prompts:
        return []
    fix = f"hold out at most {rows - prompts}" if rows > prompts else "give more rows"
    return [
        Problem(
            ("data", key),
            f"holds out {size} of {plural(rows, 'training row')}, leaving {rows - size}; a step samples "
            f"{plural(prompts, 'prompt')} ({completions} completions, {group} per prompt); {fix}, or give eval_prompts or "
            "eval_file instead",
        )
    ]


def _check_data(
    d: Section,
    given: Section,
    eval_enabled: bool,
    base_dir: Path,
    problems: list[Problem],
    needs_eval: bool = True,
    environment: bool = False,
    at: Loc = DATA,
) -> Columns:
    """The data section's sources (see _check_sources), then the columns each source's rows reach the rewards
    with: {"training": (columns, "the training rows (source named)"), "eval": (...)}; columns are None where only
    loading tells (hub). A mixture's sources are each checked so (_check_mixture), their rows named by the source's
    key path ``at``; the problems found are at ``data.`` and the caller moves them there."""
    if set(given) - set(SCHEMA["data"]):  # a misspelt key, already a problem: rules on what it meant would mislead
        return {}
    if d.get("mixture") is not None:
        return _check_mixture(d, given, eval_enabled, base_dir, problems)
    found = _check_sources(d, given, eval_enabled, base_dir, needs_eval, environment)
    if d.get("size") is not None:
        found.append(Problem(("data", "size"), "sizes a mixture of sources (data.mixture); leave it out for one source"))
    problems.extend(found)
    if found or any(key not in d for key in COLUMN_KEYS):  # a key refused by its own check: its line says so
        return {}

    def file_columns(key: str, split: tuple[Loc, str | None]) -> list[str] | None:
        path = resolve_path(d[key], base_dir)
        try:
            path = datafiles.split_path(path, split[1], split[0])
            cols = datafiles.columns(path, ("data", key))
            datafiles.prompt_rule(cols, d.get("prompt_template"), d["prompt_column"], f"data.{key} {path.name}")
        except RecipeError as exc:
            problems.extend(exc.found)
            return None
        return _renamed_columns(cols, d)

    def named(key: str, what: str = "") -> str:  # the rows of a source by its key, at the source's own key path
        return f"{where((*at, key))}{f' {what}' if what else ''}"

    train: list[str] | None = ["prompt"]
    rows = named("prompts") if d.get("prompts") is not None else ENVIRONMENT_ROWS
    if d.get("file"):
        train, rows = file_columns("file", (("data", "hub_split"), d["hub_split"])), named("file", Path(d["file"]).name)
    elif d.get("source"):
        train, rows = list(generators.generated(d["source"], d["source_args"])[0][0]), named("source", d["source"])
    elif d.get("hub"):
        train, rows = None, named("hub", d["hub"])
    evaluation, eval_rows = train, rows  # rows held out of the training rows
    if d.get("eval_prompts") is not None:
        first = d["eval_prompts"][0]
        evaluation, eval_rows = (list(first) if isinstance(first, dict) else ["prompt"]), named("eval_prompts")
    elif d.get("eval_file"):
        eval_rows = named("eval_file", Path(d["eval_file"]).name)
        evaluation = file_columns("eval_file", (("data", "eval_file"), None))
    elif d.get("eval_split"):
        eval_rows = named("eval_split", d["eval_split"])
        evaluation = file_columns("file", (("data", "eval_split"), d["eval_split"])) if d.get("file") else None
    elif d.get("source"):
        held_out = generators.generated(d["source"], d["source_args"])[1]
        evaluation = list(held_out[0]) if held_out else ["prompt"]
    same = evaluation is train  # the same columns: checked once, as the training rows
    evaluation = None if same or not eval_enabled else evaluation
    return {"training": (train, f"the training rows ({rows})"), "eval": (evaluation, f"the eval rows ({eval_rows})")}


def _held(d: Section) -> tuple[str, str] | None:
    return mixture.held(d.get("eval_prompts"), d.get("eval_file"))


def _check_mixture(d: Section, given: Section, eval_enabled: bool, base_dir: Path, problems: list[Problem]) -> Columns:
    """data.mixture: nothing of one source beside it; each source checked as a data: section of its own, its
    problems moved to data.mixture[i]; the mixture's own keys (data.mixture.check). Returns each source's columns
    as _check_data does for one source, with the ``source`` column the mixture adds; ``d["mixture"]`` is left
    holding the sources with their defaults filled in."""
    found = [
        Problem(("data", key), "names one source, beside data.mixture; move it into the sources of the mixture")
        for key, spec in SCHEMA["data"].items()
        if key not in (*mixture.SHARED_KEYS, *mixture.HELD_KEYS) and key in given and given[key] != spec.default
    ]
    columns = _check_held(d, eval_enabled, base_dir, found)
    if not d["mixture"]:
        found.append(Problem(("data", "mixture"), "is empty; give at least one source, e.g. [{file: train.jsonl, weight: 1}]"))
    sources: list[Section] = []
    for i, entry in enumerate(d["mixture"]):
        loc = ("data", "mixture", i)
        if not isinstance(entry, dict):
            found.append(Problem(loc, "a source is a data: mapping with weight or rows, e.g. {source: arith, weight: 1}"))
            sources.append({})
            continue
        found += [
            Problem((*loc, key), "is the whole mixture's; set it beside data.mixture") for key in mixture.WHOLE if key in entry
        ]
        entry = {key: value for key, value in entry.items() if key not in mixture.WHOLE}
        sources.append(_check_section(entry, MIXTURE_SOURCE, loc, found))
        own: list[Problem] = []
        alone = {key: value for key, value in entry.items() if key not in mixture.OWN_KEYS}
        checked = _check_data(mixture.config(d, sources[i]), alone, eval_enabled, base_dir, own, needs_eval=False, at=loc)
        found += [mixture.within(p, i) for p in own]
        for stage, (cols, rows) in checked.items():
            if cols is not None and mixture.COLUMN in cols:
                found.append(
                    Problem(
                        loc,
                        f"its {stage} rows have a column {mixture.COLUMN!r}, which a mixture fills with each row's source "
                        "name; rename that column",
                    )
                )
            route = [agents.ROUTE] if sources[i].get("environment") is not None and agents.ROUTE not in (cols or []) else []
            columns[f"{stage} {i}"] = (None if cols is None else [*cols, mixture.COLUMN, *route], rows)
    found += mixture.check(sources, d.get("size"))
    held = _held(d)
    if eval_enabled and held is None and sources and not any(mixture.has_own_eval(s) for s in sources):
        found.append(
            Problem(
                ("data", "eval_prompts"),
                "missing; give eval_prompts or eval_file beside data.mixture (for the whole mixture) or in a source, or set "
                "eval.enabled: false",
            )
        )
    for i, entry in enumerate(sources):
        name = mixture.label(entry.get("name"), entry.get("file"), entry.get("source"), entry.get("hub"))
        if held is not None and entry and name == held[0]:
            found.append(
                Problem(
                    ("data", "mixture", i),
                    f"has the name {held[0]!r}, which names the rows of {where(_held_key(d))}; give the source its own name: key",
                )
            )
    problems.extend(found)
    d["mixture"] = sources
    return {} if found else columns


def _held_key(d: Section) -> Loc:
    return ("data", "eval_prompts") if d.get("eval_prompts") is not None else ("data", "eval_file")


def _check_held(d: Section, eval_enabled: bool, base_dir: Path, found: list[Problem]) -> Columns:
    """The held-out set of a whole mixture (data.eval_prompts or data.eval_file beside data.mixture, eval_size the
    first rows of the file): one of them, usable, without a ``source`` column (the mixture fills it with the set's
    name). Returns the columns its rows reach the rewards with, as _check_data does."""
    if d.get("eval_prompts") is not None and d.get("eval_file") is not None:
        found.append(
            Problem(
                DATA, "eval_prompts and eval_file are both given beside data.mixture; keep one held-out set for the whole mixture"
            )
        )
        return {}
    if d.get("eval_size") is not None and d.get("eval_file") is None:
        found.append(
            Problem(
                ("data", "eval_size"),
                "beside data.mixture it takes the first rows of data.eval_file, which is not given; to hold rows out of a "
                "source's training rows, set eval_size in that source",
            )
        )
    held = _held(d)
    if held is None or "prompt_column" not in d:  # prompt_column refused by its own check: its line says so
        return {}
    before = len(found)
    _check_prompts(d.get("eval_prompts"), ("data", "eval_prompts"), found, mappings=True)
    cols: list[str] | None = None
    if d.get("eval_prompts"):
        first = d["eval_prompts"][0]
        cols = list(first) if isinstance(first, dict) else ["prompt"]
    elif d.get("eval_file") is not None:
        path = resolve_path(d["eval_file"], base_dir)
        refused = datafiles.check_path(path, ("data", "eval_file"))
        try:
            if refused:
                raise RecipeError(refused)
            path = datafiles.split_path(path, None, ("data", "eval_file"))
            cols = datafiles.columns(path, ("data", "eval_file"))
            datafiles.prompt_rule(cols, d.get("prompt_template"), d["prompt_column"], held[1])
            cols = _renamed_columns(cols, d)
        except RecipeError as exc:
            found.extend(exc.found)
    if len(found) > before or cols is None:
        return {}
    if mixture.COLUMN in cols:
        found.append(
            Problem(
                _held_key(d),
                f"its rows have a column {mixture.COLUMN!r}, which a mixture fills with each row's source name; rename "
                "that column",
            )
        )
        return {}
    return {"eval whole": ([*cols, mixture.COLUMN], f"the eval rows ({held[1]})")} if eval_enabled else {}


def _renamed_columns(cols: list[str], d: Section) -> list[str]:
    """The columns rows reach the rewards with: the prompt column is renamed ``prompt``; a template keeps all."""
    if d.get("prompt_template") or d["prompt_column"] not in cols:
        return [*cols, "prompt"]
    return [c for c in cols if c != d["prompt_column"]] + ["prompt"]


def _build_rewards(entries: list[Section], base_dir: Path, problems: list[Problem]) -> list[Resolved]:
    """Each reward found by its name and its args checked against the signature (rewards.registry.resolve): the
    registry's rewards are built, a user's factory is not called (Recipe.build_rewards calls it)."""
    resolved = []
    for i, entry in enumerate(entries):
        if set(SCHEMA["reward"]) - set(entry):  # one of its keys failed its own check
            continue
        try:
            resolved.append(rewards.resolve(entry["name"], entry["args"], base_dir, f"rewards[{i}]"))
        except RecipeError as exc:
            problems.extend(exc.found)
    return resolved if len(resolved) == len(entries) else []


# The top-level keys that are sections of their own keys, in the schema's order, each checked by _check_section
SECTIONS = tuple(name for name in SCHEMA if name in TOP_LEVEL)


class Passed(NamedTuple):
    """A recipe that passed every check, as ``check`` leaves it: each top-level key and section checked with its
    defaults filled in, and what checking found and built. ``checked.typed`` makes the ``Recipe`` of it."""

    top: Section  # the top-level keys (sections as checked below, the others as given with their defaults)
    sections: dict[str, Section]  # SECTIONS, each with every key
    rewards: list[Section]  # rewards[i], each with every key (a verifiers taskset's added)
    settings: Section  # training: as given, with algorithm:'s keys
    given: Section  # the recipe as written, after overrides
    path: Path | None
    base_dir: Path
    resolved: list[Resolved]
    origins: dict[str, str]
    columns: Columns
    reward_names: list[str]
    tool_functions: list[Any]
    environment_class: type | None
    environment_classes: dict[str, type]
    funcs: list[Guarded] | None  # the guarded rewards, None while a user's factory waits to be called


def check(doc: Section, path: Path | None = None) -> Passed:
    """Check a recipe mapping; return what passed (``Passed``) or raise RecipeError listing every problem.

    Every rule a run depends on is here, so ``grpo-ext validate``, ``--dry-run`` and training accept
    and refuse the same recipes. Nothing here builds the typed recipe (``checked.py``): a refused recipe loads only
    what checking it needs.
    """
    problems: list[Problem] = []
    source = str(path) if path else None
    nul = _nul_places(doc, ())
    if nul:  # the checks below hand paths to the OS, which refuses a NUL with a traceback
        raise RecipeError(
            [Problem(loc, "holds a NUL character (\\0), which no path or text may; remove it") for loc in nul], source
        )
    base_dir = path.parent if path else Path.cwd()
    top = _check_section(doc, TOP_LEVEL, (), problems)

    def section(name: str) -> Section | None:  # a section that failed its own check (or is missing) is skipped below
        return _check_section(top[name], SCHEMA[name], (name,), problems) if name in top else None

    sections = {name: section(name) for name in SECTIONS}
    groups = sections["groups"]
    if groups is not None and groups.get("dynamic_sampling", False) is None:
        groups["dynamic_sampling"] = top.get("algorithm") == "dapo"  # DAPO's own, the preset turns it on
    model, data, evaluation, explore = sections["model"], sections["data"], sections["eval"], sections["explore"]
    # an environment given, even one refused below, may be why the rewards are empty: its own line says what is wrong
    environment_given = doc.get("environment") is not None
    # a verifiers taskset brings its own rewards (added below, once its data passed): none may be named
    tasks_given = isinstance(doc.get("data"), dict) and doc["data"].get("source") == "verifiers"
    entries = _check_rewards(top["rewards"], base_dir, problems, environment_given or tasks_given) if "rewards" in top else []
    settings = dict(top["training"]) if "training" in top else None
    columns: Columns = {}
    origins: dict[str, str] = {}
    if settings is not None and top.get("algorithm") is not None:
        settings, origins, preset_problems = variants.expand(top["algorithm"], settings)
        problems.extend(map(problem, preset_problems))
    if data is not None:
        eval_enabled = bool((evaluation or {}).get("enabled"))
        columns = _check_data(data, top["data"], eval_enabled, base_dir, problems, environment=environment_given)
        entries += _taskset_rewards(data, columns, entries, problems)
    owned = environment_given and data is not None and all(data.get(k) is None for k in (*TRAIN_SOURCES, "mixture"))
    if evaluation is not None:
        _check_pass_at(evaluation, problems)
    if isinstance(top.get("output_dir"), str):
        refused = output_dir.check(top["output_dir"], path)
        problems.extend([problem(refused)] if refused else [])
    if model is not None and isinstance(model.get("name"), str):
        problems.extend(map(problem, model_names.check(model["name"], base_dir)))
    if settings is not None:
        training = Training(settings)
        if "reward_weights" in settings:
            problems.append(Problem(("training", "reward_weights"), "set each reward's weight in rewards[i].weight instead"))
        problems.extend(map(problem, compat.check_training(settings)))
        problems.extend(map(problem, trackers.check_report_to(settings)))
        problems.extend(map(problem, adapters.check(model or {}, settings)))
        problems.extend(map(problem, batch_rules.check_explore(explore or {}, training.effective)))
        if columns and data is not None and (evaluation or {}).get("enabled"):  # data passed its checks; eval holds rows out
            problems.extend(_check_hold_out(data, training, base_dir))
        if owned and not _positive(training.effective("max_steps")):  # TRL's rule when it is given no dataset
            problems.append(
                Problem(
                    ("training", "max_steps"),
                    "the environment writes every prompt (data names no training rows), so a run is as long as its steps; "
                    "set training.max_steps",
                )
            )
    if data is not None and data.get("source") == "verifiers" and columns:  # the taskset's tools, checked as a recipe's
        top["tools"] = _taskset_tools(data["source_args"], top.get("tools"))
    tools, environment, classes = agents.check(top, base_dir, problems)
    if environment is not None:  # TRL calls reset(**row) with every column of each row it plays
        problems.extend(agents.check_rows(environment, columns))
    problems.extend(_check_source_routes(data, top.get("environment")))
    if agents.several(top.get("environment")) and top["environment"]:
        eval_enabled = bool((evaluation or {}).get("enabled"))
        routes = _check_routes(data, top["environment"], owned, columns, base_dir, eval_enabled, problems)
        for name, cls in classes.items():  # each with the rows that name it (all where only loading tells)
            chosen = {stage: (cols, rows) for stage, (cols, rows) in columns.items() if name in routes.get(rows, {name})}
            problems.extend(agents.check_rows(cls, chosen, (*agents.ENVIRONMENT, name)))
    unrewarded = {"": environment} if environment is not None else {f".{name}": cls for name, cls in classes.items()}
    for at, cls in unrewarded.items() if "rewards" in top and not top["rewards"] else ():
        if not callable(getattr(cls, "get_reward", None)):
            problems.append(
                Problem(
                    ("rewards",),
                    f"is empty and the environment{at} has no get_reward; name a reward, or give the environment one",
                )
            )
    if data is not None and not problems:  # the examples' calls are held against tools that were all found
        problems.extend(agents.check_calls(_all_examples(data), tools, [environment] if environment else list(classes.values())))
    resolved = _build_rewards(entries, base_dir, problems)
    built = guarded_rewards(entries, resolved, columns, problems, build=False)
    if problems:
        raise RecipeError(problems, source)
    names = [_reward_name(r, f) for r, f in zip(resolved, built, strict=True)]
    return Passed(
        top=top,
        sections={name: value for name, value in sections.items() if value is not None},  # each one, as none was refused
        rewards=entries,
        settings=settings or {},
        given=doc,
        path=path,
        base_dir=base_dir,
        resolved=resolved,
        origins=origins,
        columns=columns,
        reward_names=names,
        tool_functions=tools,
        environment_class=environment,
        environment_classes=classes,
        funcs=None if None in built else [f for f in built if f is not None],
    )


def check_file(ref: str, overrides: Sequence[str] = ()) -> Passed:
    """Locate and read a recipe (a file, or a shipped recipe by name), apply the ``overrides``, and check it."""
    path = locate(ref)
    return check(apply_overrides(read_yaml(path), list(overrides)), path)


def _taskset_rewards(data: Section, columns: Columns, entries: list[Section], problems: list[Problem]) -> list[Section]:
    """The rewards: entries of a verifiers taskset's rewards (``data.source: verifiers``), each with its weight, but
    those the recipe already holds (a run's recorded recipe lists them); none while its data was refused."""
    for i, one in enumerate(data.get("mixture") or []):
        if isinstance(one, dict) and one.get("source") == "verifiers":
            problems.append(
                Problem(
                    ("data", "mixture", i, "source"),
                    "a verifiers taskset trains alone (its rewards score every row); give it as data.source",
                )
            )
    if data.get("source") != "verifiers" or not columns:
        return []
    added: list[Section] = []
    for name, weight in verifiers_tasks.rewards_of(data["source_args"]):
        entry = {"name": verifiers_tasks.REWARD, "weight": weight, "args": {**copy.deepcopy(data["source_args"]), "reward": name}}
        if not any(e.get("name") == entry["name"] and e.get("args") == entry["args"] for e in entries):
            added.append(_check_section(entry, SCHEMA["reward"], ("rewards", len(entries) + len(added)), problems))
    return added


def _taskset_tools(source_args: Section, given: Any) -> Any:
    """tools: with an entry for each tool of a verifiers taskset's toolsets, but those it already holds (a run's
    recorded recipe lists them); tools: as given when it is not a list (its own line says so)."""
    entries = list(given or []) if isinstance(given, list) or given is None else given
    if not isinstance(entries, list):
        return entries
    for name in verifiers_tasks.tools_of(source_args):
        entry = {"name": verifiers_tasks.TOOL, "args": {**copy.deepcopy(source_args), "tool": name}}
        if entry not in entries:
            entries.append(entry)
    return entries or given


def _reward_name(r: Resolved, fn: Any) -> str:
    """A reward's metric name: its function's, or for a user's factory not built yet how the recipe calls it (a
    verifiers taskset's reward by its own name)."""
    if fn is not None:
        return str(fn.__name__)
    if r.name == verifiers_tasks.REWARD:
        return str(r.args.get("reward"))
    return f"{r.name}({_call_args(r.args)})"


def _check_routes(
    data: Section | None,
    entries: Section,
    owned: bool,
    columns: Columns,
    base_dir: Path,
    eval_enabled: bool,
    problems: list[Problem],
) -> dict[str, set[str]]:
    """Several environments: every row names one in its ``environment`` column, read here for the rows known before
    torch (a file's, a generator's, inline rows'; each source of a mixture's) and again once the rows load (a hub
    dataset's); a recipe whose environments write every prompt has no rows to name them. Returns the names each set
    of rows read here uses (by the rows described, as ``columns`` describes them), problems appended."""
    if data is None or (not columns and not owned):  # the data section's own lines come first
        return {}
    if owned:
        line = (
            "holds several environments, which TRL picks among by each training row's environment column, and data "
            "names no training rows; give rows (data.file) that name their environment"
        )
        problems.append(Problem(agents.ENVIRONMENT, line))
        return {f"the training rows ({ENVIRONMENT_ROWS})": set()}  # no reset checked against them: one line
    names = [name for name in entries if isinstance(name, str)]
    seen: dict[str, set[str]] = {}
    for described, rows, chosen in _known_rows(data, base_dir, eval_enabled):
        if chosen is not None and chosen not in names:  # the source's environment key has its own line
            seen[described] = set()
            continue
        try:
            listed = list(rows)
        except RecipeError as exc:  # a file its own check passed cannot be read whole: its line says where
            problems.extend(exc.found)
            return seen
        fix = ", or give a mixture source an environment: key that names one for its rows" if data.get("mixture") else ""
        refused = agents.check_routes(names, listed, described, fix)
        problems.extend([refused] if refused is not None else [])
        seen[described] = {row[agents.ROUTE] for _, row in listed if isinstance(row.get(agents.ROUTE), str)} & set(names)
    return seen


def _check_source_routes(data: Section | None, entry: Any) -> list[Problem]:
    """A mixture source's ``environment`` names one of several environments (``environment:`` a mapping)."""
    found = []
    for i, source in enumerate((data or {}).get("mixture") or []):
        chosen = source.get("environment") if isinstance(source, dict) else None
        if chosen is None:
            continue
        if not agents.several(entry) or not entry:
            line = "names one of several environments, and environment: holds one or none; leave it out, or map names to them"
            found.append(Problem(("data", "mixture", i, "environment"), line))
        elif chosen not in entry:
            names = ", ".join(str(name) for name in entry)
            found.append(Problem(("data", "mixture", i, "environment"), f"{chosen!r} is not one of the environments ({names})"))
    return found


def _routed(rows: Iterable[tuple[str, dict[str, Any]]], chosen: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A mixture source's rows with the environment column its ``environment`` key sets (as loading sets it)."""
    return ((at, {**row, agents.ROUTE: chosen}) for at, row in rows)


def _numbered(rows: Iterable[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    return ((f"row {i}", row if isinstance(row, dict) else {"prompt": row}) for i, row in enumerate(rows, 1))


def _known_rows(
    d: Section, base_dir: Path, eval_enabled: bool, at: Loc = DATA
) -> Iterator[tuple[str, Iterable[tuple[str, dict[str, Any]]], str | None]]:
    """(the rows described, as validation's other lines describe them; each row with where it is; the environment a
    mixture source's ``environment`` key sets, or None) for every set of rows whose values are known before torch: a
    file's, a generator's, inline prompts'; each source of a mixture's; the eval's own rows when the eval runs."""

    def named(key: str, what: str = "") -> str:
        return f"{where((*at, key))}{f' {what}' if what else ''}"

    for i, source in enumerate(d.get("mixture") or []):
        chosen = source.get("environment")
        for described, rows, _ in _known_rows(mixture.config(d, source), base_dir, eval_enabled, ("data", "mixture", i)):
            yield described, rows if chosen is None else _routed(rows, chosen), chosen
    if d.get("file"):
        path = datafiles.split_path(resolve_path(d["file"], base_dir), d["hub_split"], ("data", "hub_split"))
        yield f"the training rows ({named('file', Path(d['file']).name)})", datafiles.rows(path, ("data", "file")), None
    elif d.get("source"):
        train, held = generators.generated(d["source"], d["source_args"])
        yield f"the training rows ({named('source', d['source'])})", _numbered(train), None
        yield from [(f"the eval rows ({named('source', d['source'])})", _numbered(held), None)] * eval_enabled
    elif d.get("prompts") is not None:
        yield f"the training rows ({named('prompts')})", _numbered(d["prompts"]), None
    if not eval_enabled:
        return
    if d.get("eval_prompts") is not None:
        yield f"the eval rows ({named('eval_prompts')})", _numbered(d["eval_prompts"]), None
    elif d.get("eval_file"):
        path = resolve_path(d["eval_file"], base_dir)
        yield f"the eval rows ({named('eval_file', path.name)})", datafiles.rows(path, ("data", "eval_file")), None


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _all_examples(d: Section) -> list[Any]:
    """The worked examples of the data section and of each mixture source."""
    own = [d.get("examples") or []] + [(e.get("examples") or []) for e in d.get("mixture") or [] if isinstance(e, dict)]
    return [message for turns in own for message in turns]


def _call_args(args: Section) -> str:
    """``n=3, column='answer'``: a factory's arguments as a call shows them."""
    return ", ".join(f"{key}={value!r}" for key, value in args.items())
