"""Prompts → datasets: the rows a recipe's ``data:`` section names, formatted as TRL expects them.

Training rows come from inline prompts, a data file (see ``datafiles`` for the formats), a built-in
generator or a hub dataset; eval rows from ``eval_prompts``, ``eval_file``, ``eval_split``, rows held out
of the training rows (``eval_fraction`` / ``eval_size``, by seed) or the generator's own. Each row has a
``prompt`` (text or chat messages) and any other columns, which reach the rewards as keyword arguments.
Text prompts become chat messages when the tokenizer has a chat template; the recipe's ``system_prompt`` is
put first unless a row's messages already start with a system message, and its worked ``examples`` (chat turns,
tool calls among them) after it.

A mixture (``data.mixture``) loads each source as a recipe of that source alone would, draws its training rows as
``data.mixture`` plans them and shuffles them together; each row names its source in a ``source`` column
and is formatted with its own source's system prompt, so that every source's prompts end in the same form. Its
eval rows are the whole mixture's held-out set (``eval_prompts`` or ``eval_file`` beside the mixture, formatted
with the mixture's system prompt) and each source's own.

Files stay in Arrow (``datasets``, memory-mapped), so a large file is not held twice in memory.
"""

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from grpo_ext import tools  # its modules load when a recipe has an environment (its __init__)
from grpo_ext.core.errors import Loc, Problem, RecipeError, RunError, problem, where
from grpo_ext.core.text import first_line, listing, plural
from grpo_ext.data import datafiles, examples, mixture
from grpo_ext.recipe import Data, held_out_size
from grpo_ext.recipe.agents import ROUTE
from grpo_ext.recipe.files import data_path
from grpo_ext.rewards.guard import missing_columns
from grpo_ext.run import prefix_cache

DATA: Loc = ("data",)


def use_chat(d: Data, tokenizer) -> bool:
    if d.chat == "auto":
        return bool(getattr(tokenizer, "chat_template", None))
    if d.chat and not getattr(tokenizer, "chat_template", None):
        raise RecipeError(Problem(("data", "chat"), "true, but the tokenizer has no chat template; set data.chat: false"))
    return bool(d.chat)


def format_prompt(prompt, system_prompt: str | None, chat: bool, examples: list[dict] | None = None):
    """One prompt in the form TRL expects: a message list for chat, the text otherwise. Chat messages are kept
    as they are; the system prompt goes first unless they start with a system message of their own, and the worked
    ``examples`` (``data.examples.messages``) after it, before the prompt's own turns."""
    if isinstance(prompt, list):
        if not chat:
            raise RecipeError(
                "data: the prompts are chat messages, but the tokenizer has no chat template (or data.chat is false); "
                "give text prompts or a model with a chat template"
            )
        own_system = bool(prompt) and prompt[0].get("role") == "system"
        head = prompt[:1] if own_system else ([{"role": "system", "content": system_prompt}] if system_prompt else [])
        return [*head, *(examples or []), *prompt[int(own_system) :]]
    if not chat:
        if examples:
            raise RecipeError("data.examples: worked examples are chat turns; they need a chat template and data.chat not false")
        return prompt if system_prompt is None else f"{system_prompt}\n\n{prompt}"
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + list(examples or []) + [{"role": "user", "content": prompt}]


def _read(path: Path, loc: Loc):
    """A datasets.Dataset of a data path (one split's folder for a DatasetDict)."""
    from datasets import load_dataset, load_from_disk

    try:
        if datafiles.kind(path) == datafiles.SAVED:
            return load_from_disk(str(path))
        return load_dataset(datafiles.kind(path), data_files=str(path), split="train")
    except Exception as exc:  # datasets wraps the parser's own error
        cause = exc.__cause__ or exc
        raise RecipeError(Problem(loc, f"cannot read {path.name}: {type(cause).__name__}: {first_line(str(cause))}")) from None


