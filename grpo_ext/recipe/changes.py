"""What differs between two recipes, and which keys a resumed run may change without changing what it means."""

from typing import Any

from grpo_ext.recipe.schema import SCHEMA

# Keys a resumed run may change without changing what the run means: how it is evaluated, logged and saved.
RESUME_MAY_CHANGE = (
    "eval",
    "health",
    "logging",
    "groups.skip_zero_advantage",
    "groups.share_prompt",
    "resume",
    "save_final",
    "output_dir",
    "training.logging_steps",
    "training.report_to",
    "training.save_strategy",
    "training.save_steps",
    "training.save_total_limit",
    "training.disable_tqdm",
)


def _flatten(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _flatten(item, f"{path}.{key}" if path else str(key)).items()}
    return {path: value}


def changed_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Key paths whose values differ between two recipes (``portable`` data), other than RESUME_MAY_CHANGE.

    >>> changed_keys({"training": {"learning_rate": 1e-5, "logging_steps": 1}, "rewards": [{"name": "a"}]},
    ...              {"training": {"learning_rate": 3e-5, "logging_steps": 5}, "rewards": [{"name": "b"}]})
    ['rewards', 'training.learning_rate']
    >>> changed_keys({"seed": 0}, {"seed": 0, "explore": {"end_boost": None, "start": 1}})  # recorded before they existed
    []
    """
    old, new = _flatten(before), _flatten(after)
    for key, value in new.items():  # a key added to grpo_ext after the run was recorded, at its default: the same
        section, _, name = key.partition(".")
        spec = SCHEMA.get(section, {}).get(name) if section != "reward" else None
        if key not in old and spec is not None and value == spec.default:
            old[key] = value
    differ = [k for k in dict.fromkeys([*old, *new]) if old.get(k, "<unset>") != new.get(k, "<unset>")]
    return sorted(k for k in differ if not any(k == m or k.startswith(f"{m}.") for m in RESUME_MAY_CHANGE))
