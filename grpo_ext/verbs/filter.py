"""The ``filter`` verb: keep the training prompts a model neither always nor never solves.

    grpo-ext filter RECIPE [--model RUN_OR_MODEL] [--k 8] [--keep 0.1:0.9] [--reward NAME] [--out FILE] [key=value ...]

    grpo_ext.filter_rows("recipes/arith.yaml", k=8, keep="0.1:0.9")

GRPO learns from a prompt only when the completions of its group score differently: a prompt the model solves
every time, or never, gives each completion the same advantage, zero, and no gradient. So each training row
(the rows training would see: none held out for eval) is sampled ``k`` times, as training samples it (its
temperature, ``max_completion_length`` and ``generation_kwargs``), by the recipe's model or ``--model`` (a
catalog alias, a path, or a run directory, whose ``final/`` is loaded as ``grpo-ext eval`` loads it). One
reward scores the samples (``--reward``, default the recipe's first; the other rewards are not called), and a
row's pass rate is the share of its judged samples that pass, as an eval counts them (a score of at least the
reward's ``pass_threshold``, else ``eval.pass_threshold``).

The rows whose pass rate lies in ``keep`` (both ends included) go to ``--out``, JSON Lines, each with the
columns of its source and a ``pass_rate`` column; a histogram of the pass rates is printed and drawn beside it
(``NAME.png``). Either file already there stops the command before a model loads, unless ``--force``. Each row
scored is appended to ``NAME.progress.jsonl`` as it is done, so an interrupted filter run again with the same
settings scores only the rows left; the file goes once the output is written.
"""

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grpo_ext.core import catalog, console
from grpo_ext.core.errors import Problem, RecipeError
from grpo_ext.core.files import exists, refuse_to_replace, resolve_path, user_path, write_atomic
from grpo_ext.core.text import plural, suggest
from grpo_ext.data import datafiles
from grpo_ext.recipe import Data, Recipe, absolute_path, add_recipe_arguments, load
from grpo_ext.recipe.files import check_recipe_files
from grpo_ext.results import plots, scoring
from grpo_ext.run import chat_tools, data, hardware, models, rollouts, sampling, shares
from grpo_ext.settings.limits import MAX_BATCH
from grpo_ext.verbs import evaluate

K = 8
KEEP = (0.1, 0.9)
SUFFIX = ".filtered.jsonl"
GRID_UP_TO = 20  # up to this k, one histogram bar per possible pass rate (j of k); above it, tenths
BAR_WIDTH = 40  # characters of the longest printed bar


def parse_keep(text: str | tuple | list) -> tuple[float, float]:
    """``"0.1:0.9"`` (or a pair) as (low, high), with 0 <= low <= high <= 1; RecipeError otherwise.

    >>> parse_keep("0.25:1")
    (0.25, 1.0)
    """
    parts = text.split(":") if isinstance(text, str) else list(text)
    try:
        low, high = (float(p) for p in parts)
    except (TypeError, ValueError):
        low = high = math.nan
    if not 0 <= low <= high <= 1:  # also false for nan
        shown = text if isinstance(text, str) else ":".join(map(str, parts))
        raise RecipeError(f"--keep {shown}: give LOW:HIGH with 0 <= LOW <= HIGH <= 1, e.g. --keep 0.1:0.9")
    return low, high


def _data_path(d: Data, base_dir: Path) -> Path | None:
    """The training file (or save_to_disk folder) the recipe reads, or None for other sources."""
    if not d.file:
        return None
    return datafiles.split_path(resolve_path(d.file, base_dir), d.hub_split, ("data", "file"))


def default_out(recipe: Recipe) -> Path:
    """``NAME.filtered.jsonl`` beside the recipe's data file, else in the current directory after the recipe."""
    source = _data_path(recipe.data, recipe.base_dir)
    if source is not None:
        name = source.name if source.is_dir() else source.stem
        return source.parent / f"{name}{SUFFIX}"
    return Path.cwd() / f"{recipe.path.stem if recipe.path else 'recipe'}{SUFFIX}"


def progress_file(out: Path) -> Path:
    return out.with_name(f"{out.name.removesuffix('.jsonl')}.progress.jsonl")


