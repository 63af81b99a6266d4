"""The recipe as a JSON Schema (draft 2020-12), for editors: completion and hover docs on every key.

It is written from the same tables validation reads (``schema.py``'s specs; the ``training:`` keys of every
supported TRL from ``settings.compat``), so it never names a key that validation does not know. It is the
looser of the two by design: what the schema refuses, validation refuses too, while checks that need the
data, the installed TRL or the other keys (data sources, batch shapes, a reward's columns) stay with
``grpo-ext validate``. ``grpo-ext schema`` prints it; the shipped recipes point at ``recipes/recipe.schema.json``.
"""

import json
from collections.abc import Sequence
from typing import Any

from grpo_ext.recipe.schema import SCHEMA, TOP_LEVEL, Spec
from grpo_ext.settings import batch_rules, compat, variants

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# A number YAML read as text: PyYAML reads `1e-5` (no dot) as a string, and validation converts such a string
# where a float is expected; digits may carry underscores, as Python's float() allows.
NUMBER_TEXT = r"^\s*[+-]?[\d_]*\.?[\d_]*\d[\d_]*\.?[\d_]*([eE][+-]?\d[\d_]*)?\s*$"
_TYPES = {"str": "string", "int": "integer", "bool": "boolean", "null": "null", "list": "array", "dict": "object"}


def kinds_schema(kinds: Sequence[str]) -> dict[str, Any]:
    """The JSON types of a spec's YAML kinds; a float also takes an integer and a number written as text."""
    if "any" in kinds:
        return {}
    options = [{"type": _TYPES[k]} for k in kinds if k != "float"]
    if "float" in kinds:
        options += [{"type": "number"}, {"type": "string", "pattern": NUMBER_TEXT}]
    return options[0] if len(options) == 1 else {"anyOf": options}


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def spec_schema(spec: Spec) -> dict[str, Any]:
    """One key: its kinds, allowed values, range, default and doc."""
    out: dict[str, Any] = kinds_schema(spec.kinds) if spec.choices is None else {"enum": list(spec.choices)}
    if spec.minimum is not None:
        out["minimum"] = spec.minimum
    if spec.maximum is not None:
        out["maximum"] = spec.maximum
    if not spec.required and spec.default not in ({}, []) and _jsonable(spec.default):
        out["default"] = spec.default
    if spec.doc:
        out["description"] = spec.doc
    return out


def section_schema(specs: dict[str, Spec], description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "properties": {key: spec_schema(spec) for key, spec in specs.items()},
        "additionalProperties": False,
    }
    required = [key for key, spec in specs.items() if spec.required]
    if required:
        out["required"] = required
    if description:
        out["description"] = description
    return out


def training_schema() -> dict[str, Any]:
    """GRPOConfig keys under TRL's own names: every key some supported TRL has, with the kinds any of its tables
    give it (a recipe means the same on every version; validation says which version a key needs)."""
    tables = list(compat.tables().values())
    properties = {}
    for key in sorted(compat.known_keys() - set(compat.RETIRED) - {"output_dir", "seed"}):
        kinds = sorted({k for t in tables for k in t["fields"].get(key, {}).get("kinds", ())})
        prop: dict[str, Any]
        if not kinds:  # a key the version rules know by name only (renamed, dropped, applied by grpo_ext)
            prop = {}
        elif key == "scale_rewards":
            prop = {"enum": ["group", "batch", "none", True, False]}
        else:
            prop = kinds_schema(tuple(kinds))
            if key in batch_rules.STRATEGIES:  # YAML 1.1 reads an unquoted `no` as false; validation takes it
                prop = {"anyOf": [prop, {"const": False}]}
        first = compat.first_with(key)
        default = next((t["fields"][key]["default"] for t in reversed(tables) if key in t["fields"]), None)
        prop["description"] = f"GRPOConfig.{key} (TRL{f' >= {first}' if first else ''}; default {json.dumps(default)})"
        properties[key] = prop
    return {
        "type": "object",
        "description": "GRPOConfig keys under TRL's names; grpo_ext checks them against the installed TRL",
        "properties": properties,
        "additionalProperties": False,
    }


def reward_schema() -> dict[str, Any]:
    entry = section_schema(SCHEMA["reward"], "a reward by name, with its weight, args and error handling")
    by_model = section_schema({k: v for k, v in SCHEMA["reward"].items() if k != "name"}, "a reward model (reward_model)")
    by_model["properties"]["model"] = {
        "type": "string",
        "minLength": 1,
        "description": "a sequence-classification reward model: directory or hub id",
    }
    by_model["required"] = ["model"]
    return {
        "type": "array",
        "description": "rewards by name (grpo-ext rewards lists them), a module:function path or a file.py:function; "
        "[] when the environment's get_reward is the reward",
        "items": {"anyOf": [{"type": "string", "minLength": 1}, entry, by_model]},
    }


def json_schema() -> dict[str, Any]:
    """The whole recipe's JSON Schema."""
    properties = {}
    for key, spec in TOP_LEVEL.items():
        if key == "rewards":
            properties[key] = reward_schema()
        elif key == "training":
            properties[key] = training_schema()
        elif key in SCHEMA:
            properties[key] = section_schema(SCHEMA[key], spec.doc)
        else:
            properties[key] = spec_schema(spec)
    properties["algorithm"] = {
        "enum": [*variants.VARIANTS, None],
        "description": properties["algorithm"].get("description") or "a GRPO variant by name (grpo-ext algorithms)",
    }
    return {
        "$schema": DRAFT,
        "title": "grpo_ext recipe",
        "description": "A GRPO training recipe for grpo_ext (python -m grpo_ext.train RECIPE)",
        "type": "object",
        "properties": properties,
        "required": [key for key, spec in TOP_LEVEL.items() if spec.required],
        "additionalProperties": False,
        # at least one reward, unless an environment is given (whose get_reward may be the reward)
        "if": {"not": {"required": ["environment"]}},
        "then": {"properties": {"rewards": {"minItems": 1}}},
    }


def text() -> str:
    """The schema as the file ``grpo-ext schema`` writes: stable key order, one trailing newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
