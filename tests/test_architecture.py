"""The package's layers, read from its own imports: each module imports only its own layer and those below,
there is no import cycle, and every import of the package's own modules sits at the top of its file.

The layers (README, Architecture): 1 base helpers → 2 settings checks → 3 recipe → 4 run parts → 5 verbs →
6 front door. A new module is placed here, in the one list of layers.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "grpo_ext"

LAYERS: dict[int, list[str]] = {
    1: ["errors", "base", "console", "catalog", "shapes", "batch_rules", "advice", "tiny", "evalstats"],  # stdlib (and yaml) only
    2: [
        "compat",
        "algorithms",
        "adapters",
        "model_source",
        "generators",
        "datafiles",
        "trackers",
        "rewards",
        "output_dir",
    ],  # settings
    3: ["recipe"],  # schema, load, overrides, validate
    4: [
        "hardware",
        "launch",
        "models",
        "data",
        "trainer",
        "scoring",
        "rundir",
        "progress",
        "report",
        "plots",
        "health",
        "preflight",
        "explore",
    ],  # run parts
    5: ["verbs"],  # train, evaluate, merge, plan: one function each
    6: ["cli", "train", "__main__", "__init__"],  # the front door: one parser; `python -m grpo_ext.train` a shim
}
LAYER_OF = {name: layer for layer, names in LAYERS.items() for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 2 else parts)


def layer(module: str) -> int:
    """A module's layer by its top-level name under grpo_ext (a subpackage shares its layer)."""
    parts = module.split(".")
    return LAYER_OF["__init__" if len(parts) == 1 else parts[1]]


def is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def own_imports(tree: ast.Module) -> list[tuple[str, ast.AST, bool]]:
    """(imported grpo_ext module, node, at the top of the file) for each import of the package's own modules."""
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node, id(node) in top) for a in node.names if a.name.split(".")[0] == "grpo_ext"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "grpo_ext":
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                found.append((target if is_module(target) else node.module, node, id(node) in top))
    return found


MODULES = {module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: {target for target, _, _ in own_imports(tree) if target != name} for name, tree in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_has_a_layer(module):
    assert module.split(".")[1] in LAYER_OF if "." in module else True, f"{module}: add it to LAYERS in this file"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_go_down(module):
    up = sorted(t for t in GRAPH[module] if layer(t) > layer(module))
    assert not up, f"{module} (layer {layer(module)}) imports {', '.join(f'{t} (layer {layer(t)})' for t in up)}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_own_imports_at_the_top(module):
    inner = [f"line {node.lineno}: {target}" for target, node, at_top in own_imports(MODULES[module]) if not at_top]
    assert not inner, f"{module} imports the package inside a function: {inner}; move it to the top of the file"


def test_no_import_cycle():
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(GRAPH.get(name, ())):
            if state.get(target) == "open":
                raise AssertionError(
                    "import cycle: " + " -> ".join(path[path.index(target) :] + [name, target])
                    if target in path
                    else f"import cycle through {target}"
                )
            if target not in state:
                visit(target, [*path, name])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [])


def test_the_checks_see_a_violation():
    """The checks above read real imports: an upward import in a made-up module is caught."""
    tree = ast.parse("import json\n\ndef f():\n    from grpo_ext import cli\n")
    ((target, _, at_top),) = own_imports(tree)
    assert target == "grpo_ext.cli" and not at_top and layer(target) > layer("grpo_ext.base")