def histogram_file(out: Path) -> Path:
    return out.with_name(f"{out.name.removesuffix('.jsonl')}.png")


def _check_out(out: Path, source: Path | None, force: bool) -> None:
    if exists(out, "dir"):
        raise RecipeError(f"--out: {out} is a folder; give a file name, e.g. --out {out / ('rows' + SUFFIX)}")
    if out.suffix.lower() != ".jsonl":
        raise RecipeError(f"--out: {out.name}: the kept rows are written as JSON Lines; give a name ending in .jsonl")
    if not exists(out.parent, "dir"):
        raise RecipeError(f"--out: folder {out.parent} does not exist; create it or give another path")
    if source is not None and out.resolve() == source.resolve():
        raise RecipeError(f"--out: {out} is the recipe's data file; give another name, e.g. --out {out.stem}{SUFFIX}")
    refuse_to_replace([out, histogram_file(out)], force, command="filter")


def _reward(recipe: Recipe, name: str | None) -> str:
    """The name of the reward whose pass rate decides, checked against the recipe's rewards and its environment's
    ``get_reward`` (named by its class, as TRL logs it); no reward is built."""
    names = [*recipe.reward_names, *_environment_reward(recipe)]
    if name is None:
        return names[0]
    if name not in names:
        hint = suggest(name, names, "; its rewards: " + ", ".join(names))
        raise RecipeError(f"--reward {name}: the recipe has no such reward{hint}")
    return name


def _environment_reward(recipe: Recipe) -> list[str]:
    return [env.__name__ for env in recipe.environment_types if callable(getattr(env, "get_reward", None))]


def _sampling(recipe: Recipe, k: int) -> sampling.Settings:
    """The eval's settings (seed, batch size, precision, threshold) sampling ``k`` per prompt as training samples."""
    return sampling.as_training(sampling.settings(recipe, bf16=hardware.uses_bf16(recipe)), recipe.training, k)


def as_written(train_set, d: Data, base_dir: Path):
    """The training rows under the columns their source gave them, so that the recipe reads the filtered file as it
    read the original: a prompt taken from another column goes back under its name, and a prompt the recipe
    built (``prompt_template``, or a conversation without its last turn) is left out."""
    source = _data_path(d, base_dir)
    if source is not None:
        columns = datafiles.columns(source, ("data", "file"))
        how, what = datafiles.prompt_rule(columns, d.prompt_template, d.prompt_column, "data.file")
        derived = how != "column" and "prompt" not in columns
    elif d.hub:
        how, what = ("template", None) if d.prompt_template else ("column", d.prompt_column)
        derived = how == "template"
    else:
        return train_set
    if how == "column" and what != "prompt":
        return train_set.rename_column("prompt", what)
    return train_set.remove_columns(["prompt"]) if derived else train_set


def read_progress(path: Path, key: dict) -> dict[int, tuple[int, int]]:
    """Row index -> (passed, judged) from an earlier run's progress file; {} when there is none. A last line cut
    short by a kill is dropped (the file is rewritten without it, so that appends start on a line of their own);
    RecipeError when the file was written with other settings or rows."""
    if not exists(path, "file"):
        return {}
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        lines = lines[:-1]
        write_atomic(path, "".join(line + "\n" for line in lines))
    try:
        recorded = json.loads(lines[0])["settings"] if lines else None
        done = {int(r["row"]): (int(r["passed"]), int(r["judged"])) for r in map(json.loads, lines[1:])}
    except (ValueError, KeyError, TypeError):
        raise RecipeError(f"{path}: not a progress file this command can read; delete it to start over") from None
    if recorded is None:
        return {}
    if recorded != key:
        differ = ", ".join(k for k in sorted(set(key) | set(recorded)) if key.get(k) != recorded.get(k))
        raise RecipeError(
            f"{path}: an earlier filter with other settings or rows ({differ}); run it with the same ones to resume, "
            f"or delete the file to start over"
        )
    return done


