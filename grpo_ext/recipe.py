"""Recipes: load a YAML file (or a shipped recipe by name), apply ``key=value`` overrides, validate.

Everything here is plain Python and PyYAML: a recipe is checked completely, all problems reported at
once with their key paths, before torch, transformers or trl is imported. The ``training:`` section
holds GRPOConfig keys under TRL's own names; ``compat`` checks and translates them for the installed TRL.
"""

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from grpo_ext import (
    adapters,
    algorithms,
    batch_rules,
    catalog,
    compat,
    datafiles,
    generators,
    model_source,
    output_dir,
    rewards,
    trackers,
)
from grpo_ext.base import (
    YAMLRefused,
    clip,
    coerce,
    describe_kinds,
    duplicate_keys,
    exists,
    kind_of,
    load_yaml,
    plural,
    resolve_path,
    shown,
    suggest,
)
from grpo_ext.errors import RecipeError
from grpo_ext.rewards.guard import ON_ERROR, missing_columns

MAX_RECIPE_BYTES = 1_000_000


@dataclass(frozen=True)
class Spec:
    """One recipe key: the YAML kinds it accepts, its default, and (optionally) the values allowed."""

    kinds: tuple[str, ...]
    default: object = None
    choices: tuple | None = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    doc: str = ""


SCHEMA: dict[str, dict[str, Spec]] = {
    "model": {
        "name": Spec(("str",), required=True, doc="catalog alias, hub id, local directory or .gguf file"),
        "dtype": Spec(
            ("str",),
            "auto",
            ("auto", "float32", "bfloat16", "float16"),
            doc="weights dtype; auto: float32 on CPU, bf16 on a GPU that has it",
        ),
        "trust_remote_code": Spec(("bool",), False, doc="run model code from the hub repository (off unless you trust it)"),
        "revision": Spec(("str", "null"), None, doc="hub branch, tag or commit"),
        "lora": Spec(
            ("dict", "bool", "null"),
            None,
            doc="peft LoraConfig keys (r, lora_alpha, target_modules, ...); true: r=16, alpha=32, all-linear",
        ),
        "quantization": Spec(
            ("str", "null"),
            None,
            ("4bit", "8bit", None),
            doc="load the base in 4-bit NF4 (QLoRA) or 8-bit with bitsandbytes; needs lora",
        ),
    },
    "data": {
        "prompts": Spec(("list", "null"), None, doc="training prompts, one string each"),
        "file": Spec(
            ("str", "null"),
            None,
            doc=".jsonl, .json, .csv, .parquet or a save_to_disk folder with a prompt column (relative to the recipe)",
        ),
        "prompt_column": Spec(("str",), "prompt", doc="column holding each prompt: text or a list of chat messages"),
        "prompt_template": Spec(
            ("str", "null"), None, doc="build each prompt from columns instead: 'Question: {question}\\nAnswer:'"
        ),
        "system_prompt": Spec(("str", "null"), None, doc="system message put before every prompt in chat format"),
        "chat": Spec(
            ("str", "bool"),
            "auto",
            ("auto", True, False),
            doc="format prompts as chat messages; auto: when the tokenizer has a chat template",
        ),
        "eval_prompts": Spec(
            ("list", "null"), None, doc="held-out prompts scored before and after training: strings or {prompt: ..., answer: ...}"
        ),
        "eval_file": Spec(("str", "null"), None, doc="held-out rows from a file (same formats as file)"),
        "source": Spec(("str", "null"), None, doc="a built-in generator of prompts with answers: arith"),
        "source_args": Spec(("dict",), {}, doc="keyword arguments for the generator"),
        "hub": Spec(("str", "null"), None, doc="a Hugging Face Hub dataset id (org/name)"),
        "hub_config": Spec(("str", "null"), None, doc="the hub dataset's configuration name"),
        "hub_split": Spec(("str",), "train", doc="split to train on, of a hub dataset or a saved DatasetDict"),
        "eval_split": Spec(("str", "null"), None, doc="held-out split of the hub dataset or the saved DatasetDict"),
        "eval_size": Spec(
            ("int", "null"),
            None,
            minimum=1,
            doc="eval rows: the first N of eval_file/eval_split; without them, N training rows held out; null: all",
        ),
        "eval_fraction": Spec(("float", "null"), None, doc="hold out this share (0 to 1) of the training rows for eval"),
    },
    "eval": {
        "enabled": Spec(("bool",), True, doc="score eval_prompts before and after training"),
        "samples": Spec(("int",), 8, minimum=1, doc="completions sampled per eval prompt"),
        "temperature": Spec(("float", "null"), None, minimum=0, doc="sampling temperature; null: training.temperature"),
        "max_new_tokens": Spec(("int", "null"), None, minimum=1, doc="null: training.max_completion_length"),
        "pass_threshold": Spec(("float",), 1.0, doc="a sample passes a reward when its score is at least this"),
        "batch_size": Spec(("int",), 64, minimum=1, doc="sequences generated at once"),
        "pass_at": Spec(("list", "null"), None, doc="k values for pass@k, each from 1 to samples; null: 1 and samples"),
    },
    "health": {  # training health (grpo_ext/health.py); thresholds calibrated on recipes/digit.yaml, see README
        "preflight": Spec(
            ("str", "bool"),
            "warn",
            ("warn", "fail", "off", False),
            doc="score the base model's samples before step 1; fail: stop on a warning; off (YAML reads it as false): skip",
        ),
        "preflight_prompts": Spec(
            ("int",), 8, minimum=1, doc="training prompts sampled (num_generations each) by the pre-flight"
        ),
        "on_problem": Spec(
            ("str",), "warn", ("warn", "stop"), doc="a watchdog finding: warn, or stop (checkpoint saved, exit 1)"
        ),
        "zero_std_share": Spec(
            ("float",), 0.9, minimum=0, doc="share of groups with zero reward spread that counts as no signal"
        ),
        "no_signal_steps": Spec(("int",), 6, minimum=1, doc="steps in a row without signal before the watchdog says so"),
        # 3: a weak base model's first replies may all be ones a reward cannot parse; three steps in a row is the reward
        "unscored_steps": Spec(
            ("int",), 3, minimum=1, doc="steps in a row where every reward returned None for every sample (on_error: skip)"
        ),
        "flat_steps": Spec(("int",), 8, minimum=2, doc="window (steps) for a flat reward and for KL growth"),
        "flat_reward": Spec(("float",), 0.05, minimum=0, doc="the reward's range over flat_steps below which it counts as flat"),
        "entropy_floor": Spec(("float",), 0.05, minimum=0, doc="mean token entropy (nats) below which exploration has collapsed"),
        "clipped_share": Spec(
            ("float",),
            0.9,
            minimum=0,
            doc="mean share of completions cut at max_completion_length, over clipped_steps, that counts as pinned",
        ),
        "clipped_steps": Spec(("int",), 8, minimum=1, doc="window (steps) over which the cut share is averaged"),
        "kl_max": Spec(("float",), 1.0, minimum=0, doc="median KL over flat_steps above which KL has blown up"),
        "kl_growth": Spec(
            ("float",), 4.0, minimum=1, doc="median KL over flat_steps growing by this factor counts as rising fast"
        ),
        "length_growth": Spec(
            ("float",), 2.0, minimum=1, doc="mean completion length growing by this factor while the reward rises"
        ),
        "scale_ratio": Spec(
            ("float",), 10.0, minimum=1, doc="rewards whose spreads differ by this factor are on different scales"
        ),
    },
    "explore": {  # sampling help for the first steps (grpo_ext/explore.py); README: The digit recipe across seeds
        "end_boost": Spec(
            ("float", "null"),
            None,
            minimum=1.0,
            doc="while training samples, multiply the end-of-reply score by this per token after start; null: off",
        ),
        "start": Spec(("int",), 1, minimum=0, doc="tokens of the reply before the end boost begins"),
        "steps": Spec(("int",), 8, minimum=1, doc="first steps sampled with the boost; the later ones sample as the eval does"),
    },
    "reward": {
        "name": Spec(("str",), required=True, doc="registry name, module:function, file.py:function or entry point"),
        "weight": Spec(("float",), 1.0, doc="weight in the summed reward (TRL reward_weights)"),
        "args": Spec(("dict",), {}, doc="keyword arguments for a reward factory"),
        "on_error": Spec(("str",), "fail", ON_ERROR, doc="a raising reward: fail stops the run; skip scores that sample None"),
        "pass_threshold": Spec(
            ("float", "null"), None, doc="an eval sample passes this reward at this score; null: the reward's own, else eval's"
        ),
        "timeout": Spec(
            ("float", "null"), 120.0, minimum=0.1, doc="seconds one call may take before the run stops; null: no limit"
        ),
    },
}

