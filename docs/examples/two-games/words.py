"""A word game for the two-games example: the row's word is the secret; say it to win."""


class Words:
    """Guess the row's word: each guess is told right or wrong."""

    def reset(self, word: str | None = None, **row) -> None:
        self.word, self.won = word, False

    def say(self, word: str) -> str:
        """Say the word you think it is.

        Args:
            word: your guess
        """
        self.won = word.strip().lower() == self.word
        return "right" if self.won else "wrong"

    def get_reward(self) -> float:
        return 1.0 if self.won else 0.0
