"""The checked recipe: one frozen dataclass per section of ``schema.py``, one field per key, and ``Recipe``, the whole.

``validate`` checks the mapping a recipe file holds against the specs of ``schema.py`` (the one source of every key,
its kinds, default and choices) and builds these from what passed, every default filled in; a run, a dry run and
every verb then read attributes (``recipe.data.prompts``, ``recipe.eval.samples``). ``tests/unit/test_checked.py``
holds each class against its specs: every key a field, every field a key, each field's type the key's kinds.

The ``training:`` keys are TRL's GRPOConfig fields, read from the version tables of ``settings/compat.py`` rather than
from ``schema.py``: ``Training`` keeps them by TRL's names, and ``Training.effective`` is the one place a key's value
for the run is worked out (the recipe's, else grpo_ext's default, else the installed TRL's).

A field's list or mapping (``data.prompts``, ``model.lora``) is the recipe's own value, shared and not copied: read it,
never change it in place.
"""

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from grpo_ext.core.errors import Problem, RecipeError
from grpo_ext.data import datafiles, generators, mixture
from grpo_ext.recipe import agents
from grpo_ext.recipe.read import absolute_path
from grpo_ext.recipe.rules import Passed, check, check_file
from grpo_ext.recipe.training import Training
from grpo_ext.rewards.guard import Guarded, guarded_rewards
from grpo_ext.rewards.registry import Resolved


@dataclass(frozen=True)
class Model:
    """``model:``: the model to train."""

    name: str
    dtype: Literal["auto", "float32", "bfloat16", "float16"]
    trust_remote_code: bool
    revision: str | None
    lora: dict[str, Any] | bool | None
    quantization: Literal["4bit", "8bit"] | None
    chat_template: str | None


@dataclass(frozen=True)
class Source:
    """``data.mixture[i]``: one source of a mixture, the keys of a ``data:`` section that name its rows, and its part
    of the mixture (``weight`` or ``rows``) under its ``name``."""

    prompts: list[str] | None
    file: str | None
    prompt_column: str
    prompt_template: str | None
    system_prompt: str | None
    examples: list[dict[str, Any]] | None
    eval_prompts: list[str | dict[str, Any]] | None
    eval_file: str | None
    source: str | None
    source_args: dict[str, Any]
    hub: str | None
    hub_config: str | None
    hub_split: str
    eval_split: str | None
    eval_size: int | None
    eval_fraction: float | None
    weight: float | None
    rows: int | None
    name: str | None
    environment: str | None

    @property
    def label(self) -> str:
        """The source's name in the ``source`` column and the logs (``data.mixture.label``)."""
        return mixture.label(self.name, self.file, self.source, self.hub)