TOP_LEVEL: dict[str, Spec] = {
    "model": Spec(("dict",), required=True),
    "data": Spec(("dict",), required=True),
    "rewards": Spec(("list",), required=True),
    "training": Spec(("dict",), {}),
    "algorithm": Spec(("str", "null"), None),  # a GRPO variant (grpo-ext algorithms): fills training keys the recipe leaves out
    "eval": Spec(("dict",), {}),
    "health": Spec(("dict",), {}),
    "explore": Spec(("dict",), {}),
    "output_dir": Spec(("str",), required=True),
    "seed": Spec(("int",), 0, minimum=0, maximum=2**32 - 1),  # the seeds numpy (and so TRL's set_seed) takes
    "resume": Spec(("bool", "str"), False, (False, True, "auto")),
}


@dataclass
class Recipe:
    """A validated recipe: ``data`` holds every section with defaults filled in."""

    data: dict
    path: Path | None
    base_dir: Path
    given: dict = field(default_factory=dict)  # the recipe as written, after overrides
    resolved: list = field(default_factory=list)  # rewards[i] found and checked (rewards.registry.Resolved), in order
    origins: dict = field(default_factory=dict)  # training key -> where `algorithm:` put it, or that the recipe overrode it
    columns: dict = field(default_factory=dict)  # stage -> (its rows' columns, the rows named), for a reward built later
    reward_names: list = field(default_factory=list)  # each reward's metric name; a user's factory: how the recipe calls it
    _funcs: list | None = field(default=None, repr=False)  # the guarded rewards, once built

    @property
    def reward_funcs(self) -> list:
        """rewards[i] built and guarded, in order, named uniquely (see ``build_rewards``)."""
        return self.build_rewards()

    def build_rewards(self) -> list:
        """The guarded rewards. A user's reward factory runs here, the first time a run needs the rewards, never
        while the recipe is validated; RecipeError (each problem's key path) if it refuses its args or returns a
        reward that needs a column the rows lack. ``train`` calls it before it touches output_dir."""
        if self._funcs is None:
            problems: list[str] = []
            funcs = _guarded_rewards(self.data["rewards"], self.resolved, self.columns, problems, build=True)
            if problems:
                raise RecipeError(problems, str(self.path) if self.path else None)
            self._funcs = funcs
        return self._funcs

    @property
    def weights(self) -> list[float]:
        """rewards[i].weight, in order: TRL's reward_weights."""
        return [entry["weight"] for entry in self.data["rewards"]]

    def __getitem__(self, key):
        return self.data[key]

    def portable(self) -> dict:
        """The checked recipe with every path in it absolute (model directory or .gguf file, data.file, reward
        files), so that a copy read from anywhere (the run directory's recipe.yaml) means the same."""
        data = copy.deepcopy(self.data)
        data["model"]["name"] = absolute_path(["model", "name"], data["model"]["name"], self.base_dir)
        for key in ("file", "eval_file"):
            data["data"][key] = absolute_path(["data", key], data["data"].get(key), self.base_dir)
        for i, entry in enumerate(data["rewards"]):
            entry["name"] = absolute_path(["rewards", str(i), "name"], entry["name"], self.base_dir)
        return data

    def to_yaml(self) -> str:
        """The recipe as a run records it (``portable``): YAML that any verb can read back from the run directory."""
        return yaml.safe_dump(self.portable(), sort_keys=False, allow_unicode=True)


