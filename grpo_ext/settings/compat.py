"""Every TRL and transformers version difference lives here, behind named predicates.

A recipe's ``training:`` section uses TRL's own GRPOConfig names. For the installed TRL each key is
passed through, translated (renamed, or a value converted), dropped with a reason, or refused when only
a newer TRL has it. Each translation or drop is announced once, in one line. Keys unknown to every
supported version are recipe errors with a suggestion.

Tables of GRPOConfig fields, one per TRL version of the compatibility matrix (``trl_fields/*.json``,
written by ``scripts/trl_fields.py`` in each version's environment), let a recipe be checked without
importing TRL: the table of the installed version is used, or the nearest older one; the others are read only for a
key that table and the version rules lack (a key another version has gets the version to install). At run time the
real GRPOConfig decides which name of a renamed key is passed.
"""

import contextlib
import importlib.util
import inspect
import json
from functools import cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from grpo_ext.core.text import clip, shown, suggest
from grpo_ext.core.values import coerce, wrong_kind
from grpo_ext.settings import batch_rules

MIN_TRL = Version("0.19")

# GRPOConfig keys that only newer TRL versions have: key → first version with it.
ADDED: dict[str, str] = {
    **dict.fromkeys(["importance_sampling_level", "top_entropy_quantile", "use_transformers_paged"], "0.20"),
    "vllm_model_impl": "0.21",
    **dict.fromkeys(["vllm_enable_sleep_mode", "vllm_importance_sampling_correction", "vllm_importance_sampling_cap"], "0.23"),
    **dict.fromkeys(["cast_lm_head_to_fp32", "chat_template_kwargs"], "0.25"),
    **dict.fromkeys(
        [
            "num_generations_eval",
            "vllm_max_model_length",
            "vllm_importance_sampling_mode",
            "use_bias_correction_kl",
            "sapo_temperature_pos",
            "sapo_temperature_neg",
            "log_unique_prompts",
        ],
        "0.26",
    ),
    **dict.fromkeys(
        [
            "vllm_structured_outputs_regex",
            "multi_objective_aggregation",
            "max_tool_calling_iterations",
            "off_policy_mask_threshold",
            "vllm_group_port",
        ],
        "0.27",
    ),
    "log_completions_hub_repo": "0.28",
    **dict.fromkeys(["pad_to_multiple_of", "vespo_k_pos", "vespo_k_neg", "vespo_lambda_pos", "vespo_lambda_neg"], "1.0"),
    **dict.fromkeys(["vllm_importance_sampling_clip_max", "vllm_importance_sampling_clip_min"], "1.6"),
    **dict.fromkeys(
        [
            "trust_remote_code",
            "router_aux_loss_coef",
            "use_transformers_continuous_batching",
            "transformers_continuous_batching_config",
        ],
        "1.7",
    ),
    **dict.fromkeys(
        ["entropy_coef", "use_adaptive_entropy", "entropy_coef_min", "entropy_coef_max", "entropy_coef_delta", "entropy_target"],
        "1.8",
    ),
    "log_multimodal": "1.9",
}

# Renamed keys: old name → new name. TRL renamed the first three; transformers 5 folded warmup_ratio
# into warmup_steps (a float below 1 is a ratio) and no_cuda into use_cpu. Whichever name the
# installed version lacks is passed under the name it has, in either direction.
RENAMED: dict[str, str] = {
    "use_liger_loss": "use_liger_kernel",
    "vllm_guided_decoding_regex": "vllm_structured_outputs_regex",
    "wandb_log_unique_prompts": "log_unique_prompts",
    "warmup_ratio": "warmup_steps",
    "no_cuda": "use_cpu",
}

# Keys removed without a replacement: key → what happens instead. Dropped, with this reason, where absent.
DROPPED: dict[str, str] = {
    "overwrite_output_dir": "grpo_ext never replaces a run unless you pass --overwrite",
    "logging_dir": "metrics go to output_dir/metrics.jsonl",
    "save_safetensors": "checkpoints are always safetensors",
}

# Keys grpo_ext applies itself, the same way on every TRL: key → what it does. TRL before 0.28 cut the start
# off a prompt longer than max_prompt_length (512 by default), newer TRL keeps every prompt whole; grpo_ext
# drops the rows whose prompt is longer and never lets TRL truncate (see truncates_prompts).
APPLIED: dict[str, str] = {
    "max_prompt_length": "grpo_ext drops prompts longer than this many tokens before training, on every TRL",
}