@dataclass(frozen=True)
class Data:
    """``data:``: where the training prompts and the held-out eval rows come from; with ``mixture``, the sources of a
    mixture, each a ``data:`` section of its own (``alone``)."""

    prompts: list[str] | None
    file: str | None
    prompt_column: str
    prompt_template: str | None
    system_prompt: str | None
    examples: list[dict[str, Any]] | None
    chat: Literal["auto"] | bool
    eval_prompts: list[str | dict[str, Any]] | None
    eval_file: str | None
    source: str | None
    source_args: dict[str, Any]
    hub: str | None
    hub_config: str | None
    hub_split: str
    eval_split: str | None
    eval_size: int | None
    eval_fraction: float | None
    mixture: list[Source] | None
    size: int | None

    @property
    def sources(self) -> list[Source]:
        """The sources of a mixture; none for a section of one source."""
        return self.mixture or []

    def alone(self, source: Source) -> "Data":
        """The ``data:`` section of one source, as a recipe of that source alone would have it (``mixture.config``):
        the mixture's ``chat``, and its ``system_prompt`` and ``examples`` unless the source has its own."""
        return Data(**mixture.config(record(self), record(source)))

    @property
    def holds_out(self) -> bool:
        """Whether eval rows are held out of the training rows (``eval_fraction``, or ``eval_size`` alone)."""
        return datafiles.holds_out(self.eval_fraction, self.eval_size, self.eval_file, self.eval_split)

    def generated(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The rows of the generator ``source`` names: (training rows, held-out rows)."""
        return generators.generated(self.source or "", self.source_args)

    @property
    def held(self) -> tuple[str, str] | None:
        """A mixture's held-out set for the whole mixture (``data.mixture.held``): (the source its rows carry, the key
        that names it); None without one."""
        return mixture.held(self.eval_prompts, self.eval_file)


@dataclass(frozen=True)
class Eval:
    """``eval:``: the eval before and after training, on the held-out rows."""

    enabled: bool
    samples: int
    max_prompts: int | None
    temperature: float | None
    max_new_tokens: int | None
    pass_threshold: float
    batch_size: int
    pass_at: list[int] | None


@dataclass(frozen=True)
class Health:
    """``health:``: the reward pre-flight and the training watchdog's thresholds (``results/watchdog.py``)."""

    preflight: Literal["warn", "fail", "off", False]
    preflight_prompts: int | None
    preflight_flat_share: float
    on_problem: Literal["warn", "stop"]
    zero_std_share: float
    no_signal_steps: int
    unscored_steps: int
    flat_steps: int
    flat_reward: float
    trend_steps: int
    trend_z: float
    entropy_floor: float
    clipped_share: float
    clipped_steps: int
    kl_max: float
    kl_growth: float
    length_growth: float
    scale_ratio: float
    tool_steps: int
    tool_failure_share: float

    @property
    def preflight_on(self) -> bool:
        """Whether the pre-flight runs (``off``, which YAML may read as false, skips it)."""
        return self.preflight not in ("off", False)


@dataclass(frozen=True)
class Explore:
    """``explore:``: an end-of-reply boost for the first training steps (``run/explore.py``)."""

    end_boost: float | None
    start: int
    steps: int


@dataclass(frozen=True)
class Logging:
    """``logging:``: what the run directory logs beside metrics.jsonl."""

    completions_steps: int | None
    completions_max_mb: float


@dataclass(frozen=True)
class Groups:
    """``groups:``: what a step does with its groups of completions. ``dynamic_sampling`` is true or false once
    checked: null turns it on with ``algorithm: dapo``."""

    skip_zero_advantage: bool
    dynamic_sampling: bool | None
    max_extra_rounds: int
    share_prompt: bool


@dataclass(frozen=True)
class Reward:
    """``rewards[i]``: a reward function by name, with its weight, args and error handling."""

    name: str
    weight: float
    args: dict[str, Any]
    on_error: Literal["fail", "skip"]
    pass_threshold: float | None
    timeout: float | None


@dataclass(frozen=True)
class Named:
    """``tools[i]`` or ``environment``: a name (a library's, ``file.py:name``, ``module:name``) and the arguments of
    its factory or constructor; ``written`` is the entry as the recipe wrote it (a name, or a mapping), as a run
    records it."""

    name: str
    args: dict[str, Any]
    written: str | dict[str, Any]

    @classmethod
    def of(cls, entry: str | dict[str, Any]) -> "Named":
        if isinstance(entry, str):
            return cls(entry, {}, entry)
        return cls(entry["name"], entry.get("args") or {}, entry)


# the top-level keys that are sections of their own keys (TOP_LEVEL's "dict" kind), and their classes
SECTION_CLASSES: dict[str, type] = {
    "model": Model,
    "data": Data,
    "eval": Eval,
    "health": Health,
    "explore": Explore,
    "logging": Logging,
    "groups": Groups,
}


def build(name: str, checked: dict[str, Any]) -> Any:
    """The typed section ``name`` of a checked mapping that holds every key of the section."""
    if name == "data":
        sources = checked["mixture"]
        return Data(**{**checked, "mixture": None if sources is None else [Source(**s) for s in sources]})
    return SECTION_CLASSES[name](**checked)


def record(section: Any) -> dict[str, Any]:
    """A section as a recipe writes it: its keys in the schema's order, a mixture's sources as mappings."""
    out = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            value = [record(v) for v in value]
        out[f.name] = value
    return out


