"""The package's layers, read from its own imports. Each folder of ``grpo_ext`` is one layer, and this table is the one
list of them (CONTRIBUTING.md shows the tree): a module imports its own folder and the folders of lower layers,
never a higher one nor another folder of its own layer; there is no import cycle; and every import of the
package's own modules sits at the top of its file, but the front door's: it names the modules it imports when a
command runs or an API name is first used in tables (``cli.COMMANDS``, ``cli.WORK``, ``_API``), read here as its imports. A new
module goes into the folder of its layer.
"""

import ast
from pathlib import Path

import pytest

from grpo_ext import cli
from tests.helpers import ROOT

PACKAGE = ROOT / "grpo_ext"

LAYERS: dict[str, int] = {
    "core": 1,  # errors, words for messages, value kinds, bounded YAML, files, console, catalog: stdlib and yaml
    "sandbox": 1,  # where a program a model wrote runs: the provider interface and the local provider; stdlib only
    "testing": 1,  # the tiny local model
    "settings": 2,  # what a recipe's values mean: version tables, batch rules, variants, adapters, model names, limits, ...
    "data": 3,  # where prompts come from: data files, generators, mixtures, worked examples (imports settings.limits)
    "rewards": 3,  # the reward registry, the built-in rewards and the guard around every reward
    "tools": 3,  # the tool library and the checks that a tool or an environment is one TRL can use
    "recipe": 4,  # schema, read, overrides, validate, load
    "run": 5,  # hardware, launch, models and their cache, data, trainer, sampling, run directory, progress, memory model
    "results": 6,  # what is measured of samples and runs: scoring, eval statistics, pre-flight, watchdog, report, plots
    "verbs": 7,  # what a person runs: train, eval, merge, plan, doctor, sweep
    "": 8,  # the front door, grpo_ext/*.py: the package's API, the command-line parser, `python -m` shims
}


def folder(module: str) -> str:
    """``grpo_ext.run.data`` -> ``run``; a module at the top of the package -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else ""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 2 else parts)


def layer(module: str) -> int:
    """A module's layer: its folder's."""
    return LAYERS[folder(module)]


def is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def own_imports(tree: ast.Module) -> list[tuple[str, ast.AST, bool]]:
    """(imported grpo_ext module, node, at the top of the file) for each import of the package's own modules; one
    under a top-level ``if TYPE_CHECKING:`` (names a type checker reads that load on first use) is at the top."""
    typing_only = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING"]
    top = {id(node) for node in [*tree.body, *(inner for block in typing_only for inner in block.body)]}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node, id(node) in top) for a in node.names if a.name.split(".")[0] == "grpo_ext"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "grpo_ext":
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                found.append((target if is_module(target) else node.module, node, id(node) in top))
    return found


def imports_by_name(tree: ast.Module) -> set[str]:
    """The package's modules a front-door module imports when they are first needed: the strings in its tables
    (``cli.COMMANDS``, ``grpo_ext.__init__``'s ``_API``) that name one."""
    tables = [node for node in ast.walk(tree) if isinstance(node, ast.Dict)]
    strings = {c.value for table in tables for c in ast.walk(table) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return {s for s in strings if s.startswith("grpo_ext.") and is_module(s)}


MODULES = {module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: {target for target, _, _ in own_imports(tree) if target != name} for name, tree in MODULES.items()}
for name in [m for m in MODULES if folder(m) == ""]:  # the front door's by-name imports count as imports
    GRAPH[name] |= imports_by_name(MODULES[name])


def test_every_folder_is_a_layer():
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert sorted(f for f in LAYERS if f) == folders, "a folder of grpo_ext with no layer, or a layer with no folder"


@pytest.mark.parametrize("name", [f for f in LAYERS if f])
def test_every_folder_opens_with_its_layer(name):
    """Each folder's __init__ docstring names its layer, so that a reader learns it without opening this file."""
    doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text(encoding="utf-8"))) or ""
    assert doc.startswith(f"Layer {LAYERS[name]}, {name}: "), f"grpo_ext/{name}/__init__.py: {doc[:50]!r}"


def test_verbs_are_what_the_command_line_runs():
    """Every module in verbs/ owns a command (cli.COMMANDS names it), does a command's work (cli.WORK) or holds a
    function of the API (evaluate: its command is sweep's ``grpo-ext eval``); a helper two verbs share belongs to a
    lower layer."""
    verbs = {m for m in MODULES if folder(m) == "verbs" and m != "grpo_ext.verbs"}
    run = GRAPH["grpo_ext.cli"] | GRAPH["grpo_ext.__init__"]
    assert verbs and verbs <= run, f"neither a command nor the API: {sorted(verbs - run)}"


def test_each_command_module_owns_its_parser():
    """A module cli.COMMANDS names adds its subcommands itself: ``add_parser(subparsers)``, beside what they run."""
    owners = set(cli.COMMANDS.values())  # cli.WORK's modules do a checked command's work; they add no parser
    assert owners, "cli.COMMANDS names no module"
    defined = {m: {n.name for n in MODULES[m].body if isinstance(n, ast.FunctionDef)} for m in owners}
    lacking = sorted(m for m in owners if "add_parser" not in defined[m])
    assert not lacking, f"no add_parser(subparsers) in {lacking}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_go_down(module):
    up = sorted(t for t in GRAPH[module] if folder(t) != folder(module) and layer(t) >= layer(module))
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
    assert target == "grpo_ext.cli" and not at_top and layer(target) > layer("grpo_ext.core.text")