class _Append:
    """The progress file, opened for appending: one whole line per write, flushed to disk before the next row."""

    def __init__(self, path: Path, key: dict):
        fresh = not exists(path, "file") or path.stat().st_size == 0
        self.fh = open(path, "a", encoding="utf-8")  # held open across the rows; close() closes it
        if fresh:
            self.line({"settings": key})

    def line(self, record: dict) -> None:
        self.fh.write(json.dumps(record) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.fh.close()


class _Bar:
    """Rows done of the total with an ETA: a rich bar on a terminal, else a line at each tenth of the rows."""

    def __init__(self, total: int, done: int, log):
        self.total, self.log, self.bar = total, log, None
        self.started, self.first, self.shown = time.monotonic(), done, done * 10 // max(total, 1)
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn("filter"), MofNCompleteColumn(), TextColumn("rows"), BarColumn(), TextColumn("eta"))
            self.bar = Progress(*columns, TimeRemainingColumn(), console=Console(stderr=True))
            self.task = self.bar.add_task("filter", total=total, completed=done)  # a resume starts part-way
            self.bar.start()

    def update(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)
            return
        if done * 10 // self.total > self.shown or done == self.total:
            self.shown = done * 10 // self.total
            per_row = (time.monotonic() - self.started) / max(done - self.first, 1)
            self.log(f"filter: {done}/{self.total} rows, about {per_row * (self.total - done):.0f} s left")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def score_rows(
    model, tokenizer, rows: list[dict], todo: list[int], fn, s: sampling.Settings, *, chat: bool, record, bar, sampler=None
):
    """Sample and score the rows ``todo`` (indices into ``rows``), a generation batch at a time; ``record(i, passed,
    judged)`` is called for each row as its batch is done. A batch is seeded by its first row's index, so a row's
    samples do not depend on how many rows an earlier run scored. With ``sampler`` (a recipe with tools or an
    environment) each sample is a conversation played through its tool loop and its scores are read off TRL's
    reward call; ``fn`` may then be the name of the environment's reward."""
    own = None if isinstance(fn, str) else fn.info.pass_threshold  # a guarded reward's, the recipe's over its own
    threshold = s.pass_threshold if own is None else own
    per_batch = shares.per_batch(len(todo), s.batch_size, s.samples)
    done = len(rows) - len(todo)
    with sampling.random_state_kept(), sampling.precision(model, s) if sampler is None else contextlib.nullcontext():
        for start in range(0, len(todo), per_batch):
            batch = todo[start : start + per_batch]
            chunk = [rows[i] for i in batch]
            seeded = dataclasses.replace(s, seed=s.seed + batch[0])
            if sampler is not None:
                played = sampling.play(sampler, chunk, seeded)
                scores = played.scores[fn if isinstance(fn, str) else fn.__name__]  # by the name TRL logs it
            else:
                completions, ids = sampling.sample(model, tokenizer, [r["prompt"] for r in chunk], seeded)
                prompts, flat, extra = scoring.reward_inputs(chunk, completions, chat=chat, completion_ids=ids)
                scores = fn(prompts=prompts, completions=flat, **extra)
            for j, i in enumerate(batch):
                own = [x for x in scores[j * s.samples : (j + 1) * s.samples] if x is not None]
                record(i, sum(x >= threshold for x in own), len(own))
            done += len(batch)
            bar.update(done)


def histogram(rates: list[float | None], kept: list[bool], k: int) -> list[dict]:
    """Bars of the pass rates: (label, rows, rows kept) for each possible rate j/k up to GRID_UP_TO samples, else for
    0, each tenth between, and 1. Rows no sample of which was judged are left out.

    >>> [(b["label"], b["rows"], b["kept"]) for b in histogram([0.0, 0.5, 0.5, 1.0], [False, True, True, False], 2)]
    [('0/2', 1, 0), ('1/2', 2, 2), ('2/2', 1, 0)]
    """
    if k <= GRID_UP_TO:
        labels = [f"{j}/{k}" for j in range(k + 1)]
    else:
        labels = ["0"] + [f"({j / 10:g}, {(j + 1) / 10:g}{')' if j == 9 else ']'}" for j in range(10)] + ["1"]
    bars: list[dict[str, Any]] = [{"label": label, "rows": 0, "kept": 0} for label in labels]
    for rate, keep in zip(rates, kept, strict=True):
        if rate is not None:
            bars[_bar_of(rate, k)]["rows"] += 1
            bars[_bar_of(rate, k)]["kept"] += keep
    return bars