# Keys a resumed run may change without changing what the run means: how it is evaluated, logged and saved.
RESUME_MAY_CHANGE = (
    "eval",
    "health",
    "resume",
    "output_dir",
    "training.logging_steps",
    "training.report_to",
    "training.save_strategy",
    "training.save_steps",
    "training.save_total_limit",
    "training.disable_tqdm",
)


def _flatten(value, path: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _flatten(item, f"{path}.{key}" if path else str(key)).items()}
    return {path: value}


def changed_keys(before: dict, after: dict) -> list[str]:
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


def locate(ref: str) -> Path:
    """A recipe path, or a shipped recipe's name (``digit``)."""
    path = Path(ref).expanduser()
    if exists(path, "file"):
        return path
    shipped = catalog.shipped_recipes()
    if ref in shipped:
        return shipped[ref]
    if path.suffix in (".yaml", ".yml") or "/" in ref:
        raise RecipeError(f"recipe file {ref!r} does not exist; shipped recipes: {', '.join(shipped) or 'none'}")
    raise RecipeError(f"no recipe file or shipped recipe named {ref!r}{suggest(ref, shipped)}")


def read_yaml(path: Path) -> dict:
    if path.stat().st_size > MAX_RECIPE_BYTES:
        raise RecipeError(f"recipe file is {path.stat().st_size} bytes; a recipe is at most {MAX_RECIPE_BYTES}", str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"recipe is not UTF-8 text ({exc.reason} at byte {exc.start})", str(path)) from None
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        what = "" if isinstance(exc, YAMLRefused) else "YAML syntax error at "  # well-formed, but past a bound
        raise RecipeError(f"{what}{where}{problem}", str(path)) from None
    if not isinstance(doc, dict):
        raise RecipeError(
            f"a recipe is a mapping of sections (model, data, rewards, training, ...), not {kind_of(doc)}", str(path)
        )
    twice = duplicate_keys(text)
    if twice:
        raise RecipeError(twice, str(path))
    return doc


