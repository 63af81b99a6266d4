"""Diagnose a run directory, or the environment: the ``doctor`` verb.

    grpo-ext doctor runs/digit              # the run's health: pre-flight verdicts and watchdog findings, with remedies
    grpo-ext doctor runs/digit --samples 3  # and the last 3 completions it logged, with their rewards and advantage
    grpo-ext doctor --env                   # versions, devices and cache for a bug report; known-bad combinations

A run directory is read as it is (finished, failed, stopped or killed, from any supported TRL version): the
watchdog is replayed over ``metrics.jsonl`` with the run's own ``health`` thresholds, so the doctor names
what the run printed while it trained. A summary still ``running`` whose lock no live process holds is a
killed run. A damaged file (cut short, not a mapping, not text) is named in a note and read as empty, except
``summary.json``: without it how the run ended is unknown, and the verdict says so (exit 1, never healthy).
``diagnose`` returns the lines and whether the run is healthy; ``samples`` reads ``completions.jsonl`` (a line
cut short, or one that is not a completion, is skipped and counted) and ``show_samples`` prints what it read.
"""

import importlib.metadata
import json
import os
import platform
from pathlib import Path

import yaml

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import plural, shown
from grpo_ext.core.values import kind_of
from grpo_ext.core.yaml_io import load_yaml
from grpo_ext.recipe import load
from grpo_ext.results import watchdog
from grpo_ext.run import completions, hardware, rundir
from grpo_ext.settings import model_names

PACKAGES = ("grpo_ext", "trl", "transformers", "torch", "peft", "accelerate", "bitsandbytes", "vllm", "deepspeed", "datasets")
UNHEALTHY_STATUS = ("failed", "stopped_unhealthy", "killed")
SAMPLES = 5  # completions that --samples shows without a count: one group of a small recipe, a screen's worth
PROMPT_SHOWN = 300  # characters of a prompt shown, from its end (where the question is, after a system prompt)
COMPLETION_SHOWN = 2000  # characters of a completion shown


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_mapping(path: Path, parse) -> tuple[dict, str | None]:
    """(the mapping a run file holds, ``parse`` reading its text, or {}; what is wrong with the file, or None when it
    is missing or sound)."""
    if not path.is_file():
        return {}, None
    try:
        value = parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as exc:  # a cut-short JSON or YAML file, or bytes that are not UTF-8
        return {}, f"{path.name} is damaged ({type(exc).__name__})"
    if not isinstance(value, dict) and value is not None:
        return {}, f"{path.name} holds a {kind_of(value)}, not a mapping"
    return _mapping(value), None


def _no_status(path: Path, summary: dict, damage: str | None) -> str | None:
    """Why how the run ended cannot be read from its summary (``path``, read as ``summary``), or None. A run writes
    the file, its status in it, before its first step, so a run directory without one is damaged."""
    if damage or not path.is_file():
        return damage or f"{path.name} is missing"
    status = summary.get("status")
    if status is None:
        return f"{path.name} records no status"
    if not isinstance(status, str):
        return f"{path.name} records a status that is a {kind_of(status)}, not a word"
    return None


def _run_alive(run_dir: Path) -> bool | None:
    """Whether the process named in the run's lock file (its pid) is alive: False without a lock file (a run
    removes it when it ends) or when that pid is gone, None when the file holds no pid. Reads only the pid, so
    it answers for any lock that keeps its holder's pid in ``RUN/.lock``."""
    try:
        text = (run_dir / rundir.LOCK).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False
    except OSError:
        return None
    pid = text.strip()
    if not pid.isdigit() or int(pid) <= 0:  # empty while a new holder writes it, or not a lock that names its pid
        return None
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    except OverflowError:
        return False
    return True


def _pass_marks(summary: dict, recipe: dict) -> tuple[dict[str, float], float]:
    """Each reward's pass mark as the run's eval recorded it, and the recipe's default."""
    default = _mapping(recipe.get("eval")).get("pass_threshold")
    scored = _mapping(_mapping(summary.get("eval_before") or summary.get("eval_after")).get("rewards"))
    marks = {name: _mapping(r).get("pass_threshold") for name, r in scored.items()}
    return {name: mark for name, mark in marks.items() if _number(mark)}, default if _number(default) else 1.0


