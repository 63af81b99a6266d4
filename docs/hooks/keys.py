"""The recipe key reference, ``docs/reference/keys.md``: written by ``python docs/hooks/keys.py``, and again at
every docs build (this file is also the MkDocs hook that does it).

The page is written from the tables validation reads: ``grpo_ext.recipe.schema`` (``TOP_LEVEL`` and every
section of ``SCHEMA``) and, for ``training:``, the GRPOConfig field tables and version rules of
``grpo_ext.settings.compat``. It is committed, so that its links work in a checkout; ``tests/unit/test_docs.py``
fails while it differs from what ``render_keys()`` writes (rerun this script after changing those tables). At a
build ``on_files`` puts a fresh copy in its place. ``render_keys()`` needs neither MkDocs nor torch.
"""

import json
from pathlib import Path

PAGE = "reference/keys.md"

# Where a section's keys sit in a recipe, when that is not ``section.key``.
SECTION_PATHS = {"reward": "rewards[i]"}

SECTION_TITLES = {
    "model": "model",
    "data": "data",
    "reward": "rewards[i]: one reward",
    "eval": "eval",
    "health": "health",
    "explore": "explore",
}

SECTION_NOTES = {
    "model": "The model to train. See [Models and the cache](../models.md) and [Scaling](../scaling.md).",
    "data": "Training prompts and held-out eval rows. See [Your own data](../data.md).",
    "reward": (
        "Each entry of `rewards:` is a name (a string) or a mapping with these keys. "
        "See [Rewards](../rewards.md) and [Failures, crashes and resume](../failures.md)."
    ),
    "eval": "The before/after eval on held-out prompts. See [Evaluation](../evaluation.md).",
    "health": (
        "The reward pre-flight and the training watchdog. See [Training health](../health.md); "
        "the thresholds were calibrated on `recipes/digit.yaml` ([benchmark](../benchmarks/watchdog.md))."
    ),
    "explore": ("Sampling help for the first training steps. See [the digit recipe across seeds](../benchmarks/digit-seeds.md)."),
    "logging": "What the run directory records beside `metrics.jsonl`. See [The run directory](../run-directory.md).",
    "groups": (
        "What a step does with its groups of completions. See [Rows that teach nothing](../variants.md#rows-that-teach-nothing)."
    ),
}


def key_path(section: str, key: str) -> str:
    """Where a key of ``SCHEMA[section]`` sits in a recipe: ``data.file``, ``rewards[i].weight``."""
    return f"{SECTION_PATHS.get(section, section)}.{key}"