def _bar_of(rate: float, k: int) -> int:
    if k <= GRID_UP_TO:
        return round(rate * k)  # a rate over fewer judged samples goes to the nearest j/k
    return 0 if rate == 0 else 11 if rate == 1 else min(10, math.ceil(rate * 10))


def histogram_lines(bars: list[dict], reward: str, k: int) -> list[str]:
    top = max((b["rows"] for b in bars), default=0) or 1
    width = max(len(b["label"]) for b in bars)
    lines = [f"pass rate of {reward} ({k} samples a row): rows, and how many are kept"]
    for b in bars:
        shown = "#" * math.ceil(b["rows"] * BAR_WIDTH / top) if b["rows"] else ""
        kept = f"  {b['kept']} kept" if b["kept"] else ""
        lines.append(f"  {b['label']:>{width}}  {shown:<{BAR_WIDTH}}  {b['rows']:>5}{kept}")
    return lines


def _relative(path: Path, base: Path) -> str:
    """``path`` as a recipe in ``base`` names it: relative to the recipe's folder when inside it."""
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def usage_lines(recipe: Recipe, out: Path) -> list[str]:
    """How the recipe reads the filtered file: as its data.file, in place of the source it names now."""
    d, where, named = recipe.data, recipe.path or "the recipe", _relative(out, recipe.base_dir)
    shipped = {path.resolve(): name for name, path in catalog.shipped_recipes().items()}
    if recipe.path and recipe.path.resolve() in shipped:  # the package's own copy is not the one to edit
        where, named = f"a copy (grpo-ext cp {shipped[recipe.path.resolve()]} my.yaml)", str(out.resolve())
    line = f"use it: in {where}, data: {{file: {named}}}"
    if d.file:
        lines = [f"{line} (the other data: keys as they are), or run with the override data.file={out.resolve()}"]
    else:
        named_by = {"mixture": d.mixture, "source": d.source, "hub": d.hub}
        now = next((k for k, value in named_by.items() if value), "prompts")
        lines = [f"{line} in place of data.{now} (a recipe keeps one source of training rows)"]
        if now == "source" and d.eval_prompts is None and not d.eval_file:
            lines.append("note: the generator's held-out rows go with data.source; give data.eval_file or data.eval_fraction")
    if d.holds_out and recipe.eval.enabled:
        lines.append(
            "note: the rows held out for eval were not scored and are not in the file; the recipe's hold-out then "
            "holds rows out of the kept ones"
        )
    return lines


def _training_rows(recipe: Recipe):
    """The rows training would see (a datasets.Dataset); RecipeError when there are none."""
    try:
        rows = data.load(recipe.data, recipe.base_dir, recipe.seed, recipe.reward_funcs, recipe.eval.enabled)
    except RecipeError as exc:  # what only loading tells (a hub dataset's rows), named as every recipe error is
        raise RecipeError(exc.found, str(recipe.path) if recipe.path else None) from None
    if len(rows.train) == 0:
        raise RecipeError(
            Problem(("data",), "the recipe has no training rows to filter; give data.file, data.prompts or data.source rows")
        )
    return rows.train


def _key(recipe: Recipe, model: str | None, reward: str, s: sampling.Settings, prompts: list) -> dict:
    """What a progress file must match to be resumed: model, reward, sampling, and the rows (a hash of their prompts)."""
    where = user_path(model) if model else None
    named = (
        str(where.resolve())
        if where and exists(where)
        else model or absolute_path(["model", "name"], recipe.model.name, recipe.base_dir)
    )
    digest = hashlib.sha256(json.dumps(prompts, sort_keys=True, default=str).encode()).hexdigest()[:16]
    sampling = {f: getattr(s, f) for f in ("samples", "temperature", "max_new_tokens", "seed", "pass_threshold", "bf16")}
    generation = [list(pair) for pair in s.generation]
    return {"model": named, "reward": reward, **sampling, "generation": generation, "rows": len(prompts), "prompts": digest}