def _with_prompt(ds, d: Data, named: str):
    """The rows with their prompt in a ``prompt`` column (renamed, templated, or from the conversation)."""
    rule = datafiles.prompt_rule(ds.column_names, d.prompt_template, d.prompt_column, named)
    how, what = rule
    if how == "column":
        if what == "prompt":
            return ds
        return ds.remove_columns([c for c in ("prompt",) if c in ds.column_names]).rename_column(what, "prompt")
    template = d.prompt_template
    return ds.map(lambda row: {"prompt": datafiles.prompt_of(row, rule, template)}, desc="prompts")


def _hub(d: Data, split: str):
    from datasets import load_dataset

    try:
        return load_dataset(d.hub, d.hub_config, split=split)
    except Exception as exc:
        raise RunError(
            f"data.hub: loading {d.hub!r} split {split!r} failed: {type(exc).__name__}: {first_line(str(exc))}"
        ) from exc


@dataclass
class Rows:
    """A run's rows before formatting: training rows (a datasets.Dataset), eval rows, and what was done to them."""

    train: Any  # a datasets.Dataset; a mixture's rows stay a list of dicts until they are formatted
    eval: list[dict]
    notes: list[str]


def _train(d: Data, base_dir: Path, reward_funcs: list, environment: type | None = None, owned: int = 0, at: Loc = DATA):
    """The training rows as a datasets.Dataset with a ``prompt`` column; without any in the data section (an
    environment whose reset writes each prompt), ``owned`` rows of an empty prompt, as TRL makes without a dataset.
    ``at``: the data section's key path, which names the rows in a problem with their columns."""
    from datasets import Dataset

    if d.file:
        read = _read(data_path(d, base_dir, "file", d.hub_split), ("data", "file"))
        return _with_prompt(read, d, f"data.file {Path(d.file).name}")
    if d.hub:
        named = f"data.hub {d.hub}"
        train = _with_prompt(_hub(d, d.hub_split), d, named)
        _check_columns(reward_funcs, train.column_names, f"the training rows ({where((*at, 'hub'))} {d.hub})", environment)
        return train
    if d.source:
        return Dataset.from_list(d.generated()[0])
    if d.prompts is None:
        return Dataset.from_list([{"prompt": ""}] * owned)
    return Dataset.from_list([{"prompt": p} for p in d.prompts])


def _check_columns(reward_funcs: list, columns: list[str], rows: str, environment: type | None = None) -> None:
    """The columns of rows only loading tells (a hub dataset's) against what the rewards and reset need of them."""
    problems = missing_columns(reward_funcs, columns, rows)
    problems += tools.check_reset(environment, columns, rows, "environment") if environment is not None else []
    if problems:
        raise RecipeError(map(problem, problems))


def has_eval(d: Data) -> bool:
    """Whether the recipe names held-out rows (a source of eval rows, or rows held out of training)."""
    if d.mixture:
        return d.held is not None or any(has_eval(d.alone(source)) for source in d.mixture)
    return d.holds_out or any(value is not None for value in (d.eval_prompts, d.eval_file, d.eval_split, d.source))


def _eval(d: Data, base_dir: Path, reward_funcs: list, environment: type | None = None, at: Loc = DATA) -> list[dict]:
    """The eval rows from their own source (not held out of the training rows)."""
    if d.eval_prompts is not None:
        return [p if isinstance(p, dict) else {"prompt": p} for p in d.eval_prompts]
    if d.eval_file:
        path = data_path(d, base_dir, "eval_file", None)
        return _first(_with_prompt(_read(path, ("data", "eval_file")), d, f"data.eval_file {path.name}"), d.eval_size)
    if d.eval_split:
        named = f"data.eval_split {d.eval_split}"
        if d.file:
            # named as its rows
            read = _read(data_path(d, base_dir, "file", d.eval_split), ("data", f"eval_split {d.eval_split}"))
            return _first(_with_prompt(read, d, named), d.eval_size)
        rows = _first(_with_prompt(_hub(d, d.eval_split), d, named), d.eval_size)
        described = f"the eval rows ({where((*at, 'eval_split'))} {d.eval_split})"
        _check_columns(reward_funcs, list(rows[0]) if rows else ["prompt"], described, environment)
        return rows
    if d.source:
        return d.generated()[1]
    return []


