"""Short runs: what ``--quick`` changes, and how many prompts the pre-flight and the eval of a tool recipe play.

``grpo-ext train RECIPE --quick`` answers "does my recipe run end to end?" in the least time that still runs every
phase a full run has: two steps, the pre-flight a 2-step run has (below), the eval before and after on two prompts,
no ``final/``, in a run directory of its own. The pre-flight keeps that size because its verdicts are read: on one
group of SmolLM2 on ``recipes/arith-tools.yaml`` it warned three times (no spread, no spread, no call) where the
same run's 32 samples warned of nothing. Its overrides go under the ones typed with it, so an explicit
``key=value`` wins; a key the recipe already sets as small is left as it is. The run (and ``--dry-run``) says what
it changed in its first line.

A recipe with tools (or an environment) plays whole conversations in the pre-flight and the eval, each turn a
generate call: on a CPU the 64 of the pre-flight of ``recipes/arith-tools.yaml`` took 344 s, and its two evals of
256 conversations 564 s, beside 662 s for two training steps. So where such a recipe leaves them unset
(``health.preflight_prompts``, ``eval.max_prompts``), they play no more prompts than its steps train on
(``max_steps`` x the prompts of one step); the shipped recipes' full runs train on more and are unchanged.
"""

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ext.core.text import plural
from grpo_ext.recipe.checked import Data, Recipe, validate
from grpo_ext.recipe.read import apply_overrides, locate, parse_override, read_yaml
from grpo_ext.recipe.schema import SCHEMA, TOP_LEVEL
from grpo_ext.recipe.training import Training

# the pre-flight's prompts where a recipe sets none: the 8 groups its flat-share threshold was set on
PREFLIGHT_PROMPTS = 8
SUFFIX = "-quick"  # a quick run's directory: output_dir with this added, so a full run's directory is never touched

# key, value, why: counts are only ever lowered
QUICK: tuple[tuple[str, object, str], ...] = (
    # the second step runs with the optimizer's state allocated, so its memory is a full run's
    ("training.max_steps", 2, "two steps"),
    ("health.preflight", "warn", "a pre-flight warning is printed, and every phase still runs"),
    ("eval.max_prompts", 2, "the eval on two prompts"),
    ("eval.samples", 2, "two samples each"),
    ("eval.pass_at", None, "pass@1 and pass@2"),  # a recipe's k past 2 samples would be refused
    ("save_final", False, "no final/"),
)
COUNTS = {"training.max_steps", "eval.max_prompts", "eval.samples"}


@dataclass
class Change:
    key: str
    value: object
    before: object


def _default(key: str, doc: dict[str, Any]) -> Any:
    """The value ``key`` has in ``doc`` (a recipe mapping, before validation), its default where the recipe leaves
    it out; KeyError when a section on its path is not a mapping (validation names that)."""
    section, _, name = key.partition(".")
    if not name:
        return doc[key] if key in doc else TOP_LEVEL[key].default
    node = doc.get(section, {})
    if not isinstance(node, dict):
        raise KeyError(key)
    if section == "training":
        return Training(node).effective(name)
    return node[name] if name in node else SCHEMA[section][name].default


def _smaller(key: str, value: object, before: object) -> bool:
    """Whether ``value`` changes ``before``: a count only when it lowers it (null and -1 mean no bound)."""
    if key not in COUNTS:
        return value != before
    if isinstance(before, bool) or not isinstance(before, int) or before <= 0:
        return True
    return isinstance(value, int) and value < before