def _score_remaining(
    recipe: Recipe, model: str | None, fn, s: sampling.Settings, raw: list[dict], results: dict, progress, key, log
):
    """Load the model, then sample and score each row not in ``results``, adding it there and to the progress file."""
    todo = [i for i in range(len(raw)) if i not in results]
    loaded, tokenizer, _ = (
        evaluate.load_model(model, recipe.model, log) if model else models.load(recipe.model, recipe.base_dir, log)
    )
    chat_tools.apply(tokenizer, recipe, log)
    chat = data.use_chat(recipe.data, tokenizer)
    log(
        f"filter: {plural(len(todo), 'row')} x {s.samples} samples, temperature {s.temperature}, "
        f"up to {plural(s.max_new_tokens, 'token')} each"
    )
    appended, bar = _Append(progress, key), _Bar(len(raw), len(raw) - len(todo), log)

    def record(i: int, passed: int, judged: int) -> None:
        results[i] = (passed, judged)
        appended.line({"row": i, "passed": passed, "judged": judged})

    try:
        rows = data.formatted(raw, recipe.data, chat)
        if recipe.agentic:
            with tempfile.TemporaryDirectory(prefix="grpo_ext_filter_") as scratch:
                sampler = rollouts.sampler(recipe, loaded, tokenizer, rows, scratch)
                score_rows(loaded, tokenizer, rows, todo, fn, s, chat=chat, record=record, bar=bar, sampler=sampler)
        else:
            score_rows(loaded, tokenizer, rows, todo, fn, s, chat=chat, record=record, bar=bar)
    except KeyboardInterrupt:
        bar.stop()
        log(f"filter: stopped at {len(results)} of {plural(len(raw), 'row')}, kept in {progress}; run it again to go on")
        raise
    finally:
        bar.stop()
        appended.close()


def filter_rows(
    recipe: str | Path | Recipe,
    overrides: list[str] | tuple = (),
    *,
    model: str | None = None,
    k: int = K,
    keep: str | tuple[float, float] = KEEP,
    out: str | Path | None = None,
    reward: str | None = None,
    force: bool = False,
    verbose: bool = False,
    log=console.say,
) -> dict:
    """Sample each training row of the recipe ``k`` times with its model (or ``model``: an alias, a path or a run
    directory), score the samples with the reward ``reward`` (default: the recipe's first), and write the rows
    whose pass rate lies in ``keep`` (``"LOW:HIGH"`` or a pair, both ends included) to ``out`` (JSON Lines, with a
    ``pass_rate`` column; default ``NAME.filtered.jsonl`` beside the recipe's data file, else in the current
    directory), and the histogram of pass rates beside it (PNG); either file already there is replaced only with
    ``force``. Resumes from ``out``'s progress file. Every input is checked before a model loads (RecipeError).
    Returns the summary: counts, seconds, the output files, ``pass_rates`` (one per training row; None where no
    sample was judged) and the histogram's bars."""
    started = time.monotonic()
    low, high = parse_keep(keep)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise RecipeError(f"--k {k}: sample each prompt at least once; give a whole number, e.g. --k {K}")
    if k > MAX_BATCH:  # the samples of one prompt are generated at once
        raise RecipeError(f"--k {k}: must be at most {MAX_BATCH} samples a prompt, e.g. --k {K}")
    recipe = recipe if isinstance(recipe, Recipe) else load(str(recipe), list(overrides))
    reward = _reward(recipe, reward)
    dest = user_path(out) if out else default_out(recipe)
    _check_out(dest, _data_path(recipe.data, recipe.base_dir), force)
    check_recipe_files(recipe)  # every row of a local data file, before anything heavy is imported
    console.quiet_third_parties(verbose)
    train_set = _training_rows(recipe)
    funcs = dict(zip(recipe.reward_names, recipe.reward_funcs, strict=True))  # a factory that refuses its args: here
    fn = funcs.get(reward, reward)  # the environment's reward is only a name: TRL calls its get_reward
    s = _sampling(recipe, k)
    raw = list(train_set)
    key = _key(recipe, model, reward, s, [r["prompt"] for r in raw])
    progress = progress_file(dest)
    results = read_progress(progress, key)
    reused = len(results)
    if reused:
        log(f"filter: resuming from {progress}: {reused} of {plural(len(raw), 'row')} already scored")
    if reused < len(raw):
        _score_remaining(recipe, model, fn, s, raw, results, progress, key, log)

    rates = [results[i][0] / results[i][1] if results[i][1] else None for i in range(len(raw))]
    kept = [r is not None and low <= r <= high for r in rates]
    written = as_written(train_set, recipe.data, recipe.base_dir)
    lines = [
        json.dumps({**row, "pass_rate": round(rate, 4)}, ensure_ascii=False, default=str) + "\n"
        for row, rate, keep_it in zip(written, rates, kept, strict=True)
        if keep_it
    ]
    write_atomic(dest, "".join(lines))
    bars = histogram(rates, kept, k)
    png = plots.draw_pass_rates(bars, histogram_file(dest), (low, high), f"{dest.name}: pass rate of {reward}, {k} samples a row")
    progress.unlink(missing_ok=True)
    summary = {
        "out": str(dest),
        "histogram": str(png),
        "rows": len(raw),
        "scored": len(raw) - reused,
        "reused": reused,
        "kept": len(lines),
        "unjudged": sum(r is None for r in rates),
        "keep": [low, high],
        "k": k,
        "reward": reward,
        "seconds": round(time.monotonic() - started, 1),
        "pass_rates": rates,
        "bars": bars,
    }
    print("\n".join(histogram_lines(bars, reward, k) + [summary_line(summary)]))
    print(f"wrote {dest} ({plural(len(lines), 'row')}) and {png.name}")
    if lines:
        print("\n".join(usage_lines(recipe, dest)))
    else:  # an empty data file is refused by every recipe
        print("no row kept: widen --keep (the histogram shows where the pass rates lie), or filter with another --model")
    return summary


