"""Every TRL version difference lives here, behind named predicates.

A recipe's ``training:`` section uses TRL's own GRPOConfig names. For the installed TRL each key is
passed through, translated (renamed, or a value converted), dropped with a reason, or refused when only
a newer TRL has it. Each translation or drop is announced once, in one line. Keys unknown to every
TRL version are recipe errors with a suggestion.

The table of GRPOConfig fields (``trl_fields.json``, written by ``scripts/trl_fields.py``) lets the
recipe be checked without importing TRL. Version history comes from TRL's sources at each release.
"""

import difflib
import importlib.metadata
import inspect
import json
from functools import cache
from pathlib import Path

from packaging.version import Version

MIN_TRL = Version("0.19")

# GRPOConfig keys that only newer TRL versions have: key → first version with it.
ADDED: dict[str, str] = {
    **dict.fromkeys(["importance_sampling_level", "top_entropy_quantile", "use_transformers_paged"], "0.20"),
    "vllm_model_impl": "0.21",
    **dict.fromkeys(["vllm_enable_sleep_mode", "vllm_importance_sampling_correction", "vllm_importance_sampling_cap"], "0.23"),
    **dict.fromkeys(["cast_lm_head_to_fp32", "chat_template_kwargs"], "0.25"),
    **dict.fromkeys(["num_generations_eval", "vllm_max_model_length", "vllm_importance_sampling_mode",
                     "use_bias_correction_kl", "sapo_temperature_pos", "sapo_temperature_neg", "log_unique_prompts"], "0.26"),
    **dict.fromkeys(["vllm_structured_outputs_regex", "multi_objective_aggregation", "max_tool_calling_iterations",
                     "off_policy_mask_threshold", "vllm_group_port"], "0.27"),
    "log_completions_hub_repo": "0.28",
    **dict.fromkeys(["pad_to_multiple_of", "vespo_k_pos", "vespo_k_neg", "vespo_lambda_pos", "vespo_lambda_neg"], "1.0"),
    **dict.fromkeys(["vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min"], "1.6"),
    **dict.fromkeys(["trust_remote_code", "router_aux_loss_coef", "use_transformers_continuous_batching",
                     "transformers_continuous_batching_config"], "1.7"),
    **dict.fromkeys(["entropy_coef", "use_adaptive_entropy", "entropy_coef_min", "entropy_coef_max",
                     "entropy_coef_delta", "entropy_target"], "1.8"),
    "log_multimodal": "1.9",
}

# Keys that TRL renamed: old name → (new name, first version with the new name, version without the old one).
RENAMED: dict[str, tuple[str, str, str]] = {
    "use_liger_loss": ("use_liger_kernel", "0.25", "0.28"),
    "vllm_guided_decoding_regex": ("vllm_structured_outputs_regex", "0.27", "0.28"),
    "wandb_log_unique_prompts": ("log_unique_prompts", "0.26", "0.27"),
}

# Keys that TRL removed without a replacement: key → (version without it, what happens instead).
DROPPED: dict[str, tuple[str, str]] = {
    "max_prompt_length": ("0.28", "prompts are no longer truncated; keep them short or truncate them in the data"),
}

# Keys gone before the oldest supported TRL: refused with what to use instead.
RETIRED: dict[str, str] = {
    "vllm_device": "vLLM runs colocated or as `trl vllm-serve`; set vllm_mode",
    "vllm_dtype": "vLLM takes the model's dtype",
    "vllm_max_model_len": "use vllm_max_model_length",
    "vllm_enable_prefix_caching": "prefix caching is on in vLLM by default",
}

# What grpo_ext sets when the recipe does not: value and reason.
OUR_DEFAULTS: dict[str, tuple[object, str]] = {
    "logging_steps": (1, "one metrics line per step"),
    "disable_tqdm": (True, "grpo_ext prints its own progress line per step"),
    "report_to": ("none", "no logging service unless the recipe names one"),
}


@cache
def fields() -> dict[str, dict]:
    return json.loads((Path(__file__).with_name("trl_fields.json")).read_text())["fields"]


@cache
def fields_version() -> str:
    return json.loads((Path(__file__).with_name("trl_fields.json")).read_text())["trl"]


@cache
def trl_version() -> Version:
    """The installed TRL's version, read from package metadata (no import)."""
    try:
        return Version(importlib.metadata.version("trl"))
    except importlib.metadata.PackageNotFoundError:
        return Version(fields_version())


def trl_at_least(version: str, installed: Version | None = None) -> bool:
    return (installed or trl_version()) >= Version(version)


# Named predicates for the behaviours that moved.
def has_max_prompt_length(v: Version | None = None) -> bool:
    return not trl_at_least(DROPPED["max_prompt_length"][0], v)


def scale_rewards_is_string(v: Version | None = None) -> bool:
    return trl_at_least("0.22", v)


def known_keys() -> set[str]:
    return set(fields()) | set(RENAMED) | set(DROPPED) | set(ADDED)


def check_supported() -> str | None:
    """A one-line problem if the installed TRL is older than the supported range."""
    if trl_version() < MIN_TRL:
        return f"trl {trl_version()} is older than grpo_ext supports; run: pip install 'trl>={MIN_TRL}'"
    return None