def load(
    d: Data,
    base_dir: Path,
    seed: int,
    reward_funcs: list,
    eval_enabled: bool = True,
    environment: type | None = None,
    owned: int = 0,
    at: Loc = DATA,
) -> Rows:
    """The training and eval rows of a recipe's data section, each with a ``prompt``. Hub rows are checked here for
    the columns the rewards and the ``environment``'s reset need (a file's were checked with the recipe; a mixture's
    hub sources for the rewards' alone), before any model loads. A section naming no training rows (the environment
    writes each prompt) gives ``owned`` rows. ``at``: the section's key path (a mixture's source's), which names its
    rows in a problem with their columns; other problems are at ``data.``, for the caller to move."""
    if d.mixture:
        return _mixture(d, base_dir, seed, reward_funcs, eval_enabled)
    train = _train(d, base_dir, reward_funcs, environment, owned, at)
    if eval_enabled and d.holds_out:
        train, held, note = _hold_out(train, d, seed)
        return Rows(train, held, [note])
    return Rows(train, _eval(d, base_dir, reward_funcs, environment, at) if eval_enabled else [], [])


def is_mixture(d: Data) -> bool:
    """Whether the data section trains on a mixture of sources (``data.mixture``)."""
    return bool(d.mixture)


def _mixture(d: Data, base_dir: Path, seed: int, reward_funcs: list, eval_enabled: bool) -> Rows:
    """A mixture's rows: each source's training and eval rows as a recipe of that source alone would have them,
    the training rows drawn by ``data.mixture`` and shuffled together, every row naming its source. The
    training rows stay a list until they are formatted: sources may hold text and chat prompts side by side."""
    sources = d.sources
    names = [source.label for source in sources]
    parts = []
    for i, source in enumerate(sources):
        try:
            parts.append(load(d.alone(source), base_dir, seed, reward_funcs, eval_enabled, at=("data", "mixture", i)))
        except RecipeError as exc:
            raise RecipeError([mixture.within(p, i) for p in exc.found]) from None
        if len(parts[i].train) == 0:
            raise RecipeError(
                Problem(("data", "mixture", i), f"{names[i]} has no training rows left to draw; give it training rows")
            )
    available: list[int | None] = [len(part.train) for part in parts]
    counts = mixture.plan([s.weight for s in sources], [s.rows for s in sources], available, d.size)
    counted = cast(list[int], counts)  # each source's rows are counted, so the plan gives each a number
    picks = mixture.draw(names, counted, cast(list[int], available), seed)
    if not picks:
        raise RecipeError(Problem(("data", "mixture"), "the weights give no training rows; raise data.size or give sources rows"))
    taken = {}
    for i, part in enumerate(parts):
        rows = [row for source, row in picks if source == i]
        taken[i] = iter(part.train.select(rows).to_list() if rows else [])
    # a source's environment: the column that picks each of its rows' environment, with several environments
    routes = [{ROUTE: source.environment} if source.environment is not None else {} for source in sources]
    train = [{**next(taken[source]), mixture.COLUMN: names[source], **routes[source]} for source, _ in picks]
    whole, shown = d.held, None
    held = []
    if whole is not None and eval_enabled:  # the whole mixture's held-out set, named by its key in the source column
        held = [{**row, mixture.COLUMN: whole[0]} for row in _eval(d, base_dir, reward_funcs)]
        shown = (whole[1], len(held))
    held += [
        {**row, mixture.COLUMN: name, **route}
        for name, part, route in zip(names, parts, routes, strict=True)
        for row in part.eval
    ]
    evals: list[int | None] | None = [len(part.eval) for part in parts] if eval_enabled else None
    line = mixture.describe(names, counts, evals, whole=shown)
    notes = [
        f"data: {line}",
        *mixture.shortfalls(names, [s.weight for s in sources], [s.rows for s in sources], counts, available),
    ]
    return Rows(train, held, notes + mixture.one_kind(train + held))