def summary_line(summary: dict) -> str:
    """``filter: 24 rows scored, 10 kept (42%) with a pass rate in [0.1, 0.9], 31.5 s``."""
    earlier = f" ({summary['reused']} from the progress file)" if summary["reused"] else ""
    none = f"; {summary['unjudged']} with no sample judged, left out" if summary["unjudged"] else ""
    low, high = summary["keep"]
    return (
        f"filter: {plural(summary['rows'], 'row')} scored{earlier}, {summary['kept']} kept "
        f"({summary['kept'] / summary['rows']:.0%}) with a pass rate in [{low:g}, {high:g}]{none}, {summary['seconds']} s"
    )


def cmd_filter(args) -> None:
    filter_rows(
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


def add_parser(subparsers) -> None:
    """``grpo-ext filter RECIPE [--model M] [--k 8] [--keep 0.1:0.9] [--reward NAME] [--out FILE [--force]]``."""
    p = subparsers.add_parser(
        "filter",
        help="sample each training prompt k times; keep the rows whose pass rate is in --keep (neither always nor never solved)",
    )
    add_recipe_arguments(p, "section.key=value overrides, e.g. data.source_args.train=64")
    p.add_argument("--model", help="catalog alias, hub id, local path or run directory (default: the recipe's model.name)")
    p.add_argument("--k", type=int, default=K, help=f"samples per prompt (default {K})")
    low, high = KEEP
    p.add_argument(
        "--keep", default=f"{low}:{high}", metavar="LOW:HIGH", help=f"pass rates kept, both ends included (default {low}:{high})"
    )
    p.add_argument("--reward", help="the reward whose pass rate decides (default: the recipe's first)")
    p.add_argument(
        "--out",
        help=f"the JSONL file of kept rows (default: NAME{SUFFIX} beside the data file, or here); the histogram "
        "goes beside it as NAME.png, and NAME.progress.jsonl while it runs",
    )
    p.add_argument("--force", action="store_true", help="replace the --out file and its .png if they exist")
    p.add_argument("--verbose", action="store_true", help="show third-party warnings and logs")
    p.set_defaults(fn=cmd_filter)