# Keys only newer TRL versions have, at the value that means what older versions always do: key →
# (value, why). A recipe may set them (to pin a default that moved) and runs on every version: where
# the key is missing it is dropped, announced; any other value there is refused like an ADDED key.
NEUTRAL: dict[str, tuple[object, str]] = {
    "use_bias_correction_kl": (False, "TRL before 0.26 applies no bias correction to the KL term, the same as false"),
}

# Values that only newer TRL versions accept: (key, value) → first version with it.
VALUES_ADDED: dict[tuple[str, str], str] = {
    ("loss_type", "dapo"): "0.22",
    ("scale_rewards", "batch"): "0.22",
    ("loss_type", "cispo"): "0.26",
    ("loss_type", "sapo"): "0.26",
    ("loss_type", "luspo"): "0.28",
    ("loss_type", "vespo"): "1.0",
}

# Values passed as an older equivalent where the installed TRL lacks them: (key, value) → (value, caveat).
# TRL 0.22's dapo divides the summed token loss by the completion tokens of the whole generation batch;
# bnpo divides by those of each micro-batch, which is the same batch with one process and one step.
VALUE_FALLBACK: dict[tuple[str, str], tuple[str, str]] = {
    ("loss_type", "dapo"): ("bnpo", "identical with one process and gradient_accumulation_steps=steps_per_generation=1"),
}

# Keys gone before the oldest supported TRL: refused with what to use instead.
RETIRED: dict[str, str] = {
    "vllm_device": "vLLM runs colocated or as `trl vllm-serve`; set vllm_mode",
    "vllm_dtype": "vLLM takes the model's dtype",
    "vllm_max_model_len": "use vllm_max_model_length",
    "vllm_enable_prefix_caching": "prefix caching is on in vLLM by default",
}

# GRPOConfig keys whose TRL default moved between supported versions; shipped recipes set each of them
# (or grpo_ext does), and a dry run always shows them.
MOVED_DEFAULTS = [
    "beta",
    "temperature",
    "top_k",
    "loss_type",
    "scale_rewards",
    "max_completion_length",
    "vllm_mode",
    "gradient_checkpointing",
    "logging_steps",
    "report_to",
    "use_bias_correction_kl",
]

NO_SUCH_KEY = "; see GRPOConfig in TRL's documentation"

# GRPOTrainer keywords that only newer TRL versions take: keyword → first version with it.
TRAINER_ADDED: dict[str, str] = {
    "rollout_func": "0.25",
    "tools": "0.26",
    "environment_factory": "0.29",
    "quantization_config": "1.8",
}

# What grpo_ext sets when the recipe does not: value and reason.
OUR_DEFAULTS: dict[str, tuple[object, str]] = {
    "logging_steps": (1, "one metrics line per step"),
    "disable_tqdm": (True, "grpo_ext prints its own progress line per step"),
    "report_to": ("none", "no logging service unless the recipe names one"),
}

TABLES = Path(__file__).with_name("trl_fields")


@cache
def versions() -> dict[Version, Path]:
    """The TRL versions with a field table, oldest first, each with its file (``<trl version>.json``): read from the
    names, so that a recipe's check reads the installed version's table alone (all ten took longer than the rest)."""
    return dict(sorted((Version(f.stem), f) for f in TABLES.glob("*.json")))


@cache
def read_table(version: Version) -> dict:
    """The field table of one version of ``versions()``: {"trl", "transformers", "fields"}."""
    return json.loads(versions()[version].read_text())


@cache
def tables() -> dict[Version, dict]:
    """Every shipped field table, oldest TRL first: version → {"trl", "transformers", "fields"}."""
    return {v: read_table(v) for v in versions()}


def table_for(installed: Version | None = None) -> dict:
    """The table of the installed TRL, else the nearest older one, else the oldest."""
    v = installed or trl_version()
    older = [t for t in versions() if t <= v]
    return read_table(older[-1] if older else next(iter(versions())))


def fields(installed: Version | None = None) -> dict[str, dict]:
    return table_for(installed)["fields"]