def mixture_plan(d: Data, base_dir: Path, eval_enabled: bool) -> list[str]:
    """What a mixture would train on, counted without loading anything heavy (a dry run): its line and notes.
    A file's rows are counted by reading it once; a hub dataset's only when it is fetched."""
    sources = d.sources
    names = [source.label for source in sources]
    available, evals = [], []
    for source in sources:
        have, held = _counted(d.alone(source), base_dir, eval_enabled)
        available.append(have)
        evals.append(held)
    weights, fixed = [s.weight for s in sources], [s.rows for s in sources]
    counts = mixture.plan(weights, fixed, available, d.size)
    whole = d.held
    shown = None
    if whole is not None and eval_enabled:
        shown = (whole[1], len(d.eval_prompts) if d.eval_prompts is not None else _first_count(d, base_dir))
    line = mixture.describe(names, counts, evals if eval_enabled else None, weights, whole=shown)
    return [line, *mixture.shortfalls(names, weights, fixed, counts, available)]


def _first_count(d: Data, base_dir: Path) -> int:
    """The rows of ``eval_file`` an eval scores: all of them, or its first ``eval_size``."""
    rows = _count(d, base_dir, "eval_file", None)
    return rows if d.eval_size is None else min(rows, d.eval_size)


def _count(d: Data, base_dir: Path, key: str, split: str | None) -> int:
    return sum(1 for _ in datafiles.rows(data_path(d, base_dir, key, split), ("data", key)))


def _counted(d: Data, base_dir: Path, eval_enabled: bool) -> tuple[int | None, int | None]:
    """(training rows one source gives, its eval rows, 0 without any); None where only loading tells (the hub)."""
    rows: int | None
    if d.file:
        rows = _count(d, base_dir, "file", d.hub_split)
    elif d.source:
        rows = len(d.generated()[0])
    else:
        rows = None if d.hub else len(d.prompts or [])
    if not eval_enabled:
        return rows, None
    if d.holds_out:
        if rows is None:
            return None, None
        held = held_out_size(d.eval_size, d.eval_fraction, rows)[0]
        return rows - held, held
    if d.eval_prompts is not None:
        held = len(d.eval_prompts)
    elif d.eval_file:
        held = _count(d, base_dir, "eval_file", None)
    elif d.eval_split and d.file:
        held = _count(d, base_dir, "file", d.eval_split)
    elif d.eval_split and d.eval_size is not None:  # the first eval_size rows of a hub split
        held = d.eval_size
    elif d.source:
        held = len(d.generated()[1])
    elif d.eval_split:  # a hub split, all of it: counted when fetched
        return rows, None
    else:  # no eval rows of its own: a mixture's source beside the whole mixture's held-out set or others' own
        return rows, 0
    return rows, held if d.eval_size is None or d.eval_prompts is not None else min(held, d.eval_size)


def _first(ds, size: int | None) -> list[dict]:
    return list(ds.select(range(min(size, len(ds)))) if size is not None else ds)


def _hold_out(train, d: Data, seed: int):
    """(training rows, held-out rows, a note): rows held out by seed, never trained on."""
    n = len(train)
    size, key = held_out_size(d.eval_size, d.eval_fraction, n)
    if not 1 <= size < n:
        raise RecipeError(
            Problem(("data", key), f"holds out {size} of {plural(n, 'training row')}; leave at least one row on each side")
        )
    parts = train.train_test_split(test_size=size, seed=seed, shuffle=True)
    note = f"data: held out {size} of {plural(n, 'training row')} for eval (data.{key}, seed {seed}); they are not trained on"
    return parts["train"], list(parts["test"]), note