def parse_override(text: str) -> tuple[list[str], object]:
    """``training.learning_rate=1e-5`` → (['training', 'learning_rate'], 1e-05). Values are read as YAML;
    a key part of digits indexes a list (``rewards.1.weight``) and names a key anywhere else."""
    key, sep, raw = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise RecipeError(f"override {shown(text)} must look like section.key=value (e.g. training.max_steps=5)")
    try:
        value = load_yaml(raw) if raw.strip() else None
    except YAMLRefused as exc:
        raise RecipeError(f"override {shown(text)}: {exc.problem}") from None
    except yaml.YAMLError:  # not YAML: the text as it is (a path, a name with a colon)
        value = raw
    return key.split("."), value


def _child(node, key):
    """``node[key]`` of a mapping or a list, or None where there is none."""
    if isinstance(node, dict):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and key < len(node):
        return node[key]
    return None


def absolute_path(keys: list, value, base_dir: Path):
    """The value of a recipe key, with a path in it made absolute against ``base_dir``; other values as they are.

    The keys that hold paths: data.file, data.eval_file, model.name (a local folder or .gguf file) and a reward's
    file.py:name.
    """
    if not isinstance(value, str) or not value:
        return value
    where = [str(k) for k in keys]
    if where in (["data", "file"], ["data", "eval_file"]):
        return str(resolve_path(value, base_dir).resolve())
    if where == ["model", "name"]:
        local = model_source.resolve(value, base_dir).kind in ("local", "gguf")
        return str(resolve_path(value, base_dir).resolve()) if local else value
    if where[0] == "rewards" and (len(where) == 2 or where[2:] == ["name"]):  # rewards.0 or rewards.0.name
        target, sep, attr = value.rpartition(":")
        if sep and target.endswith(".py"):
            return f"{resolve_path(target, base_dir).resolve()}:{attr}"
    return value


def apply_overrides(doc: dict, overrides: list[str]) -> dict:
    """The recipe with each ``key=value`` applied; paths in them are taken from the working directory."""
    doc = copy.deepcopy(doc)
    for text in overrides:
        keys, value = parse_override(text)
        value = absolute_path(keys, value, Path.cwd())  # an override's path is from where it was typed
        node = doc
        for depth, key in enumerate(keys[:-1]):
            if isinstance(node, list):
                key = int(key) if key.isdigit() else key
            nxt = _child(node, key)
            if nxt is None:
                if not isinstance(node, dict):
                    size = f" (the list has {len(node)} items)" if isinstance(node, list) else ""
                    raise RecipeError(f"override {text!r}: {'.'.join(map(str, keys[: depth + 1]))} does not exist{size}")
                nxt = node[key] = {}
            if keys[0] == "rewards" and depth == 1 and isinstance(nxt, str):
                nxt = node[key] = {"name": nxt}  # a reward given by bare name gains a mapping to override
            if not isinstance(nxt, (dict, list)):
                raise RecipeError(f"override {text!r}: {'.'.join(map(str, keys[: depth + 1]))} is {kind_of(nxt)}, not a section")
            node = nxt
        last = keys[-1]
        if isinstance(node, list):
            last = int(last) if last.isdigit() else last
            if not isinstance(last, int) or last >= len(node):
                raise RecipeError(f"override {text!r}: index {last} is out of range (the list has {len(node)} items)")
        node[last] = value
    return doc