def installed_version(package: str) -> Version | None:
    """The installed version of ``package`` (no import of it), None when it is not installed.

    A wheel installs a package beside a folder named ``NAME-VERSION.dist-info`` (the binary distribution format,
    PEP 427), and the version is read from that name. Any other layout (an editable install, an egg, two such
    folders) is read by importlib.metadata, which is imported only then: importing it and finding a package
    through it cost every command's start, ``grpo-ext validate`` included, more than reading the recipe."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.origin:
        found = list(Path(spec.origin).parent.parent.glob(f"{package}-*.dist-info"))
        if len(found) == 1:
            with contextlib.suppress(InvalidVersion):
                return Version(found[0].name[len(package) + 1 : -len(".dist-info")])
    from importlib import metadata

    try:
        return Version(metadata.version(package))
    except metadata.PackageNotFoundError:
        return None


@cache
def trl_version() -> Version:
    """The installed TRL's version (see ``installed_version``); the newest table's without TRL."""
    return installed_version("trl") or next(reversed(versions()))


@cache
def transformers_version() -> Version:
    return installed_version("transformers") or Version("0")


def trl_at_least(version: str, installed: Version | None = None) -> bool:
    return (installed or trl_version()) >= Version(version)


# Named predicates for the behaviours that moved.
def scale_rewards_is_string(v: Version | None = None) -> bool:
    """TRL 0.22 turned scale_rewards from a bool into 'group' | 'batch' | 'none'."""
    return trl_at_least("0.22", v)


def from_pretrained_takes_dtype(v: Version | None = None) -> bool:
    """transformers 4.56 renamed from_pretrained's and from_config's ``torch_dtype`` to ``dtype``."""
    return (v or transformers_version()) >= Version("4.56")


def uses_liger(training: dict) -> bool:
    """Whether the recipe asks for Liger (under either of the flag's names)."""
    return bool(training.get("use_liger_loss") or training.get("use_liger_kernel"))


def logprob_path(liger: bool, v: Version | None = None) -> str:
    """How the installed TRL's loss gets the completion tokens' log-probabilities, which decides the memory
    the logits take: 'full' (the logits of every completion token at once), 'liger' (before TRL 1.13 with the
    Liger flag: Liger's fused linear GRPO loss, one sequence's logits at a time) or 'tiles' (TRL's chunked
    projection, 4096 tokens by 32768 vocabulary entries at a time: always from TRL 1.15, with the Liger flag in
    1.13 and 1.14). Read in TRL's ``grpo_trainer.py`` of 1.12, 1.13, 1.14 and 1.15."""
    if trl_at_least("1.15", v):
        return "tiles"
    if liger:
        return "tiles" if trl_at_least("1.13", v) else "liger"
    return "full"


# What a recipe's tools and environment need: TRL's GRPOTrainer(tools=) from 0.26 with transformers 5.0 (TRL 1.16
# refuses older); environment classes with get_reward from TRL 1.8, transformers 5.2; several environments
# (environment_factory as a dict of name -> factory, each row's environment column choosing one) from TRL 1.8 too:
# read in grpo_trainer.py of 1.7.0 (a single factory, no get_reward) and 1.8.0 (both).
TOOLS_NEED: dict[str, tuple[str, str]] = {
    "tools": ("0.26", "5.0"),
    "environment": ("1.8", "5.2"),
    "environments": ("1.8", "5.2"),
}


def tools_problem(key: str, trl: Version | None = None, transformers: Version | None = None) -> str | None:
    """One line if the installed TRL or transformers cannot run a recipe's ``tools``, ``environment``, or
    ``environments`` (an ``environment:`` mapping of several, by name).

    >>> tools_problem("tools", Version("0.24.0"), Version("4.57.0"))[:60]
    'tools: needs trl>=0.26 and transformers>=5.0 (installed trl '
    >>> tools_problem("environments", Version("1.7.0"), Version("5.2.0"))[:69]
    'environment: several environments (a mapping of names) need trl>=1.8 '
    >>> tools_problem("environment", Version("1.16.0"), Version("5.24.0")) is None
    True
    """
    trl, transformers = trl or trl_version(), transformers or transformers_version()
    need_trl, need_tf = TOOLS_NEED[key]
    if trl >= Version(need_trl) and transformers >= Version(need_tf):
        return None
    what = "environment: several environments (a mapping of names) need" if key == "environments" else f"{key}: needs"
    return (
        f"{what} trl>={need_trl} and transformers>={need_tf} (installed trl {trl}, transformers {transformers}); "
        f"run: pip install -U 'trl>={need_trl}' 'transformers>={need_tf}'"
    )


def parses_with_response_template(v: Version | None = None) -> bool:
    """transformers 5.13 reads tool calls back with a tokenizer's ``response_template``; before, ``response_schema``
    (which needs jmespath)."""
    return (v or transformers_version()) >= Version("5.13")


def has_key(key: str, installed: Version | None = None, present: set[str] | None = None) -> bool:
    """Whether the installed GRPOConfig has ``key``: from its real fields when given (at run time), else
    from the version rule of a key TRL added, else from the field table."""
    if present is not None:
        return key in present
    if key in ADDED:
        return trl_at_least(ADDED[key], installed)
    return key in fields(installed)


def truncates_prompts(present: set[str] | None = None) -> bool:
    """Whether GRPOConfig has max_prompt_length, which cuts longer prompts (TRL before 0.28); grpo_ext then sets it
    to a length no kept prompt exceeds, so that TRL cuts nothing. ``present``: the real GRPOConfig fields."""
    return has_key("max_prompt_length", None, present)


def dtype_kwargs(dtype) -> dict:
    """The keyword that sets a model's dtype in from_pretrained and from_config."""
    return {"dtype" if from_pretrained_takes_dtype() else "torch_dtype": dtype}


# Keys the version rules name: known on every version, whether or not its table has them.
RULED = frozenset(set(RENAMED) | set(RENAMED.values()) | set(DROPPED) | set(APPLIED) | set(ADDED))


@cache
def known_keys() -> frozenset[str]:
    """Keys that some supported version has: the union of the field tables and the version rules."""
    return frozenset({k for t in tables().values() for k in t["fields"]} | RULED)


def is_known(key: str, installed: Version | None = None) -> bool:
    """Whether some supported version has ``key`` (``known_keys``): the other versions' tables are read only for a
    key that the installed one's and the version rules lack."""
    return key in fields(installed) or key in RULED or key in known_keys()


def first_with(key: str) -> str | None:
    """The oldest TRL that has ``key`` (by the version rules, else by the tables, read oldest first until one has it)."""
    if key in ADDED:
        return ADDED[key]
    return next((read_table(v)["trl"] for v in versions() if key in read_table(v)["fields"]), None)


def first_supporting(key: str, value=None) -> str:
    """The oldest supported TRL that has ``key`` and accepts ``value`` for it (by the version rules and tables)."""
    first = first_with(key)
    oldest = str(MIN_TRL) if first is None or Version(first) <= next(iter(versions())) else first
    added = VALUES_ADDED.get((key, value)) if isinstance(value, str) else None
    return max(oldest, added or oldest, key=Version)


def check_supported() -> str | None:
    """A one-line problem if the installed TRL is older than the supported range."""
    if trl_version() < MIN_TRL:
        return f"trl {trl_version()} is older than grpo_ext supports; run: pip install -U 'trl>={MIN_TRL}'"
    return None


def _usable(key: str, v: Version) -> bool:
    """The installed version has the key, or translate() knows what to do with it."""
    reverse = {new: old for old, new in RENAMED.items()}
    return (
        has_key(key, v)
        or key in DROPPED
        or key in APPLIED
        or any(has_key(other, v) for other in (RENAMED.get(key), reverse.get(key)) if other)
    )


def _spec(key: str, v: Version) -> dict | None:
    """The field's kinds and default from the installed table, else from the newest table that has it (read newest
    first until one has it)."""
    return fields(v).get(key) or next(
        (read_table(t)["fields"][key] for t in reversed(versions()) if key in read_table(t)["fields"]), None
    )


def check_training(training: dict, installed: Version | None = None) -> list[str]:
    """Problems with a recipe's ``training:`` section; coerces numeric strings in place."""
    v = installed or trl_version()
    problems = []
    unsupported = check_supported()
    if unsupported:
        problems.append(unsupported)
    valid = {}
    for key in list(training):
        where = f"training.{clip(str(key))}"
        value = training[key]
        if key in RETIRED:
            problems.append(f"{where}: removed in trl 0.18 and not in any supported version; {RETIRED[key]}")
            continue
        if key in ("output_dir", "seed"):
            problems.append(f"{where}: set it at the top level of the recipe ({key}: ...), not under training")
            continue
        if not is_known(key, v):
            problems.append(f"{where}: unknown GRPOConfig key{suggest(key, sorted(known_keys()), NO_SUCH_KEY)}")
            continue
        if not _usable(key, v) and not (key in NEUTRAL and value == NEUTRAL[key][0]):
            first = first_with(key)
            if first and Version(first) > v:
                with_tf = "" if key in ADDED else f" with transformers {tables()[Version(first)]['transformers']}"
                problems.append(f"{where}: needs trl>={first}{with_tf} (installed {v}); run: pip install -U 'trl>={first}'")
            else:
                problems.append(f"{where}: trl {v} with transformers {transformers_version()} has no {key}; remove it")
            continue
        rule = (key, value) if isinstance(value, str) else None
        if rule in VALUES_ADDED and not trl_at_least(VALUES_ADDED[rule], v) and rule not in VALUE_FALLBACK:
            first = VALUES_ADDED[rule]
            problems.append(f"{where}: {value!r} needs trl>={first} (installed {v}); run: pip install -U 'trl>={first}'")
            continue
        if key == "scale_rewards":
            if not isinstance(value, (bool, str)) or (isinstance(value, str) and value not in ("group", "batch", "none")):
                problems.append(f"{where}: expected 'group', 'batch', 'none', true or false, got {shown(value)}")
            else:
                valid[key] = value
            continue
        if key in batch_rules.STRATEGIES and value is False:
            training[key] = value = "no"  # YAML 1.1 reads an unquoted `no` as false
        spec = _spec(key, v)
        if spec:
            coerced, ok = coerce(value, spec["kinds"])
            if not ok:
                problems.append(f"{where}: {wrong_kind(spec['kinds'], value)}")
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
    """GRPO's batch and value rules (``batch_rules.py``) over the effective values, before any model loads."""
    return batch_rules.check(lambda key: effective(training, key))


def canonical(key: str, value):
    """A value in the newest TRL's vocabulary, so that one meaning prints the same on every version."""
    if key == "scale_rewards" and isinstance(value, bool):
        return "group" if value else "none"
    return value


def translate(
    training: dict,
    installed: Version | None = None,
    present: set[str] | None = None,
) -> tuple[dict, list[str], dict[str, str]]:
    """Turn a validated ``training:`` section into GRPOConfig kwargs for the installed TRL.

    ``present`` is the real GRPOConfig field set (at run time); without it the field table decides.
    Returns (kwargs, announcements, passed): ``passed`` maps each recipe key that was translated or
    dropped to how ("passed as ...", "dropped: ...").
    """
    v = installed or trl_version()
    kwargs, notes, passed = {}, [], {}
    reverse = {new: old for old, new in RENAMED.items()}
    for key, value in training.items():
        other = RENAMED.get(key) or reverse.get(key)
        if other and not has_key(key, v, present) and has_key(other, v, present):
            kwargs[other] = value
            passed[key] = f"passed as {other}={json.dumps(value)}"
            notes.append(f"training.{key} is called {other} in trl {v}; passed as {other}={value!r}")
            continue
        if key in NEUTRAL and value == NEUTRAL[key][0] and not has_key(key, v, present):
            passed[key] = f"dropped: {NEUTRAL[key][1]}"
            notes.append(f"training.{key}={value!r} dropped: trl {v} has no {key}; {NEUTRAL[key][1]}")
            continue
        if key in APPLIED:
            passed[key] = f"applied by grpo_ext: {APPLIED[key]}"
            continue
        if key in DROPPED and not has_key(key, v, present):
            passed[key] = f"dropped: {DROPPED[key]}"
            notes.append(f"training.{key}={value!r} dropped: trl {v} has no {key}; {DROPPED[key]}")
            continue
        rule = (key, value) if isinstance(value, str) else None
        if rule in VALUE_FALLBACK and not trl_at_least(VALUES_ADDED[rule], v):
            older, caveat = VALUE_FALLBACK[rule]
            kwargs[key] = older
            passed[key] = f"passed as {json.dumps(older)} ({caveat})"
            notes.append(f"training.{key}={value!r} is not in trl {v}; passed as {older!r}, {caveat}")
            continue
        if key == "scale_rewards" and scale_rewards_is_string(v) != isinstance(value, str):
            converted = canonical(key, value) if isinstance(value, bool) else value == "group"
            passed[key] = f"passed as {json.dumps(converted)}"
            notes.append(f"training.scale_rewards={value!r} means {converted!r} in trl {v}")
            value = converted
        kwargs[key] = value
    for key, (value, _) in OUR_DEFAULTS.items():
        kwargs.setdefault(key, value)
    return kwargs, notes, passed


def effective_rows(
    training: dict, passed: dict[str, str], installed: Version | None = None, origins: dict[str, str] | None = None
) -> list[tuple[str, object, str]]:
    """(key, value, where it came from) for the recipe's keys, ours, and each key whose TRL default moved.

    Values are canonical (the newest TRL's vocabulary); the origin says how a translated key was passed, and
    ``origins`` names where a recipe key came from other than the recipe itself (``algorithm: dapo``).
    """
    origins = origins or {}
    v = installed or trl_version()
    table = fields(v)
    rows = []
    for key in dict.fromkeys([*training, *OUR_DEFAULTS, *MOVED_DEFAULTS]):
        if key in training:
            came = origins.get(key, "recipe")
            rows.append((key, canonical(key, training[key]), came + (f"; {passed[key]}" if key in passed else "")))
        elif key in OUR_DEFAULTS:
            rows.append((key, OUR_DEFAULTS[key][0], f"grpo_ext default ({OUR_DEFAULTS[key][1]})"))
        elif key in table and has_key(key, v):
            rows.append((key, canonical(key, table[key]["default"]), f"trl default (trl {table_for(v)['trl']} table)"))
        else:
            rows.append((key, None, f"not in trl {v}"))
    return rows


def reward_params(fn) -> frozenset[str] | None:
    """The keyword names a reward accepts, or None when it takes ``**kwargs`` (it then gets them all).

    TRL passes different keywords by version (completion_ids from 0.18, trainer_state from 0.20,
    log_extra and log_metric from 1.0); a reward that names only what it uses works on all of them.
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )


# Keywords TRL itself passes to a reward on some supported version; any other keyword is a dataset column.
TRL_REWARD_KWARGS = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"})


def required_columns(fn) -> tuple[str, ...]:
    """The dataset columns a reward's signature requires: the keywords without a default that TRL does not pass
    itself (a reward may declare others: ``rewards/api.py``).

    >>> def graded(completions, answer, unit="", **kwargs): ...
    >>> required_columns(graded)
    ('answer',)
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(
        p.name for p in params if p.kind in named and p.default is inspect.Parameter.empty and p.name not in TRL_REWARD_KWARGS
    )


def reward_kwargs(accepted: frozenset[str] | None, kwargs: dict) -> dict:
    """The keywords of a reward call that the reward accepts (see reward_params)."""
    return kwargs if accepted is None else {k: v for k, v in kwargs.items() if k in accepted}


def unwrap_kwargs(unwrap, gradient_checkpointing_kwargs) -> dict:
    """The keywords beyond the model, the accelerator and ``gather_deepspeed3_params`` to pass to TRL's
    ``unwrap_model_for_generation`` (``unwrap``) as its GRPOTrainer does: on TRL 1.16 it turns gradient checkpointing off
    while generating and back on with the ``gradient_checkpointing_kwargs`` it is given (transformers' defaults
    without them), so it gets the run's; 0.19.1 has no such keyword and leaves gradient checkpointing alone.

    >>> def old(model, accelerator, gather_deepspeed3_params=True): ...
    >>> def new(model, accelerator, gather_deepspeed3_params=True, gradient_checkpointing_kwargs=None): ...
    >>> unwrap_kwargs(old, {"use_reentrant": False}), unwrap_kwargs(new, {"use_reentrant": False})
    ({}, {'gradient_checkpointing_kwargs': {'use_reentrant': False}})
    """
    takes = "gradient_checkpointing_kwargs" in inspect.signature(unwrap).parameters
    return {"gradient_checkpointing_kwargs": gradient_checkpointing_kwargs} if takes else {}