def formatted(rows: list[dict], d: Data, chat: bool) -> list[dict]:
    """Rows with each prompt put in the form TRL expects (system prompt and chat messages applied); a mixture's
    rows each with the system prompt of its own source."""
    if not d.mixture:
        turns = examples.messages(d.examples)
        return [{**r, "prompt": format_prompt(r["prompt"], d.system_prompt, chat, turns)} for r in rows]
    whole = d.held  # the whole mixture's held-out rows: the mixture's own system prompt and examples
    heads = {whole[0]: (d.system_prompt, examples.messages(d.examples))} if whole else {}
    for source in d.mixture:
        own = d.alone(source)
        heads[source.label] = (own.system_prompt, examples.messages(own.examples))
    out = []
    for r in rows:
        try:
            system, turns = heads[r[mixture.COLUMN]]
            out.append({**r, "prompt": format_prompt(r["prompt"], system, chat, turns)})
        except RecipeError:
            raise RecipeError(
                Problem(
                    ("data", "mixture"),
                    f"the prompts of {r[mixture.COLUMN]} are chat messages, which need a chat template; the tokenizer has "
                    "none (or data.chat is false): give that source text prompts, or a model with a chat template",
                )
            ) from None
    return out


def _one_table(rows: list[dict]):
    """A mixture's formatted training rows as one Dataset: every column any source has (None where a source lacks
    it); ``data.mixture.one_kind`` gave each column one kind when the rows loaded."""
    from datasets import Dataset

    columns = list(dict.fromkeys(key for r in rows for key in r))
    try:
        return Dataset.from_list([{key: r.get(key) for key in columns} for r in rows])
    except (TypeError, ValueError) as exc:  # pyarrow's ArrowInvalid and ArrowTypeError derive from them
        why = first_line(str(exc))
        raise RecipeError(
            Problem(("data", "mixture"), f"the sources' rows (columns {listing(columns)}) make no one table: {why}")
        ) from None


def formatted_set(train, d: Data, chat: bool):
    """The training Dataset with each prompt in the form TRL expects."""
    if isinstance(train, list):  # a mixture's rows: each source's prompts in their own form until here
        return _one_table(formatted(train, d, chat))
    system, turns = d.system_prompt, examples.messages(d.examples)
    if not chat and not system and not turns and (len(train) == 0 or isinstance(train[0]["prompt"], str)):
        return train
    return train.map(lambda row: {"prompt": format_prompt(row["prompt"], system, chat, turns)}, desc="format")