def _section(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return doc[name] if isinstance(doc.get(name), dict) else {}


def _typed(overrides: list[str]) -> list[list[str]]:
    return [parse_override(text)[0] for text in overrides]


def _given(key: str, typed: list[list[str]]) -> bool:
    """Whether an override typed names ``key``, a section above it or a key under it."""
    parts = key.split(".")
    return any(t[: len(parts)] == parts or parts[: len(t)] == t for t in typed)


def changes(doc: dict[str, Any], overrides: list[str]) -> tuple[list[Change], list[str]]:
    """(what --quick changes in ``doc`` with the ``overrides`` typed applied, the quick keys those overrides set)."""
    mine = apply_overrides(doc, overrides)
    typed = _typed(overrides)
    evaluated = _section(mine, "eval").get("enabled", True) is not False
    preflight = _section(mine, "health").get("preflight", "warn") not in ("off", False)
    out, kept = [], []
    rows = [*QUICK]
    if isinstance(mine.get("output_dir"), str) and mine["output_dir"].strip("/"):
        rows.append(("output_dir", mine["output_dir"].rstrip("/") + SUFFIX, "a run directory of its own"))
    for key, value, _ in rows:
        if _given(key, typed):
            kept.append(key)
            continue
        if (key.startswith("eval.") and not evaluated) or (key.startswith("health.") and not preflight):
            continue  # the recipe runs none: nothing to make smaller
        try:
            before = _default(key, mine)
        except KeyError:
            continue
        if _smaller(key, value, before):
            out.append(Change(key, value, before))
    return out, kept


def _yaml(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def line(changed: list[Change], kept: list[str]) -> str:
    """``quick: training.max_steps=2 (was 20), ...; yours kept: eval.samples; drop --quick for the full run``."""
    said = ", ".join(f"{c.key}={_yaml(c.value)} (was {_yaml(c.before)})" for c in changed) or "nothing (the recipe is as small)"
    yours = f"; yours kept: {', '.join(kept)}" if kept else ""
    return f"quick: {said}{yours}; an explicit key=value wins; drop --quick for the full run"


def with_quick(doc: dict[str, Any], path: Path | None, overrides: Sequence[str] = ()) -> Recipe:
    """The recipe ``doc`` validated with --quick's changes under the ``overrides`` typed (theirs win); its first
    note says what --quick changed, and the dry run shows ``--quick`` as where a training key came from."""
    typed = list(overrides)
    changed, kept = changes(doc, typed)
    quick = [f"{c.key}={_yaml(c.value)}" for c in changed]
    recipe = validate(apply_overrides(doc, quick + typed), path)
    for c in changed:
        section, _, name = c.key.partition(".")
        if section == "training":
            recipe.origins[name] = "--quick"
    recipe.notes.insert(0, line(changed, kept))
    return recipe


def load(ref: str, overrides: Sequence[str] = ()) -> Recipe:
    """``recipe.load`` with --quick: locate and read the recipe, then ``with_quick``."""
    path = locate(ref)
    return with_quick(read_yaml(path), path, overrides)


def again(recipe: Recipe) -> Recipe:
    """A loaded recipe (its overrides applied) made quick."""
    return with_quick(copy.deepcopy(recipe.given), recipe.path)


# --- the pre-flight and the eval of a tool recipe ----------------------------------------------------------------


def trained_prompts(training: Training) -> int | None:
    """The prompts a run's steps train on, on one process (``max_steps`` x the prompts of one step); None when it
    runs epochs (``max_steps`` unset)."""
    steps = training.effective("max_steps")
    if not isinstance(steps, int) or steps <= 0:
        return None
    value = training.effective
    per_step: int = value("per_device_train_batch_size") * value("gradient_accumulation_steps") // value("num_generations")
    return steps * max(per_step, 1)


def preflight_prompts(recipe: Recipe) -> int:
    """The prompts the pre-flight plays: ``health.preflight_prompts``; unset, 8, and for a tool recipe no more than
    its steps train on."""
    configured = recipe.health.preflight_prompts
    if configured is not None:
        return configured
    cap = trained_prompts(recipe.training) if recipe.agentic else None
    return min(PREFLIGHT_PROMPTS, cap) if cap else PREFLIGHT_PROMPTS


def eval_prompts(recipe: Recipe) -> int | None:
    """The most eval prompts a run scores: ``eval.max_prompts``; unset, every one, and for a tool recipe no more
    than its steps train on. None: every one."""
    configured = recipe.eval.max_prompts
    if configured is not None:
        return configured
    return trained_prompts(recipe.training) if recipe.agentic else None


def why(key: str, configured: int | None, training: Training) -> str:
    """Where a size came from, for the lines that state it: the ``key`` that sets it (its value ``configured``), or,
    unset, the steps a tool recipe trains on."""
    if configured is not None:
        return key
    steps = training.effective("max_steps")
    return f"{key} unset: a recipe with tools plays no more prompts than it trains on in {plural(steps, 'step')}"


def _known_eval_rows(d: Data) -> int | None:
    """How many eval rows the data section holds, where that is known without reading a file or the hub."""
    if d.eval_prompts is not None:
        return len(d.eval_prompts)
    if d.source and not d.mixture:
        return len(d.generated()[1])
    return None


def describe(recipe: Recipe) -> list[str]:
    """The dry run's lines on the pre-flight's and the eval's sizes and on final/."""
    lines = []
    health, training = recipe.health, recipe.training
    if health.preflight_on:
        n, group = preflight_prompts(recipe), training.effective("num_generations")
        scaled = health.preflight_prompts is None and n < PREFLIGHT_PROMPTS
        key = "health.preflight_prompts"
        source = why(key, health.preflight_prompts, training) if scaled or health.preflight_prompts else "the default"
        lines.append(f"pre-flight: {plural(n, 'training prompt')} x {group} completions ({source})")
    cap, known = eval_prompts(recipe), _known_eval_rows(recipe.data)
    if recipe.eval.enabled and cap is not None and (known is None or known > cap):
        source = why("eval.max_prompts", recipe.eval.max_prompts, training)
        lines.append(f"eval: at most {plural(cap, 'eval prompt')} x {recipe.eval.samples} samples ({source})")
    if not recipe.save_final:
        lines.append("final/: not saved (save_final: false); the eval after scores the trained model in memory")
    return lines
