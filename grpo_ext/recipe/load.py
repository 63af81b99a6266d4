"""``load``: a recipe found, read, overridden and validated, in one call."""

from grpo_ext.recipe.checked import Recipe
from grpo_ext.recipe.read import apply_overrides, locate, read_yaml
from grpo_ext.recipe.validate import validate


def load(ref: str, overrides: list[str] | None = None) -> Recipe:
    """Locate, read, override and validate a recipe."""
    path = locate(ref)
    doc = read_yaml(path)
    return validate(apply_overrides(doc, overrides or []), path)