def prompt_ids(prompts, tokenizer, tools: list | None = None) -> list[list[int]]:
    """Token ids of formatted prompts as TRL tokenizes them: chat messages through the chat template with the
    generation prompt (and the ``tools`` it shows the model, whose schemas can be longer than the prompt), text as it
    is, without special tokens added."""
    shown = {"tools": tools} if tools else {}
    texts = [
        tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True, **shown) if isinstance(p, list) else p
        for p in prompts
    ]
    return list(tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else []


def prompt_tokens(prompts, tokenizer, tools: list | None = None) -> list[int]:
    """Token counts of formatted prompts (``prompt_ids``)."""
    return [len(ids) for ids in prompt_ids(prompts, tokenizer, tools)]


def _lengths(train, tokenizer, tools: list | None) -> tuple[list[int], int]:
    """Token counts of the training prompts, and how many tokens every one of them begins with alike (what a batch
    shares at least: ``groups.share_prompt``); a prompt past MAX_PROMPT_CHARS (a hub row: a file's rows were checked
    when read) is refused before the tokenizer sees it."""
    out: list[int] = []
    first: list[int] = []  # the first prompt's ids: every batch is compared with it, so the minimum is the whole's
    shared = None
    for batch in train.iter(batch_size=512):
        for i, prompt in enumerate(batch["prompt"]):
            too_long = datafiles.oversized(prompt)
            if too_long:
                raise RecipeError(Problem(DATA, f"training prompt {len(out) + i + 1}: {too_long}"))
        ids = prompt_ids(batch["prompt"], tokenizer, tools)
        out += [len(row) for row in ids]
        first = first or (ids[0] if ids else [])
        here = prefix_cache.shared_length([first, *ids])
        shared = here if shared is None else min(shared, here)
    return out, shared or 0


def context_of(config) -> int | None:
    """The most tokens (prompt and completion together) a model takes, from its config; None where it does not say."""
    for key in ("max_position_embeddings", "n_positions"):  # the second: GPT-2's name
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def _check_context(lengths: list[int], context: int | None, completion: int) -> None:
    """RecipeError, with the numbers, when a kept training prompt and ``completion`` tokens exceed the model's context:
    generation past it fails or stalls at the first step."""
    if context is None or not lengths or max(lengths) + completion <= context:
        return
    if completion >= context:
        raise RecipeError(
            f"training.max_completion_length: {completion} tokens leave no room for a prompt in the model's context of "
            f"{context} tokens (max_position_embeddings); lower it"
        )
    room, over = context - completion, sum(n > context - completion for n in lengths)
    raise RecipeError(
        f"data: {over} of {plural(len(lengths), 'training prompt')} are longer than the {room} tokens that "
        f"max_completion_length {completion} leaves of the model's context of {context} (longest {max(lengths)}); "
        f"set training.max_prompt_length: {room} to drop them, or lower training.max_completion_length"
    )


def fit_prompts(
    train,
    eval_rows: list[dict],
    limit: int | None,
    tokenizer,
    context: int | None = None,
    completion: int = 0,
    tools: list | None = None,
) -> tuple[Any, list[dict], int, list[str], int]:
    """Apply ``max_prompt_length`` the same way on every TRL: drop the rows whose formatted prompt (with the
    ``tools`` shown) is longer than ``limit`` tokens (a prompt is never cut), then refuse a kept prompt that, with
    ``completion`` tokens, exceeds the model's ``context``. Returns (train, eval rows, the longest kept prompt,
    notes with the prompt-length statistics and what was dropped, how many tokens every training prompt begins with
    alike)."""
    lengths, shared = _lengths(train, tokenizer, tools)
    notes = []
    if lengths:
        alike = f"; the first {shared} alike in every one" if shared >= prefix_cache.MIN_SHARED else ""
        notes.append(
            f"prompt tokens: min {min(lengths)}, median {statistics.median(lengths):g}, max {max(lengths)} "
            f"over {plural(len(lengths), 'training prompt')}{alike}"
        )
    if limit is not None:
        keep = [i for i, n in enumerate(lengths) if n <= limit]
        if not keep:
            raise RecipeError(
                f"training.max_prompt_length: every training prompt is longer than {limit} tokens (shortest "
                f"{min(lengths)}); raise it or shorten the prompts"
            )
        if len(keep) < len(lengths):
            notes.append(
                f"max_prompt_length {limit}: dropped {len(lengths) - len(keep)} of {plural(len(lengths), 'training prompt')} "
                f"longer than {limit} tokens (longest {max(lengths)}); prompts are never cut"
            )
            train = train.select(keep)
            lengths = [lengths[i] for i in keep]
        eval_lengths = prompt_tokens([r["prompt"] for r in eval_rows], tokenizer, tools)
        kept = [r for r, n in zip(eval_rows, eval_lengths, strict=True) if n <= limit]
        if len(kept) < len(eval_rows):
            notes.append(f"max_prompt_length {limit}: dropped {len(eval_rows) - len(kept)} of {len(eval_rows)} eval prompts")
            if not kept:
                raise RecipeError(f"training.max_prompt_length: every eval prompt is longer than {limit} tokens; raise it")
            eval_rows = kept
    _check_context(lengths, context, completion)
    return train, eval_rows, max(lengths, default=0), notes, shared


def train_rows(d: Data, base_dir: Path, limit: int | None = None) -> list[dict]:
    """Up to ``limit`` training rows as plain dicts (for planning, and for an eval of a recipe without eval rows)."""
    if d.mixture:
        return load(d, base_dir, 0, []).train[:limit]
    return _first(_train(d, base_dir, [], owned=1), limit)  # an environment's empty prompt: what its prompts add to


def eval_rows(d: Data, base_dir: Path, seed: int = 0) -> list[dict]:
    """The held-out rows scored before and after training (none when the recipe has none)."""
    return load(d, base_dir, seed, []).eval if d.holds_out or d.mixture else _eval(d, base_dir, [])