@dataclass
class Recipe:
    """A checked recipe: one field per top-level key (``schema.TOP_LEVEL``), each section typed and every default
    filled in; then where it was read and what checking it found and built."""

    model: Model
    data: Data
    rewards: list[Reward]
    training: Training
    algorithm: str | None
    eval: Eval
    health: Health
    explore: Explore
    logging: Logging
    groups: Groups
    tools: list[Named]
    environment: Named | dict[str, Named] | None  # one environment, or several by name (each row's column picks one)
    output_dir: str
    seed: int
    resume: bool | Literal["auto"]
    save_final: bool
    path: Path | None = None  # the recipe file, None for a mapping validated in memory
    base_dir: Path = field(default_factory=Path.cwd)  # where its relative paths are read from: the file's folder
    given: dict[str, Any] = field(default_factory=dict)  # the recipe as written, after overrides
    # rewards[i] found and checked, in order
    resolved: list[Resolved] = field(default_factory=list)
    # training key -> where `algorithm:` put it, or that the recipe overrode it
    origins: dict[str, str] = field(default_factory=dict)
    # stage -> (its rows' columns, None where only loading tells; the rows described), for a reward built later
    columns: dict[str, tuple[list[str] | None, str]] = field(default_factory=dict)
    # each reward's metric name; a user's factory not built yet: how the recipe calls it
    reward_names: list[str] = field(default_factory=list)
    tool_functions: list[Callable[..., Any]] = field(default_factory=list, repr=False)  # tools[i] built and checked
    environment_class: type | None = field(default=None, repr=False)  # the class environment: names, or None
    # the classes of several environments by name (environment: a mapping), else empty
    environment_classes: dict[str, type] = field(default_factory=dict, repr=False)
    notes: list[str] = field(default_factory=list)  # lines a run and its dry run say first (--quick: what it changed)
    _funcs: list[Guarded] | None = field(default=None, repr=False)  # the guarded rewards, once built

    @property
    def agentic(self) -> bool:
        """Whether the model calls tools while it generates: the recipe gives tools or an environment."""
        return bool(self.tools or self.environment)

    @property
    def reward_funcs(self) -> list[Guarded]:
        """rewards[i] built and guarded, in order, named uniquely (see ``build_rewards``)."""
        return self.build_rewards()

    def build_rewards(self) -> list[Guarded]:
        """The guarded rewards. A user's reward factory runs here, the first time a run needs the rewards, never
        while the recipe is validated; RecipeError (each problem's key path) if it refuses its args or returns a
        reward that needs a column the rows lack. ``train`` calls it before it touches output_dir."""
        if self._funcs is None:
            problems: list[Problem] = []
            entries = [dataclasses.asdict(r) for r in self.rewards]
            funcs = guarded_rewards(entries, self.resolved, self.columns, problems, build=True)
            if problems:
                raise RecipeError(problems, str(self.path) if self.path else None)
            self._funcs = [f for f in funcs if f is not None]  # each built: a reward that was not is a problem
        return self._funcs

    @property
    def environment_types(self) -> list[type]:
        """Every environment class of the recipe: the one, or each of several (a class named twice once), in order."""
        classes = [self.environment_class] if self.environment_class is not None else self.environment_classes.values()
        return list(dict.fromkeys(classes))

    @property
    def environment_factory(self) -> Callable[[], Any] | dict[str, Callable[[], Any]] | None:
        """GRPOTrainer's ``environment_factory``: a callable that builds the environment's class (with
        ``environment.args``) and checks what each instance's ``reset`` returns; for several environments, such a
        callable for each name; None without an environment."""
        if isinstance(self.environment, dict):
            return {name: agents.builder(self.environment_classes[name], named.args) for name, named in self.environment.items()}
        return agents.factory(self.environment_class, self.environment.args if self.environment else {})

    @property
    def weights(self) -> list[float]:
        """rewards[i].weight, in order: TRL's reward_weights."""
        return [r.weight for r in self.rewards]

    def portable(self) -> dict[str, Any]:
        """The checked recipe as a mapping with every path in it absolute (model directory or .gguf file, data.file,
        reward files, tools), so that a copy read from anywhere (the run directory's recipe.yaml) means the same."""
        base = self.base_dir

        def files(rows: Any) -> Any:
            return dataclasses.replace(
                rows,
                file=absolute_path(["data", "file"], rows.file, base),
                eval_file=absolute_path(["data", "eval_file"], rows.eval_file, base),
            )

        model = dataclasses.replace(
            self.model,
            name=absolute_path(["model", "name"], self.model.name, base),
            chat_template=absolute_path(["model", "chat_template"], self.model.chat_template, base),
        )
        data = files(self.data)
        if data.mixture is not None:
            data = dataclasses.replace(data, mixture=[files(source) for source in data.mixture])
        out: dict[str, Any] = {
            "model": record(model),
            "data": record(data),
            "rewards": [
                record(dataclasses.replace(r, name=absolute_path(["rewards", str(i), "name"], r.name, base)))
                for i, r in enumerate(self.rewards)
            ],
            "training": self.training.settings,
        }
        out |= {name: record(getattr(self, name)) for name in ("eval", "health", "explore", "logging", "groups")}
        out |= {"output_dir": self.output_dir, "seed": self.seed, "resume": self.resume, "save_final": self.save_final}
        if self.tools:
            out["tools"] = [agents.portable(tool.written, base) for tool in self.tools]
        if isinstance(self.environment, dict):
            out["environment"] = {
                name: agents.portable(named.written, base, "environment") for name, named in self.environment.items()
            }
        elif self.environment:
            out["environment"] = agents.portable(self.environment.written, base, "environment")
        if self.algorithm is not None:
            out["algorithm"] = self.algorithm
        return copy.deepcopy(out)

    def to_yaml(self) -> str:
        """The recipe as a run records it (``portable``): YAML that any verb can read back from the run directory."""
        return yaml.safe_dump(self.portable(), sort_keys=False, allow_unicode=True)