def _findings(entries, notes: list[str], where: str) -> list[watchdog.Finding]:
    """Findings recorded in a run file; an entry that is not one is left out, and said so once."""
    found = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            found.append(watchdog.Finding(**entry))
        except TypeError:
            continue
    if isinstance(entries, list) and len(found) < len(entries):
        notes.append(f"note: {where} holds {len(entries) - len(found)} damaged findings; left out")
    return found


def _dropped(records: list[dict], preflight: dict, recipe: dict) -> list[str]:
    """A line counting the tool results TRL dropped in training (``tools/dropped_results``) and in the pre-flight,
    with the remedy, whether or not a rule fired on them; none where none was dropped."""
    trained = sum(r["tools/dropped_results"] for r in records if _number(r.get("tools/dropped_results")))
    before = _mapping(preflight.get("tools")).get("dropped")
    before = before if _number(before) else 0
    if not trained and not before:
        return []
    budget = _mapping(recipe.get("training")).get("max_completion_length")
    where = ", ".join(
        part
        for part in (f"{trained:g} in training" if trained else "", f"{before:g} in the pre-flight" if before else "")
        if part
    )
    return [
        f"tools: {watchdog.dropped_line(trained + before, budget if _number(budget) else None)} ({where}); "
        f"remedy: {watchdog.RESULTS_DROPPED_REMEDY}"
    ]


def diagnose(run_dir: str | Path) -> tuple[list[str], bool]:
    """(lines to print, healthy) for a run directory."""
    run_dir = Path(run_dir)
    notes: list[str] = []
    summary_file, metrics = run_dir / "summary.json", run_dir / "metrics.jsonl"
    if not summary_file.is_file() and not metrics.is_file():
        raise RecipeError(
            f"doctor: {run_dir} holds no summary.json or metrics.jsonl; give a run directory (a recipe's output_dir)"
        )
    summary, damage = _read_mapping(summary_file, json.loads)
    unreadable = _no_status(summary_file, summary, damage)
    recipe, recipe_damage = _read_mapping(run_dir / "recipe.yaml", load_yaml)
    if recipe_damage:
        notes.append(f"note: {recipe_damage}; read as empty")
    try:
        records = rundir.read_metrics(metrics)
    except (OSError, ValueError):  # not UTF-8 text
        notes.append(f"note: {metrics.name} is damaged (not text); no step read")
        records = []
    marks, default = _pass_marks(summary, recipe)
    dog = watchdog.Watchdog(watchdog.limits_of(_mapping(recipe.get("health"))), marks, default)
    for record in records:
        dog.update(record)
    status = summary["status"] if not unreadable else "unknown"
    alive = _run_alive(run_dir) if status == "running" else None
    if status == "running" and alive is False:
        status = "killed"
    trl = _mapping(summary.get("versions")).get("trl", "?")
    shown = {
        "running": "running" if alive else "running, or killed (the summary was not closed)",
        "killed": "killed (summary.json says running, and no live process holds the run's lock)",
    }.get(status, status)
    lines = [f"run {run_dir}: {shown}; {len(records)} steps logged; trl {trl}", *notes]
    if summary.get("error"):
        lines.append(f"error: {summary['error']}")
    preflight = _mapping(_mapping(summary.get("health")).get("preflight"))
    found = _findings(preflight.get("findings", []), lines, "summary.json") + dog.findings
    lines += [f.line() for f in found]
    lines += _dropped(records, preflight, recipe)
    recorded = [f.get("rule") for r in records if isinstance(r.get("health"), list) for f in r["health"] if isinstance(f, dict)]
    replayed = [f.rule for f in dog.findings]
    if recorded and recorded != replayed:
        lines.append(
            f"note: the run recorded {', '.join(map(str, recorded))} while it trained (other thresholds, or another grpo_ext)"
        )
    if status == "killed":
        recipe_path = summary.get("recipe") or "RECIPE"
        lines.append(f"killed: the run stopped before it finished; continue it: grpo-ext train {recipe_path} --resume")
    healthy = not any(f.severity == "warning" for f in found) and status not in UNHEALTHY_STATUS and not unreadable
    if not found:
        lines.append("health: no rule fired" + ("" if records else " (no step was logged)"))
    if unreadable:  # no status to judge by: never healthy
        lines.append(
            f"verdict: unknown: {unreadable}, so how the run ended cannot be read; what is above comes from {metrics.name} alone"
        )
    else:
        lines.append("verdict: healthy" if healthy else "verdict: not healthy; apply the remedies above, then train again")
    return lines, healthy


