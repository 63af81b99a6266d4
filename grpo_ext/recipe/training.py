"""``training:`` typed: GRPOConfig keys by TRL's names, and the one place a key's value for the run is worked out.

A module of its own, apart from the other sections (``checked.py``), because the checks of ``rules.py`` read
effective values while a recipe may still be refused, and a refused recipe loads only what checking it needs.
"""

from dataclasses import dataclass
from typing import Any

from grpo_ext.settings import compat


@dataclass(frozen=True)
class Training:
    """``training:``: GRPOConfig keys by TRL's names (``settings`` holds those the recipe sets, ``algorithm:``'s
    among them), checked against the installed TRL."""

    settings: dict[str, Any]

    def effective(self, key: str) -> Any:
        """The value ``key`` has in a run: the recipe's, else grpo_ext's default, else TRL's default from the table."""
        return compat.effective(self.settings, key)

    def sets(self, key: str) -> bool:
        """Whether the recipe (or its algorithm) sets ``key``."""
        return key in self.settings

    def replaced(self, **values: Any) -> "Training":
        """The same keys with ``values`` set."""
        return Training({**self.settings, **values})