def typed(passed: Passed) -> Recipe:
    """The typed recipe of one that passed ``rules.check``."""
    top, sections = passed.top, passed.sections
    return Recipe(
        model=build("model", sections["model"]),
        data=build("data", sections["data"]),
        rewards=[Reward(**entry) for entry in passed.rewards],
        training=Training(passed.settings),
        algorithm=top.get("algorithm"),
        eval=build("eval", sections["eval"]),
        health=build("health", sections["health"]),
        explore=build("explore", sections["explore"]),
        logging=build("logging", sections["logging"]),
        groups=build("groups", sections["groups"]),
        tools=[Named.of(entry) for entry in top.get("tools") or []],
        environment=_environments(top.get("environment")),
        output_dir=top["output_dir"],
        seed=top["seed"],
        resume=top["resume"],
        save_final=top["save_final"],
        path=passed.path,
        base_dir=passed.base_dir,
        given=passed.given,
        resolved=passed.resolved,
        origins=passed.origins,
        columns=passed.columns,
        reward_names=passed.reward_names,
        tool_functions=passed.tool_functions,
        environment_class=passed.environment_class,
        environment_classes=passed.environment_classes,
        _funcs=passed.funcs,
    )


def validate(doc: dict[str, Any], path: Path | None = None) -> Recipe:
    """Check a recipe mapping (``rules.check``: every rule, every problem at once in a RecipeError) and return it
    typed."""
    return typed(check(doc, path))


def load(ref: str, overrides: Sequence[str] | None = None) -> Recipe:
    """Locate, read, override and validate a recipe (a file, or a shipped recipe by name)."""
    return typed(check_file(ref, overrides or ()))


def _environments(entry: Any) -> Named | dict[str, Named] | None:
    """``environment:`` checked: one, several by name, or None."""
    if agents.several(entry):
        return {name: Named.of(one) for name, one in entry.items()}
    return Named.of(entry) if entry else None
