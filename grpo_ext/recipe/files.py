"""The local data files a checked recipe names, read once row by row: ``validate`` and ``train`` stop at a bad row,
naming its line, before a run directory is made or a model loads. Here rather than in ``run/data.py``, which turns
the same files into datasets, so that checking a recipe imports nothing of the run layer."""

from pathlib import Path
from typing import TYPE_CHECKING

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import resolve_path
from grpo_ext.data import datafiles, mixture

if TYPE_CHECKING:  # a command reads the files once the recipe passed and is typed: checking it loads no typed class
    from grpo_ext.recipe.checked import Data, Recipe


def check_recipe_files(recipe: "Recipe") -> None:
    """``check_files`` for a loaded recipe, its problems named with the recipe's file: what ``validate`` and
    ``train --dry-run`` check of the data before they say a recipe is valid."""
    try:
        check_files(recipe.data, recipe.base_dir)
    except RecipeError as exc:
        raise RecipeError(exc.problems, str(recipe.path) if recipe.path else None) from None


def check_files(d: "Data", base_dir: Path) -> None:
    """Read each local data file of the recipe once, row by row; a bad row stops here, naming its line (before a
    run directory is made or a model loads)."""
    for i, source in enumerate(d.sources):
        try:
            check_files(d.alone(source), base_dir)
        except RecipeError as exc:
            raise RecipeError([mixture.within(p, i) for p in exc.found]) from None
    # and below, the whole mixture's eval_file (a mixture's data section has no file or eval_split of its own)
    splits: list[tuple[str, str | None]] = [("file", d.hub_split), ("eval_file", None)]
    if d.eval_split:
        splits.append(("file", d.eval_split))
    for key, split in splits:
        if _file(d, key):
            path = data_path(d, base_dir, key, split)
            datafiles.scan(path, ("data", key), _rule(path, d, key), d.prompt_template)


def _file(d: "Data", key: str) -> str | None:
    """``data.file`` or ``data.eval_file``."""
    return d.file if key == "file" else d.eval_file


def data_path(d: "Data", base_dir: Path, key: str, split: str | None) -> Path:
    """The path of ``data.file`` (``key`` "file", one ``split`` of it where given) or ``data.eval_file``."""
    loc = ("data", "eval_split") if split and split == d.eval_split else ("data", key)
    return datafiles.split_path(resolve_path(_file(d, key) or "", base_dir), split, loc)


def _rule(path: Path, d: "Data", key: str) -> tuple[str, object]:
    return datafiles.prompt_rule(
        datafiles.columns(path, ("data", key)), d.prompt_template, d.prompt_column, f"data.{key} {path.name}"
    )
