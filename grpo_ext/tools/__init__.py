"""Layer 3, tools: functions the model may call while it generates, the library of shipped ones (``library.py``), the
library's environments (``environments.py``: ``guess_number``), the JSON schema the model reads for a tool, written
as transformers writes it without importing it (``schema.py``), and the checks that a tool or an environment is one
TRL can use (``checks.py``). Imports ``core``.

A tool is a plain Python function that GRPOTrainer (``tools=[...]``, TRL 1.x with transformers 5) shows the model in
the chat template and runs when the model calls it: its name is what the model calls, its type hints and its
Google-style docstring (a description, then ``Args:`` with a line per argument) are the JSON schema the model reads,
and whatever it returns is sent back to the model as text. An environment is a class whose instances TRL builds, one
per rollout, through ``environment_factory``: ``reset(**row)`` before each rollout (with every column of the row; a
string it returns is added to the prompt), and each other public method a tool of that rollout.

How a recipe names a tool:

- a library name: ``calculator``, ``lookup`` (args: ``path``), ``search`` (args: ``folder``, ``k``);
- ``package.module:function``: an importable module;
- ``path/to/file.py:function``: a file, relative to the recipe's folder;
- a name that an installed package registers in the ``grpo_ext.tools`` entry-point group.

With ``args``, the named object is a factory, called with them to build the tool; without, it is the tool.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grpo_ext.tools.checks import check_environment, check_names, check_reset, check_tool, tool_methods
    from grpo_ext.tools.library import REGISTRY, calculator, find, lookup_table, search_folder

# Each name and the module that holds it, imported on first use (PEP 562's __getattr__): a recipe's check reads this
# package's names only when the recipe has tools or an environment, so a recipe without them, and a refused one, is
# read without the tools' modules and the sandbox under them (about 10 ms of a validation's 100).
_NAMES = {
    "check_environment": "checks",
    "check_names": "checks",
    "check_reset": "checks",
    "check_tool": "checks",
    "tool_methods": "checks",
    "REGISTRY": "library",
    "calculator": "library",
    "find": "library",
    "lookup_table": "library",
    "search_folder": "library",
}

__all__ = [
    "REGISTRY",
    "calculator",
    "check_environment",
    "check_names",
    "check_reset",
    "check_tool",
    "find",
    "lookup_table",
    "search_folder",
    "tool_methods",
]


def __getattr__(name: str):
    """``tools.NAME``: a name of ``_NAMES`` from its module, or a module of this package, imported now."""
    if name in _NAMES:
        value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        return value
    if name in ("checks", "environments", "library", "schema"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