def check_training(training: dict, installed: Version | None = None) -> list[str]:
    """Problems with a recipe's ``training:`` section; coerces numeric strings in place."""
    from grpo_ext.recipe import coerce, describe_kinds, kind_of

    v = installed or trl_version()
    problems = []
    unsupported = check_supported()
    if unsupported:
        problems.append(unsupported)
    table = fields()
    valid = {}
    for key in list(training):
        where = f"training.{key}"
        value = training[key]
        if key in RETIRED:
            problems.append(f"{where}: removed in trl 0.18 and not in any supported version; {RETIRED[key]}")
            continue
        if key in ("output_dir", "seed"):
            problems.append(f"{where}: set it at the top level of the recipe ({key}: ...), not under training")
            continue
        if key not in known_keys():
            hint = difflib.get_close_matches(str(key), sorted(known_keys()), n=1, cutoff=0.6)
            more = f"; did you mean {hint[0]!r}?" if hint else "; see GRPOConfig in TRL's documentation"
            problems.append(f"{where}: unknown GRPOConfig key{more}")
            continue
        if key in ADDED and not trl_at_least(ADDED[key], v):
            problems.append(f"{where}: needs trl>={ADDED[key]} (installed {v}); run: pip install -U 'trl>={ADDED[key]}'")
            continue
        if key == "scale_rewards":
            if not isinstance(value, (bool, str)) or (isinstance(value, str) and value not in ("group", "batch", "none")):
                problems.append(f"{where}: expected 'group', 'batch', 'none', true or false, got {value!r}")
            elif value == "batch" and not scale_rewards_is_string(v):
                problems.append(f"{where}: 'batch' needs trl>=0.22 (installed {v}); run: pip install -U 'trl>=0.22'")
            else:
                valid[key] = value
            continue
        if key in table:
            coerced, ok = coerce(value, table[key]["kinds"])
            if not ok:
                problems.append(f"{where}: expected {describe_kinds(table[key]['kinds'])}, got {kind_of(value)} {value!r:.60}")
                continue
            training[key] = coerced
        valid[key] = training[key]
    problems.extend(check_shapes(valid))
    return problems


def effective(training: dict, key: str):
    """The value a key will have: the recipe's, else ours, else TRL's default from the table."""
    if key in training:
        return training[key]
    if key in OUR_DEFAULTS:
        return OUR_DEFAULTS[key][0]
    return fields().get(key, {}).get("default")


def check_shapes(training: dict) -> list[str]:
    """GRPO's shape and value rules (``shapes.py``) over the effective values, before any model loads."""
    from grpo_ext import shapes

    return shapes.check(lambda key: effective(training, key))


def translate(training: dict, installed: Version | None = None) -> tuple[dict, list[str], dict[str, str]]:
    """Turn a validated ``training:`` section into GRPOConfig kwargs for the installed TRL.

    Returns (kwargs, announcements, marks) where marks maps an output key to 'translated' or 'dropped'.
    """
    v = installed or trl_version()
    kwargs, notes, marks = {}, [], {}
    reverse = {new: (old, first) for old, (new, first, _) in RENAMED.items()}
    for key, value in training.items():
        if key in RENAMED:
            new, first_new, gone = RENAMED[key]
            if trl_at_least(first_new, v):
                kwargs[new] = value
                marks[new] = f"translated from {key}"
                notes.append(f"training.{key} is called {new} in trl {v}; passed as {new}={value!r}")
                continue
        elif key in reverse and not trl_at_least(ADDED.get(key, "0"), v):
            old, _ = reverse[key]
            kwargs[old] = value
            marks[old] = f"translated from {key}"
            notes.append(f"training.{key} is called {old} in trl {v}; passed as {old}={value!r}")
            continue
        elif key in DROPPED and trl_at_least(DROPPED[key][0], v):
            marks[key] = "dropped"
            notes.append(f"training.{key}={value!r} dropped: trl {v} has no {key}; {DROPPED[key][1]}")
            continue
        elif key == "scale_rewards":
            if scale_rewards_is_string(v) and isinstance(value, bool):
                value = "group" if value else "none"
                marks[key] = "translated from a bool"
                notes.append(f"training.scale_rewards={training[key]!r} means {value!r} in trl {v}")
            elif not scale_rewards_is_string(v) and isinstance(value, str):
                value = value == "group"
                marks[key] = "translated from a string"
                notes.append(f"training.scale_rewards={training[key]!r} means {value!r} in trl {v}")
        kwargs[key] = value
    for key, (value, _) in OUR_DEFAULTS.items():
        kwargs.setdefault(key, value)
    return kwargs, notes, marks


def hardware_defaults(kwargs: dict, has_cuda: bool, bf16_ok: bool) -> list[str]:
    """Fill device-dependent keys the recipe left open (in place); return the announcements."""
    notes = []
    if not has_cuda and not kwargs.get("use_cpu"):
        kwargs["use_cpu"] = True
        notes.append("no CUDA device found: training on the CPU (use_cpu=True)")
    if "bf16" not in kwargs and "fp16" not in kwargs:
        kwargs["bf16"] = bool(has_cuda and bf16_ok)
        notes.append(f"bf16={kwargs['bf16']} ({'GPU supports bf16' if kwargs['bf16'] else 'float32 weights and math on this device'})")
    return notes


def make_config(kwargs: dict):
    from trl import GRPOConfig

    return GRPOConfig(**kwargs)


def make_trainer(*, model, reward_funcs, args, train_dataset, tokenizer, peft_config=None, callbacks=None):
    """Build GRPOTrainer with keywords only; the tokenizer goes to `processing_class` or `tokenizer`."""
    from trl import GRPOTrainer

    params = inspect.signature(GRPOTrainer.__init__).parameters
    kwargs = {"model": model, "reward_funcs": reward_funcs, "args": args, "train_dataset": train_dataset, "callbacks": callbacks}
    kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
    if peft_config is not None:
        kwargs["peft_config"] = peft_config
    return GRPOTrainer(**kwargs)