def _check_section(section: dict, schema: dict[str, Spec], path: str, problems: list[str]) -> dict:
    """Fill defaults and check kinds, choices and minimums; unknown keys get a suggestion."""
    out = {}
    for key, value in section.items():
        where = f"{path}.{clip(str(key))}" if path else clip(str(key))
        if key not in schema:
            problems.append(f"{where}: unknown key{suggest(str(key), schema)}")
            continue
        spec = schema[key]
        value, ok = coerce(value, spec.kinds)
        if not ok:
            problems.append(f"{where}: expected {describe_kinds(spec.kinds)}, got {kind_of(value)} {shown(value)}")
            continue
        if spec.choices is not None and value not in spec.choices:
            problems.append(f"{where}: {shown(value)} is not one of {', '.join(map(repr, spec.choices))}")
            continue
        if spec.minimum is not None and isinstance(value, (int, float)) and value < spec.minimum:
            problems.append(f"{where}: must be at least {spec.minimum}, got {shown(value)}")
            continue
        if spec.maximum is not None and isinstance(value, (int, float)) and value > spec.maximum:
            problems.append(f"{where}: must be at most {spec.maximum}, got {shown(value)}")
            continue
        out[key] = value
    for key, spec in schema.items():
        if key not in section:
            if spec.required:
                problems.append(f"{f'{path}.' if path else ''}{key}: missing; {spec.doc or 'required'}")
            else:
                out[key] = copy.deepcopy(spec.default)
    return out


def _check_prompts(value, path: str, problems: list[str], mappings: bool = False) -> None:
    """Prompts are non-empty strings; eval prompts may also be mappings with a ``prompt`` and reward columns."""
    if value is None:
        return
    if not value:
        problems.append(f"{path}: is empty; give at least one prompt")
    for i, p in enumerate(value):
        if mappings and isinstance(p, dict):
            if not isinstance(p.get("prompt"), str) or not p["prompt"].strip():
                problems.append(f"{path}[{i}]: a mapping needs a non-empty prompt string, e.g. {{prompt: '2+3?', answer: '5'}}")
            elif set(p) != set(value[0] if isinstance(value[0], dict) else {"prompt"}):
                first = ", ".join(value[0])
                problems.append(f"{path}[{i}]: has columns {', '.join(p)}, the first has {first}; give each the same columns")
        elif not isinstance(p, str) or not p.strip():
            form = "a non-empty string or a mapping {prompt: ..., answer: ...}" if mappings else "a non-empty string"
            problems.append(f"{path}[{i}]: each prompt is {form}, got {kind_of(p)} {shown(p, 40)}")


def _check_rewards(value: list, problems: list[str]) -> list[dict]:
    out = []
    if not value:
        problems.append("rewards: is empty; name at least one reward (see `grpo-ext rewards`)")
    for i, entry in enumerate(value):
        where = f"rewards[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            problems.append(f"{where}: a reward is a name or a mapping with name, weight, args; got {kind_of(entry)}")
            continue
        out.append(_check_section(entry, SCHEMA["reward"], where, problems))
    return out


def _check_pass_at(ev: dict, problems: list[str]) -> None:
    """eval.pass_at: whole numbers from 1 to eval.samples (pass@k needs k of the samples); null means 1 and samples."""
    ks, samples = ev.get("pass_at"), ev.get("samples")
    if ks is None or not isinstance(samples, int):
        return
    bad = [k for k in ks if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= samples]
    if bad or not ks:
        problems.append(f"eval.pass_at: {shown(ks)}: give whole numbers from 1 to eval.samples ({samples}), e.g. [1, {samples}]")


TRAIN_SOURCES = ("prompts", "file", "source", "hub")
EVAL_SOURCES = ("eval_prompts", "eval_file", "eval_split")  # and rows held out of the training rows