def samples(run_dir: str | Path, count: int = SAMPLES) -> tuple[list[str], list[dict]]:
    """(lines saying what was found, the last ``count`` completions the run logged, oldest first). A run without
    completions.jsonl, or one whose file holds no completion, gets a line that says so; damage is a note."""
    if count < 1:
        raise RecipeError(f"doctor: --samples takes a count of 1 or more, got {count}; e.g. --samples 3")
    path = Path(run_dir) / completions.FILE
    if not path.is_file():
        recipe, _ = _read_mapping(Path(run_dir) / "recipe.yaml", load_yaml)
        if _mapping(recipe.get("logging")).get("completions_steps") == 0:
            why = "the run's recipe sets logging.completions_steps: 0"
        else:
            why = "a run from before grpo_ext logged completions, or one on a TRL that keeps no samples on its trainer"
        return [f"completions: none logged: {path} does not exist ({why})"], []
    try:
        found = completions.read(path, count)
    except OSError as exc:
        return [f"completions: {path} cannot be read ({exc.strerror or type(exc).__name__})"], []
    if found.count:
        steps = sorted({r["step"] for r in found.last})
        at = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]} to {steps[-1]}"
        lines = [f"completions: the last {len(found.last)} of {found.count} logged ({at}), from {path}"]
    else:
        lines = [f"completions: {path} holds no completion"]
    if found.cut_short:
        lines.append(f"note: {path.name} ends in a line cut short (the run was stopped while writing it); skipped")
    if found.damaged > found.cut_short:
        bad = plural(found.damaged - found.cut_short, "line")
        lines.append(f"note: {path.name} has {bad} that are not a completion's JSON (damaged); skipped")
    if found.capped is not None:
        mb, step = shown(found.capped.get("max_mb")), shown(found.capped.get("step"))
        lines.append(
            f"note: {path.name} stopped at logging.completions_max_mb ({mb} MB) at step {step}; later steps were not logged"
        )
    return lines, found.last


def _printable(text: str, limit: int, keep_end: bool = False) -> str:
    """Text to show in a terminal: at most ``limit`` characters (its end with ``keep_end``), a control character
    other than a line break written as its escape (a random model writes them)."""
    if len(text) > limit:
        text = "…" + text[-limit:] if keep_end else text[:limit] + "…"
    return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)


def _score(value, signed: bool = False) -> str:
    """``0.250`` (``+0.250`` when ``signed``), ``-`` for a reward that scored none, any other value as it is."""
    if _number(value):
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return "-" if value is None else shown(value)


