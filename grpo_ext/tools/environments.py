"""The library's environments: classes TRL builds one instance of per rollout (``environment: NAME`` in a recipe).

Each has ``reset(**row)``, called with the dataset row's columns before the rollout; its public methods are the
tools the model may call during the rollout; ``get_reward()`` scores the finished rollout (logged as
``rewards/CLASS/mean``).
"""

from grpo_ext.core import references


class GuessNumber:
    """A number-guessing game: the model calls guess and is told higher, lower or right (data.source: guess).

    The row's ``secret`` is a whole number in the range the prompt states (``low`` to ``high``); the rows of
    ``data.source: guess`` carry it.

    The reward is 1.0 for a game won; a game lost earns up to 0.5 by how close the nearest guess came, so that a
    group of lost games still ranks its rollouts (GRPO learns only from differences within a group).

    >>> game = GuessNumber()
    >>> game.reset(secret="6", low=1, high=9)
    >>> game.guess(5), game.guess(7), round(game.get_reward(), 3), game.guess(6), game.get_reward()
    ('higher', 'lower', 0.438, 'right: the number is 6', 1.0)
    """

    def reset(self, secret: str | int | None = None, low: int = 1, high: int = 9, **row) -> None:
        self.secret = int(secret) if secret is not None else (low + high) // 2
        self.low, self.high = int(low), int(high)
        self.guesses: list[int] = []
        self.found = False

    def guess(self, number: int) -> str:
        """Guess the secret number; the answer says whether it is higher, lower, or right.

        Args:
            number: a whole number in the range the question states
        """
        if self.found:
            return f"right: the number is {self.secret}; the game is over"
        number = int(number)
        self.guesses.append(number)
        if number == self.secret:
            self.found = True
            return f"right: the number is {self.secret}"
        return "higher" if number < self.secret else "lower"

    def get_reward(self) -> float:
        if self.found:
            return 1.0
        if not self.guesses:
            return 0.0
        nearest = min(abs(g - self.secret) for g in self.guesses)
        return 0.5 * max(0.0, 1 - nearest / max(1, self.high - self.low))


REGISTRY: dict[str, type] = {"guess_number": GuessNumber}
KIND = references.Kind("environment", REGISTRY, "grpo_ext.environments", "docs/tools.md")