def _check_sources(d: dict, given: dict, eval_enabled: bool, base_dir: Path) -> list[str]:
    """Exactly one source of training rows and at most one of eval rows, each usable."""
    problems = []
    _check_prompts(d.get("prompts"), "data.prompts", problems)
    _check_prompts(d.get("eval_prompts"), "data.eval_prompts", problems, mappings=True)
    if d.get("prompt_template") is not None:
        try:
            datafiles.template_fields(d["prompt_template"])
        except ValueError as exc:
            problems.append(f"data.prompt_template: {exc}")
        column = SCHEMA["data"]["prompt_column"].default  # the template's text lands in this column
        if given.get("prompt_column", column) != column:  # so a recorded recipe, which names it, still validates
            problems.append("data: prompt_template and prompt_column are both given; the template names its columns")
    sources = [k for k in TRAIN_SOURCES if d.get(k) is not None]
    if len(sources) > 1:
        problems.append(f"data: {' and '.join(sources)} are all given; keep one source of training prompts")
    if not sources and all(k in d for k in TRAIN_SOURCES):  # each passed its own check
        problems.append(
            f"data: give prompts (a list of strings), file ({datafiles.FORMATS}), source (a generator: arith) "
            "or hub (a dataset id)"
        )
    for key in ("file", "eval_file"):
        if d.get(key) is not None:
            problem = datafiles.check_path(resolve_path(d[key], base_dir), f"data.{key}")
            problems.extend([problem] if problem else [])
    if isinstance(d.get("hub"), str) and d["hub"].count("/") != 1:
        problems.append(f"data.hub: {d['hub']!r} is not a dataset id; give org/name, e.g. openai/gsm8k")
    if d.get("source") is not None:
        problems.extend(generators.check_source(d["source"], d.get("source_args", {})))
    fraction = d.get("eval_fraction")
    if fraction is not None and not 0 < fraction < 1:
        problems.append(f"data.eval_fraction: {fraction} is not between 0 and 1; e.g. 0.1 holds out a tenth of the rows")
    if fraction is not None and d.get("eval_size") is not None:
        problems.append("data: eval_fraction and eval_size are both given; hold out a share or a number of rows")
    holds_out = datafiles.holds_out(d)
    key = "eval_fraction" if fraction is not None else "eval_size"
    eval_sources = [k for k in EVAL_SOURCES if d.get(k) is not None] + ([key] if holds_out else [])
    if len(eval_sources) > 1:
        problems.append(f"data: {' and '.join(eval_sources)} are all given; keep one source of eval rows")
    if holds_out and not (d.get("file") or d.get("hub")):
        instead = "the generator keeps its own held-out rows" if d.get("source") else "give eval_prompts instead"
        problems.append(f"data.{key}: holds out rows of data.file or data.hub only; {instead}")
    if d.get("eval_split") is not None and not d.get("hub"):
        file = resolve_path(d["file"], base_dir) if d.get("file") else None
        if file is None or not file.exists() or datafiles.splits(file) is None:
            problems.append(
                "data.eval_split: names a split of data.hub or of a saved DatasetDict in data.file; for a file use eval_file"
            )
    if eval_enabled and not (eval_sources or holds_out or d.get("source") is not None):
        problems.append(
            "data.eval_prompts: missing; give eval_prompts, eval_file, eval_split or eval_fraction, or set eval.enabled: false"
        )
    return problems


def held_out_size(d: dict, rows: int) -> tuple[int, str]:
    """(training rows held out for eval, the key that says how many): data.eval_size, else its eval_fraction share."""
    if d["eval_size"] is not None:
        return d["eval_size"], "eval_size"
    return round(d["eval_fraction"] * rows), "eval_fraction"


def _prompts_per_step(value) -> tuple[int, int, int] | None:
    """(prompts, completions, group) of one generation batch on one process, completions in groups of
    num_generations, each group from one prompt. None when the batch settings are wrong (batch_rules says so)."""
    group, completions = value("num_generations"), batch_rules.generation_batch(value)
    if not (isinstance(group, int) and not isinstance(group, bool) and group > 0) or completions is None or completions % group:
        return None
    return completions // group, completions, group


