"""Diagnose a run directory, or the environment: the ``doctor`` verb.

    grpo-ext doctor runs/digit      # the run's health: pre-flight verdicts and watchdog findings, with remedies
    grpo-ext doctor --env           # versions, devices and cache for a bug report; known-bad combinations

A run directory is read as it is (finished, failed, stopped or killed, from any supported TRL version): the
watchdog is replayed over ``metrics.jsonl`` with the run's own ``health`` thresholds, so the doctor names
what the run printed while it trained. ``diagnose`` returns the lines and whether the run is healthy.
"""

import importlib.metadata
import json
import os
import platform
from pathlib import Path

import yaml

from grpo_ext import hardware, health, model_source, rundir
from grpo_ext.errors import RecipeError

PACKAGES = ("grpo_ext", "trl", "transformers", "torch", "peft", "accelerate", "bitsandbytes", "vllm", "deepspeed", "datasets")
UNHEALTHY_STATUS = ("failed", "stopped_unhealthy")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _pass_marks(summary: dict, recipe: dict) -> tuple[dict[str, float], float]:
    """Each reward's pass mark as the run's eval recorded it, and the recipe's default."""
    default = ((recipe.get("eval") or {}).get("pass_threshold")) or 1.0
    scored = (summary.get("eval_before") or summary.get("eval_after") or {}).get("rewards") or {}
    return {name: r["pass_threshold"] for name, r in scored.items() if r.get("pass_threshold") is not None}, default


def diagnose(run_dir: str | Path) -> tuple[list[str], bool]:
    """(lines to print, healthy) for a run directory."""
    run_dir = Path(run_dir)
    summary, metrics = _read_json(run_dir / "summary.json"), run_dir / "metrics.jsonl"
    if not summary and not metrics.is_file():
        raise RecipeError(
            f"doctor: {run_dir} holds no summary.json or metrics.jsonl; give a run directory (a recipe's output_dir)"
        )
    recipe_file = run_dir / "recipe.yaml"
    recipe = (yaml.safe_load(recipe_file.read_text(encoding="utf-8")) if recipe_file.is_file() else None) or {}
    records = rundir.read_metrics(metrics)
    marks, default = _pass_marks(summary, recipe)
    dog = health.Watchdog(recipe.get("health") or {}, marks, default)
    for record in records:
        dog.update(record)
    status = summary.get("status", "unknown")
    trl = (summary.get("versions") or {}).get("trl", "?")
    shown = "running, or killed (the summary was not closed)" if status == "running" else status
    lines = [f"run {run_dir}: {shown}; {len(records)} steps logged; trl {trl}"]
    if summary.get("error"):
        lines.append(f"error: {summary['error']}")
    preflight = (summary.get("health") or {}).get("preflight")
    found = [health.Finding(**f) for f in (preflight or {}).get("findings", [])] + dog.findings
    lines += [f.line() for f in found]
    recorded = [f["rule"] for r in records for f in r.get("health") or []]
    replayed = [f.rule for f in dog.findings]
    if recorded and recorded != replayed:
        lines.append(f"note: the run recorded {', '.join(recorded)} while it trained (other thresholds, or another grpo_ext)")
    healthy = not any(f.severity == "warning" for f in found) and status not in UNHEALTHY_STATUS
    if not found:
        lines.append("health: no rule fired" + ("" if records else " (no step was logged)"))
    lines.append("verdict: healthy" if healthy else "verdict: not healthy; apply the remedies above, then train again")
    return lines, healthy


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
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
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
    lines.append(f"cache: {model_source.cache_dir()} (GRPO_EXT_CACHE)")
    config = _accelerate_config()
    if config:
        lines.append(
            f"accelerate config: distributed_type {config.get('distributed_type')}, {config.get('num_processes')} processes"
        )
    requires = (importlib.metadata.requires("trl") or []) if versions["trl"] else []
    problems = known_bad(versions, requires)
    zero3 = zero3_generation(training or {}, config)
    return lines, problems + ([zero3] if zero3 else [])
