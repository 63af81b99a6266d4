"""Recipes: load a YAML file (or a shipped recipe by name), apply ``key=value`` overrides, validate.

Everything here is plain Python and PyYAML: a recipe is checked completely, all problems reported at
once with their key paths, before torch, transformers or trl is imported. The ``training:`` section
holds GRPOConfig keys under TRL's own names; ``compat`` checks and translates them for the installed TRL.
"""

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from grpo_ext import adapters, algorithms, catalog, compat, generators, model_source, rewards, trackers
from grpo_ext.base import clip, coerce, describe_kinds, duplicate_keys, exists, kind_of, resolve_path, shown, suggest
from grpo_ext.errors import RecipeError
from grpo_ext.rewards.guard import ON_ERROR

MAX_RECIPE_BYTES = 1_000_000


@dataclass(frozen=True)
class Spec:
    """One recipe key: the YAML kinds it accepts, its default, and (optionally) the values allowed."""

    kinds: tuple[str, ...]
    default: object = None
    choices: tuple | None = None
    required: bool = False
    minimum: float | None = None
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
        "file": Spec(("str", "null"), None, doc=".jsonl, .json or .csv file with a prompt column (relative to the recipe)"),
        "prompt_column": Spec(("str",), "prompt", doc="column of `file` holding the prompt text"),
        "system_prompt": Spec(("str", "null"), None, doc="system message put before every prompt in chat format"),
        "chat": Spec(
            ("str", "bool"),
            "auto",
            ("auto", True, False),
            doc="format prompts as chat messages; auto: when the tokenizer has a chat template",
        ),
        "eval_prompts": Spec(("list", "null"), None, doc="held-out prompts scored before and after training"),
        "source": Spec(("str", "null"), None, doc="a built-in generator of prompts with answers: arith"),
        "source_args": Spec(("dict",), {}, doc="keyword arguments for the generator"),
        "hub": Spec(("str", "null"), None, doc="a Hugging Face Hub dataset id (org/name)"),
        "hub_config": Spec(("str", "null"), None, doc="the hub dataset's configuration name"),
        "hub_split": Spec(("str",), "train", doc="hub split to train on"),
        "eval_split": Spec(("str", "null"), None, doc="hub split whose first eval_size rows are the eval set"),
        "eval_size": Spec(("int",), 64, minimum=1, doc="rows of eval_split to score"),
    },
    "eval": {
        "enabled": Spec(("bool",), True, doc="score eval_prompts before and after training"),
        "samples": Spec(("int",), 8, minimum=1, doc="completions sampled per eval prompt"),
        "temperature": Spec(("float", "null"), None, minimum=0, doc="sampling temperature; null: training.temperature"),
        "max_new_tokens": Spec(("int", "null"), None, minimum=1, doc="null: training.max_completion_length"),
        "pass_threshold": Spec(("float",), 1.0, doc="a sample passes a reward when its score is at least this"),
        "batch_size": Spec(("int",), 64, minimum=1, doc="sequences generated at once"),
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
    "output_dir": Spec(("str",), required=True),
    "seed": Spec(("int",), 0),
    "resume": Spec(("bool", "str"), False, (False, True, "auto")),
}


@dataclass
class Recipe:
    """A validated recipe: ``data`` holds every section with defaults filled in."""

    data: dict
    path: Path | None
    base_dir: Path
    given: dict = field(default_factory=dict)  # the recipe as written, after overrides
    reward_funcs: list = field(default_factory=list)  # rewards[i] built and guarded, in order, named uniquely
    origins: dict = field(default_factory=dict)  # training key -> where `algorithm:` put it, or that the recipe overrode it

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
        data["data"]["file"] = absolute_path(["data", "file"], data["data"].get("file"), self.base_dir)
        for i, entry in enumerate(data["rewards"]):
            entry["name"] = absolute_path(["rewards", str(i), "name"], entry["name"], self.base_dir)
        return data

    def to_yaml(self) -> str:
        """The recipe as a run records it (``portable``): YAML that any verb can read back from the run directory."""
        return yaml.safe_dump(self.portable(), sort_keys=False, allow_unicode=True)


