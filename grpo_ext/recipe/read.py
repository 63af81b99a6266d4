"""Finding a recipe (a path or a shipped name), reading it within bounds, ``key=value`` overrides, and paths made
absolute so that a recorded recipe means the same read from anywhere.
"""

import argparse
import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from grpo_ext.core import catalog
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import exists, resolve_path, user_path
from grpo_ext.core.text import shown, suggest
from grpo_ext.core.values import kind_of
from grpo_ext.core.yaml_io import YAMLRefused, load_checked, load_yaml
from grpo_ext.recipe.schema import MAX_RECIPE_BYTES
from grpo_ext.settings import model_names


def locate(ref: str) -> Path:
    """A recipe path, or a shipped recipe's name (``digit``)."""
    path = user_path(ref)
    if exists(path, "file"):
        return path
    shipped = catalog.shipped_recipes()
    if ref in shipped:
        return shipped[ref]
    if path.suffix in (".yaml", ".yml") or "/" in ref:
        raise RecipeError(f"recipe file {ref!r} does not exist; shipped recipes: {', '.join(shipped) or 'none'}")
    raise RecipeError(f"no recipe file or shipped recipe named {ref!r}{suggest(ref, shipped)}")


def read_yaml(path: Path) -> dict[str, Any]:
    if path.stat().st_size > MAX_RECIPE_BYTES:
        raise RecipeError(f"recipe file is {path.stat().st_size} bytes; a recipe is at most {MAX_RECIPE_BYTES}", str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"recipe is not UTF-8 text ({exc.reason} at byte {exc.start})", str(path)) from None
    try:
        doc, twice = load_checked(text)  # one parse: the value, and the keys given twice
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


def _child(node: object, key: str | int) -> Any:
    """``node[key]`` of a mapping or a list, or None where there is none."""
    if isinstance(node, dict):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and key < len(node):
        return node[key]
    return None


def absolute_path(keys: Sequence[str | int], value: Any, base_dir: Path) -> Any:
    """The value of a recipe key, with a path in it made absolute against ``base_dir``; other values as they are.

    The keys that hold paths: data.file, data.eval_file, model.name (a local folder or .gguf file), model.chat_template,
    and the file.py:name of a reward, a tool or the environment.
    """
    if not isinstance(value, str) or not value:
        return value
    where = [str(k) for k in keys]
    if where in (["data", "file"], ["data", "eval_file"]):
        return str(resolve_path(value, base_dir).resolve())
    if where == ["model", "name"]:
        local = model_names.resolve(value, base_dir).kind in ("local", "gguf")
        return str(resolve_path(value, base_dir).resolve()) if local else value
    if where == ["model", "chat_template"]:
        return str(resolve_path(value, base_dir).resolve())
    if where[0] in ("rewards", "tools", "environment"):  # rewards.0, rewards.0.name, tools, environment
        target, sep, attr = value.rpartition(":")
        if sep and target.endswith(".py"):
            return f"{resolve_path(target, base_dir).resolve()}:{attr}"
    return value


def apply_overrides(doc: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """The recipe with each ``key=value`` applied; paths in them are taken from the working directory."""
    doc = copy.deepcopy(doc)
    for text in overrides:
        keys, value = parse_override(text)
        value = absolute_path(keys, value, Path.cwd())  # an override's path is from where it was typed
        node: Any = doc
        for depth, name in enumerate(keys[:-1]):
            key: str | int = int(name) if isinstance(node, list) and name.isdigit() else name
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
        last: str | int = keys[-1]
        if isinstance(node, list):
            last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
            if not isinstance(last, int) or last >= len(node):
                raise RecipeError(f"override {text!r}: index {last} is out of range (the list has {len(node)} items)")
        node[last] = value
    return doc


def add_recipe_arguments(
    parser: argparse.ArgumentParser, overrides_help: str = "section.key=value overrides, e.g. training.max_steps=5"
) -> None:
    """A command's RECIPE (a path or a shipped recipe's name, as ``locate`` finds it) and its ``key=value`` overrides,
    as ``train``, ``eval``, ``filter`` and ``plan`` take them; ``overrides_help`` gives the command's own example."""
    parser.add_argument("recipe", help="recipe file, or a shipped recipe's name (see `grpo-ext ls`)")
    parser.add_argument("overrides", nargs="*", help=overrides_help)