def _check_hold_out(d: dict, value, base_dir: Path) -> list[str]:
    """Rows held out of data.file must leave at least one generation batch of prompts to train on (a hub dataset's
    rows are counted when it loads)."""
    batch = _prompts_per_step(value)
    if not datafiles.holds_out(d) or not d.get("file") or batch is None:
        return []
    try:
        path = datafiles.split_path(resolve_path(d["file"], base_dir), d["hub_split"], "data.hub_split")
        rows = sum(1 for _ in datafiles.rows(path, "data.file"))
    except RecipeError:  # a file that cannot be read: its own check (train.check_data) names the row
        return []
    size, key = held_out_size(d, rows)
    prompts, completions, group = batch
    if size < 1:
        return [f"data.{key}: holds out {size} of {plural(rows, 'training row')}; hold out at least one"]
    if rows - size >= prompts:
        return []
    fix = f"hold out at most {rows - prompts}" if rows > prompts else "give more rows"
    return [
        f"data.{key}: holds out {size} of {plural(rows, 'training row')}, leaving {rows - size}; a step samples "
        f"{plural(prompts, 'prompt')} ({completions} completions, {group} per prompt); {fix}, or give eval_prompts or "
        "eval_file instead"
    ]


def _check_data(d: dict, given: dict, eval_enabled: bool, base_dir: Path, problems: list[str]) -> dict[str, tuple]:
    """The data section's sources (see _check_sources), then the columns each source's rows reach the rewards
    with: {"train": (columns, source named), "eval": (...)}; columns are None where only loading tells (hub)."""
    if set(given) - set(SCHEMA["data"]):  # a misspelt key, already a problem: rules on what it meant would mislead
        return {}
    found = _check_sources(d, given, eval_enabled, base_dir)
    problems.extend(found)
    if found:
        return {}

    def file_columns(key: str, split: tuple[str, str | None]) -> list[str] | None:
        path = resolve_path(d[key], base_dir)
        try:
            path = datafiles.split_path(path, split[1], split[0])
            cols = datafiles.columns(path, f"data.{key}")
            datafiles.prompt_rule(cols, d, f"data.{key} {path.name}")
        except RecipeError as exc:
            problems.extend(exc.problems)
            return None
        return _renamed_columns(cols, d)

    train: list[str] | None = ["prompt"]
    named = "data.prompts"
    if d.get("file"):
        train, named = file_columns("file", ("data.hub_split", d["hub_split"])), f"data.file {Path(d['file']).name}"
    elif d.get("source"):
        train, named = list(generators.generated(d)[0][0]), f"data.source {d['source']}"
    elif d.get("hub"):
        train, named = None, f"data.hub {d['hub']}"
    evaluation, eval_named = train, named  # rows held out of the training rows
    if d.get("eval_prompts") is not None:
        first = d["eval_prompts"][0]
        evaluation, eval_named = (list(first) if isinstance(first, dict) else ["prompt"]), "data.eval_prompts"
    elif d.get("eval_file"):
        eval_named = f"data.eval_file {Path(d['eval_file']).name}"
        evaluation = file_columns("eval_file", ("data.eval_file", None))
    elif d.get("eval_split"):
        eval_named = f"data.eval_split {d['eval_split']}"
        evaluation = file_columns("file", ("data.eval_split", d["eval_split"])) if d.get("file") else None
    elif d.get("source"):
        held_out = generators.generated(d)[1]
        evaluation = list(held_out[0]) if held_out else ["prompt"]
    held_out = evaluation is train  # the same columns: checked once, as the training rows
    return {"training": (train, named), "eval": (None if held_out or not eval_enabled else evaluation, eval_named)}


def _renamed_columns(cols: list[str], d: dict) -> list[str]:
    """The columns rows reach the rewards with: the prompt column is renamed ``prompt``; a template keeps all."""
    if d.get("prompt_template") or d["prompt_column"] not in cols:
        return [*cols, "prompt"]
    return [c for c in cols if c != d["prompt_column"]] + ["prompt"]


def _build_rewards(entries: list[dict], base_dir: Path, problems: list[str]) -> list:
    """Each reward found by its name and its args checked against the signature (rewards.registry.resolve): the
    registry's rewards are built, a user's factory is not called (Recipe.build_rewards calls it)."""
    resolved = []
    for i, entry in enumerate(entries):
        if set(SCHEMA["reward"]) - set(entry):  # one of its keys failed its own check
            continue
        try:
            resolved.append(rewards.resolve(entry["name"], entry["args"], base_dir, f"rewards[{i}]"))
        except RecipeError as exc:
            problems.extend(exc.problems)
    return resolved if len(resolved) == len(entries) else []