# Keys a resumed run may change without changing what the run means: how it is evaluated, logged and saved.
RESUME_MAY_CHANGE = (
    "eval",
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
    """
    old, new = _flatten(before), _flatten(after)
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
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RecipeError(f"YAML syntax error at {where}{problem}", str(path)) from None
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
        raise RecipeError(f"override {text!r} must look like section.key=value (e.g. training.max_steps=5)")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
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

    The keys that hold paths: data.file, model.name (a local folder or .gguf file) and a reward's file.py:name.
    """
    if not isinstance(value, str) or not value:
        return value
    where = [str(k) for k in keys]
    if where == ["data", "file"]:
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
            problems.append(f"{where}: expected {describe_kinds(spec.kinds)}, got {kind_of(value)} {value!r:.60}")
            continue
        if spec.choices is not None and value not in spec.choices:
            problems.append(f"{where}: {shown(value)} is not one of {', '.join(map(repr, spec.choices))}")
            continue
        if spec.minimum is not None and isinstance(value, (int, float)) and value < spec.minimum:
            problems.append(f"{where}: must be at least {spec.minimum}, got {value}")
            continue
        out[key] = value
    for key, spec in schema.items():
        if key not in section:
            if spec.required:
                problems.append(f"{f'{path}.' if path else ''}{key}: missing; {spec.doc or 'required'}")
            else:
                out[key] = copy.deepcopy(spec.default)
    return out


def _check_prompts(value, path: str, problems: list[str]) -> None:
    if value is None:
        return
    if not value:
        problems.append(f"{path}: is empty; give at least one prompt")
    for i, p in enumerate(value):
        if not isinstance(p, str) or not p.strip():
            problems.append(f"{path}[{i}]: each prompt is a non-empty string, got {kind_of(p)} {p!r:.40}")


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


def _check_data(d: dict, eval_enabled: bool, base_dir: Path, problems: list[str]) -> None:
    """Where the prompts come from: exactly one source, files that exist, held-out prompts when eval is on."""
    _check_prompts(d.get("prompts"), "data.prompts", problems)
    _check_prompts(d.get("eval_prompts"), "data.eval_prompts", problems)
    given = [k for k in ("prompts", "file", "source", "hub") if d.get(k) is not None]
    if len(given) > 1:
        problems.append(f"data: {' and '.join(given)} are all given; keep one source of training prompts")
    if not given and all(k in d for k in ("prompts", "file", "source", "hub")):  # each passed its own check
        problems.append(
            "data: give prompts (a list of strings), file (a .jsonl/.json/.csv with a prompt column), "
            "source (a generator: arith) or hub (a dataset id)"
        )
    if d.get("file") is not None:
        file = resolve_path(d["file"], base_dir)
        if not exists(file, "file"):
            problems.append(f"data.file: {str(file)!r} does not exist; paths are relative to the recipe's folder")
        elif file.suffix not in (".jsonl", ".json", ".csv"):
            problems.append(f"data.file: {file.suffix or 'no extension'} is not supported; use .jsonl, .json or .csv")
    if d.get("source") is not None:
        problems.extend(generators.check_source(d["source"], d.get("source_args", {})))
    if isinstance(d.get("hub"), str) and d["hub"].count("/") != 1:
        problems.append(f"data.hub: {d['hub']!r} is not a dataset id; give org/name, e.g. openai/gsm8k")
    held_out = d.get("source") is not None or (d.get("hub") is not None and d.get("eval_split") is not None)
    if eval_enabled and d.get("eval_prompts") is None and not held_out:
        problems.append("data.eval_prompts: missing; give held-out prompts, or set eval.enabled: false")


def _build_rewards(entries: list[dict], base_dir: Path, problems: list[str]) -> list:
    """Each reward built from its name and args, then guarded under a unique metric name."""
    built = []
    for i, entry in enumerate(entries):
        if set(SCHEMA["reward"]) - set(entry):  # one of its keys failed its own check
            continue
        try:
            built.append(rewards.build(entry["name"], entry["args"], base_dir, f"rewards[{i}]"))
        except RecipeError as exc:
            problems.extend(exc.problems)
    return rewards.guard_all(entries, built) if len(built) == len(entries) else []


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

    model, data, evaluation = section("model"), section("data"), section("eval")
    entries = _check_rewards(top["rewards"], problems) if "rewards" in top else []
    training = dict(top["training"]) if "training" in top else None
    origins: dict[str, str] = {}
    if training is not None and top.get("algorithm") is not None:
        training, origins, preset_problems = algorithms.expand(top["algorithm"], training)
        problems.extend(preset_problems)
    if data is not None:
        _check_data(data, bool((evaluation or {}).get("enabled")), base_dir, problems)
    if model is not None and isinstance(model.get("name"), str):
        problems.extend(model_source.check(model["name"], base_dir))
    if training is not None:
        if "reward_weights" in training:
            problems.append("training.reward_weights: set each reward's weight in rewards[i].weight instead")
        problems.extend(compat.check_training(training))
        problems.extend(trackers.check_report_to(training))
        problems.extend(adapters.check(model or {}, training))
    built = _build_rewards(entries, base_dir, problems)
    if problems:
        raise RecipeError(problems, source)
    checked = {"model": model, "data": data, "rewards": entries, "training": training, "eval": evaluation}
    checked.update((key, top[key]) for key in ("output_dir", "seed", "resume"))
    if top.get("algorithm") is not None:
        checked["algorithm"] = top["algorithm"]
    return Recipe(data=checked, path=path, base_dir=base_dir, given=doc, reward_funcs=built, origins=origins)


def load(ref: str, overrides: list[str] | None = None) -> Recipe:
    """Locate, read, override and validate a recipe."""
    path = locate(ref)
    doc = read_yaml(path)
    return validate(apply_overrides(doc, overrides or []), path)