def show_samples(lines: list[str], records: list[dict], console=None) -> None:
    """Print what ``samples`` read: its lines, then each completion in a box titled with its step and advantage."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console = console or Console(highlight=False)
    console.print()  # apart from the health lines above
    for line in lines:
        console.print(Text(line), soft_wrap=True)
    for record in records:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("prompt", Text(_printable(record["prompt"], PROMPT_SHOWN, keep_end=True)))
        completion = _printable(record["completion"], COMPLETION_SHOWN)
        grid.add_row("completion", Text(completion) if completion else Text("(empty)", style="dim"))
        scores = "   ".join(f"{_printable(str(name), 60)} {_score(v)}" for name, v in record["rewards"].items())
        grid.add_row("rewards", Text(scores or "(none)"))
        title = Text(f"step {record['step']}, advantage {_score(record.get('advantage'), signed=True)}")
        console.print(Panel(grid, title=title, title_align="left"))


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _accelerate_config() -> dict:
    """The accelerate config a plain ``accelerate launch`` would read, or {}."""
    default = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "accelerate" / "default_config.yaml"
    path = Path(os.environ.get("ACCELERATE_CONFIG_FILE") or default)
    try:
        return load_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def known_bad(versions: dict[str, str | None], trl_requires: list[str]) -> list[str]:
    """One line per installed package outside the range TRL declares for it (its own requirements, and those of
    the extras whose package is installed: vllm, deepspeed, ...)."""
    from packaging.requirements import Requirement

    installed = [name for name, v in versions.items() if v]
    out = []
    for text in trl_requires:
        req = Requirement(text)
        applies = req.marker is None or any(req.marker.evaluate({"extra": name}) for name in installed)
        have = versions.get(req.name)
        if applies and have and req.specifier and not req.specifier.contains(have, prereleases=True):
            out.append(
                f"{req.name} {have} is outside the range trl {versions.get('trl')} supports ({req.specifier}); "
                f"run: pip install '{req.name}{req.specifier}'"
            )
    return out


def zero3_generation(training: dict, accelerate_config: dict) -> str | None:
    """ZeRO-3 with ``ds3_gather_for_generation: false``: each generation step reads sharded weights, very slowly."""
    ds = accelerate_config.get("deepspeed_config") or {}
    if str(ds.get("zero_stage")) == "3" and training.get("ds3_gather_for_generation") is False:
        return (
            "training.ds3_gather_for_generation: false under DeepSpeed ZeRO-3 generates from sharded weights (very slow, "
            "and vLLM cannot use it); set it true unless the model is too large to gather on one GPU"
        )
    return None


def environment(training: dict | None = None) -> tuple[list[str], list[str]]:
    """(facts for a bug report, known-bad combinations seen; with a recipe's ``training``, those of the recipe too)."""
    versions = {name: _version(name) for name in PACKAGES}
    lines = [f"python {platform.python_version()} on {platform.platform()}"]
    lines += [f"{name} {v or 'not installed'}" for name, v in versions.items()]
    try:
        import torch

        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                lines.append(f"cuda:{i} {p.name}, {p.total_memory / 2**30:.1f} GiB, bf16 {torch.cuda.is_bf16_supported()}")
        else:
            lines.append("CUDA: no device")
    except ImportError:
        lines.append("CUDA: unknown (torch not installed)")
    flag = hardware.cpu_bf16()
    lines.append(f"CPU bf16: {'yes (' + flag + ')' if flag else 'no'}")
    lines.append(f"cache: {model_names.cache_dir()} (GRPO_EXT_CACHE)")
    config = _accelerate_config()
    if config:
        lines.append(
            f"accelerate config: distributed_type {config.get('distributed_type')}, {config.get('num_processes')} processes"
        )
    requires = (importlib.metadata.requires("trl") or []) if versions["trl"] else []
    problems = known_bad(versions, requires)
    zero3 = zero3_generation(training or {}, config)
    return lines, problems + ([zero3] if zero3 else [])


def cmd_doctor(args) -> int:
    """A run's health (exit 1 when not healthy) and with --samples its last completions, or with --env the facts a bug
    report needs (exit 1 on a known-bad mix)."""
    if args.env and args.samples is not None:
        raise RecipeError("doctor: --samples reads a run directory; drop --env")
    if args.env:
        facts, problems = environment(load(args.target).training.settings if args.target else None)
        for line in facts + [f"problem: {p}" for p in problems]:
            print(line)
        return 1 if problems else 0
    if not args.target:
        raise RecipeError("doctor: give a run directory (grpo-ext doctor runs/digit), or --env")
    logged = samples(args.target, args.samples) if args.samples is not None else None  # a bad count: before any line
    lines, healthy = diagnose(args.target)
    print("\n".join(lines))
    if logged is not None:
        show_samples(*logged)
    return 0 if healthy else 1


def add_parser(subparsers) -> None:
    """``grpo-ext doctor RUN_DIR [--samples [N]]`` and ``grpo-ext doctor --env [RECIPE]``."""
    p = subparsers.add_parser("doctor", help="diagnose a run directory (exit 1 when not healthy); --env: facts for a bug report")
    p.add_argument("target", nargs="?", help="a run directory; with --env, optionally a recipe whose settings to check too")
    p.add_argument("--env", action="store_true", help="versions, devices, cache; known-bad combinations")
    p.add_argument(
        "--samples",
        nargs="?",
        type=int,
        const=SAMPLES,
        metavar="N",
        help=f"also print the last N completions the run logged (completions.jsonl), default {SAMPLES}",
    )
    p.set_defaults(fn=cmd_doctor)