def _yaml(value) -> str:
    """A value as a recipe writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value)


def _code(text: str) -> str:
    return f"`{text}`"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def _default(spec) -> str:
    if spec.required:
        return "required"
    return _code(_yaml(spec.default))


def _allowed(spec) -> str:
    if spec.choices is not None:
        return ", ".join(_code(_yaml(c)) for c in spec.choices)
    if spec.minimum is not None and spec.maximum is not None:
        return f"{_yaml(spec.minimum)} to {_yaml(spec.maximum)}"
    if spec.minimum is not None:
        return f">= {_yaml(spec.minimum)}"
    if spec.maximum is not None:
        return f"<= {_yaml(spec.maximum)}"
    return ""


def _table(rows: list[tuple[str, object]]) -> list[str]:
    lines = ["| key | kinds | default | allowed | what it does |", "|---|---|---|---|---|"]
    for path, spec in rows:
        kinds = ", ".join(spec.kinds)
        lines.append(
            f"| {_code(path)} | {_cell(kinds)} | {_cell(_default(spec))} | {_cell(_allowed(spec))} | {_cell(spec.doc)} |"
        )
    return lines


def _training_section() -> list[str]:
    """``training:``: GRPOConfig keys, which the schema does not list; they come from TRL's own field tables."""
    from grpo_ext.settings import compat

    tables = list(compat.tables().values())
    oldest, newest = tables[0]["trl"], tables[-1]["trl"]
    lines = [
        "## training",
        "",
        "`training:` holds GRPOConfig keys under TRL's own names; `grpo_ext.recipe.schema` has no section for it.",
        "Validation (`grpo_ext/settings/compat.py`) checks each key against the field table of the installed TRL",
        f"(`grpo_ext/settings/trl_fields/<version>.json`, one per TRL version from {oldest} to {newest}) and passes",
        "it through, translated, dropped with a reason, or refused with the TRL version that has it. See",
        "[TRL versions](../trl-versions.md) for how a key means the same on every supported TRL.",
        "",
        "A few keys grpo_ext handles itself:",
        "",
        "| key | what grpo_ext does |",
        "|---|---|",
    ]
    for key, what in sorted(compat.APPLIED.items()):
        lines.append(f"| {_code(key)} | applied by grpo_ext on every TRL: {_cell(what)} |")
    for old, new in sorted(compat.RENAMED.items()):
        lines.append(f"| {_code(old)}, {_code(new)} | renamed: passed under whichever name the installed version has |")
    for key, why in sorted(compat.DROPPED.items()):
        lines.append(f"| {_code(key)} | dropped where absent, announced: {_cell(why)} |")
    for key, (value, why) in sorted(compat.NEUTRAL.items()):
        lines.append(f"| {_code(key)} | accepted at {_code(_yaml(value))} on every TRL: {_cell(why)} |")
    for key, why in sorted(compat.RETIRED.items()):
        lines.append(f"| {_code(key)} | refused (gone before the oldest supported TRL): {_cell(why)} |")
    lines.append("| `output_dir`, `seed` | refused here: set them at the top level of the recipe |")
    lines += [
        "",
        "Defaults that moved between TRL versions, which every shipped recipe sets (and `--dry-run` always shows): "
        + ", ".join(_code(k) for k in compat.MOVED_DEFAULTS)
        + ".",
        "",
        f"Every key some supported TRL has, with the oldest TRL that has it and its default in TRL {newest}",
        "(a key a newer TRL dropped shows the default of the last version that had it):",
        "",
        "| key | kinds | oldest TRL | default |",
        "|---|---|---|---|",
    ]
    skip = set(compat.RETIRED) | {"output_dir", "seed"}
    for key in sorted(compat.known_keys() - skip):
        kinds = sorted({k for t in tables for k in t["fields"].get(key, {}).get("kinds", ())})
        first = compat.first_with(key) or ""
        known = [t for t in tables if key in t["fields"]]
        default = _code(_yaml(known[-1]["fields"][key]["default"])) if known else "(version rules only)"
        lines.append(f"| {_code('training.' + key)} | {_cell(', '.join(kinds))} | {_cell(first)} | {_cell(default)} |")
    return lines


def render_keys() -> str:
    """The key reference page, as Markdown."""
    from grpo_ext.recipe.schema import SCHEMA, TOP_LEVEL

    lines = [
        "# Recipe keys",
        "",
        "Every key a recipe may hold, generated from `grpo_ext/recipe/schema.py` by `docs/hooks/keys.py` (not edited",
        "by hand: `python docs/hooks/keys.py` rewrites this page): the tables that `grpo-ext validate` checks and",
        "`grpo-ext schema` turns into a JSON Schema. *kinds* are the YAML kinds a key accepts, *default* what a recipe",
        "that leaves the key out gets, *allowed* its choices or range. A key not listed is refused, with a suggestion",
        "when it is close to one that is. For how to write and override recipes, see [Recipes](../recipes.md).",
        "",
        "## Top level",
        "",
        *_table([(key, spec) for key, spec in TOP_LEVEL.items()]),
    ]
    order = ["model", "data", "reward", "training", "eval", "health", "explore"]
    order += [s for s in SCHEMA if s not in order]
    for section in order:
        if section == "training":
            lines += ["", *_training_section()]
            continue
        if section not in SCHEMA:
            continue
        lines += ["", f"## {SECTION_TITLES.get(section, section)}", ""]
        if section in SECTION_NOTES:
            lines += [SECTION_NOTES[section], ""]
        lines += _table([(key_path(section, key), spec) for key, spec in SCHEMA[section].items()])
    return "\n".join(lines) + "\n"


def on_files(files, config):
    """Add the key reference to the build, written afresh in place of the committed copy."""
    from mkdocs.structure.files import File

    committed = files.get_file_from_path(PAGE)
    if committed is not None:
        files.remove(committed)
    files.append(File.generated(config, PAGE, content=render_keys()))
    return files


def main() -> None:
    """Write the page into the docs folder."""
    out = Path(__file__).resolve().parents[1] / PAGE
    out.parent.mkdir(exist_ok=True)
    out.write_text(render_keys(), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