def _guarded_rewards(entries: list[dict], resolved: list, columns: dict, problems: list[str], *, build: bool) -> list:
    """The rewards guarded under unique metric names, and a problem for each dataset column one of them needs that
    its rows lack. A user's factory is called only with ``build``; without, its place holds None, checked later."""
    if len(resolved) != len(entries):  # a reward that failed its own check is already a problem
        return []
    funcs = []
    for r in resolved:
        try:
            funcs.append(r.build() if build or not r.deferred else None)
        except RecipeError as exc:
            problems.extend(exc.problems)
            funcs.append(None)
    guarded = rewards.guard_all(entries, funcs)
    for stage, (cols, named) in columns.items():
        if cols is not None:
            problems.extend(missing_columns(guarded, cols, f"the {stage} rows ({named})"))
    return guarded


def validate(doc: dict, path: Path | None = None) -> Recipe:
    """Check a recipe mapping; return a Recipe or raise RecipeError listing every problem.

    Every rule a run depends on is here, so ``grpo-ext validate``, ``--dry-run`` and training accept
    and refuse the same recipes.
    """
    problems: list[str] = []
    source = str(path) if path else None
    base_dir = path.parent if path else Path.cwd()
    top = _check_section(doc, TOP_LEVEL, "", problems)

    def section(name: str) -> dict | None:  # a section that failed its own check (or is missing) is skipped below
        return _check_section(top[name], SCHEMA[name], name, problems) if name in top else None

    model, data, evaluation, health = section("model"), section("data"), section("eval"), section("health")
    explore = section("explore")
    entries = _check_rewards(top["rewards"], problems) if "rewards" in top else []
    training = dict(top["training"]) if "training" in top else None
    columns = {}
    origins: dict[str, str] = {}
    if training is not None and top.get("algorithm") is not None:
        training, origins, preset_problems = algorithms.expand(top["algorithm"], training)
        problems.extend(preset_problems)
    if data is not None:
        columns = _check_data(data, top["data"], bool((evaluation or {}).get("enabled")), base_dir, problems)
    if evaluation is not None:
        _check_pass_at(evaluation, problems)
    if isinstance(top.get("output_dir"), str):
        problem = output_dir.check(top["output_dir"], path)
        problems.extend([problem] if problem else [])
    if model is not None and isinstance(model.get("name"), str):
        problems.extend(model_source.check(model["name"], base_dir))
    if training is not None:
        if "reward_weights" in training:
            problems.append("training.reward_weights: set each reward's weight in rewards[i].weight instead")
        problems.extend(compat.check_training(training))
        problems.extend(trackers.check_report_to(training))
        problems.extend(adapters.check(model or {}, training))
        problems.extend(batch_rules.check_explore(explore or {}, lambda key: compat.effective(training, key)))
        if columns and (evaluation or {}).get("enabled"):  # the data section passed its own checks; rows are held out with eval
            problems.extend(_check_hold_out(data, lambda key: compat.effective(training, key), base_dir))
    resolved = _build_rewards(entries, base_dir, problems)
    built = _guarded_rewards(entries, resolved, columns, problems, build=False)
    if problems:
        raise RecipeError(problems, source)
    checked = {"model": model, "data": data, "rewards": entries, "training": training, "eval": evaluation, "health": health}
    checked["explore"] = explore
    checked.update((key, top[key]) for key in ("output_dir", "seed", "resume"))
    if top.get("algorithm") is not None:
        checked["algorithm"] = top["algorithm"]
    names = [f.__name__ if f is not None else f"{r.name}({_call_args(r.args)})" for r, f in zip(resolved, built, strict=True)]
    return Recipe(
        data=checked,
        path=path,
        base_dir=base_dir,
        given=doc,
        resolved=resolved,
        origins=origins,
        columns=columns,
        reward_names=names,
        _funcs=None if None in built else built,
    )


def _call_args(args: dict) -> str:
    """``n=3, column='answer'``: a factory's arguments as a call shows them."""
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def load(ref: str, overrides: list[str] | None = None) -> Recipe:
    """Locate, read, override and validate a recipe."""
    path = locate(ref)
    doc = read_yaml(path)
    return validate(apply_overrides(doc, overrides or []), path)
