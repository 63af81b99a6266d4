"""Errors a user can fix: each carries one line per problem, naming where it is and what to do."""


class RecipeError(Exception):
    """Bad input (recipe, override or command line). The CLI prints each problem as one line and exits 2."""

    def __init__(self, problems: list[str] | str, source: str | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        prefix = f"{self.source}: " if self.source else ""
        return [f"error: {prefix}{p}" for p in self.problems]


class RunError(Exception):
    """A failure while running (model load, training, reward crash). The CLI prints one line and exits 1."""
