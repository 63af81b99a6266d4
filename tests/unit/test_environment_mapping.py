"""Several environments in one run (``environment:`` a mapping of names, TRL's ``environment_factory`` as a dict): each
entry checked as one environment is, at ``environment.NAME``; each row's ``environment`` column held against the
names before torch; a mapping refused on a TRL without it; the checked recipe's factories and its record."""

import pytest
from packaging.version import Version

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import load
from grpo_ext.settings import compat
from tests.helpers import ROOT, jsonl, write

pytestmark = pytest.mark.skipif(compat.tools_problem("environment") is not None, reason="needs trl>=1.8, transformers>=5.2")

GAMES = '''
class Words:
    """Guess the word of the row."""

    def reset(self, word, **row):
        self.word, self.won = word, False

    def say(self, word: str) -> str:
        """Say a word.

        Args:
            word: the word you say
        """
        self.won = word == self.word
        return "right" if self.won else "wrong"

    def get_reward(self) -> float:
        return float(self.won)


class Counts:
    """Count to the row's number; no reward of its own."""

    def reset(self, **row):
        self.said = 0

    def count(self, n: int) -> str:
        """Say a number.

        Args:
            n: the number
        """
        self.said = n
        return str(n)


class Sized(Words):
    def __init__(self, letters: int):
        self.letters = letters
'''

WORDS = [{"prompt": "Guess my word.", "word": w, "environment": "words"} for w in ("apple", "river")]
NUMBERS = [{"prompt": "Guess my number from 1 to 9.", "secret": s, "low": 1, "high": 9, "environment": "games"} for s in (3, 7)]
MAPPING = {"games": "guess_number", "words": "game.py:Words"}
ROWS = "the training rows (data.mixture[1].file words.jsonl)"


def doc(**top) -> dict:
    base = {
        "model": {"name": "smollm2-135m-instruct"},
        "data": {"mixture": [{"file": "games.jsonl", "weight": 1}, {"file": "words.jsonl", "weight": 1}]},
        "environment": MAPPING,
        "rewards": [],
        "training": {"max_steps": 2},
        "eval": {"enabled": False},
        "output_dir": "runs/x",
    }
    return {**base, **top}


def written(tmp_path, recipe: dict, words: list[dict] = WORDS) -> str:
    (tmp_path / "game.py").write_text(GAMES)
    jsonl(tmp_path / "games.jsonl", NUMBERS)
    jsonl(tmp_path / "words.jsonl", words)
    return str(write(tmp_path / "recipe.yaml", recipe))


def refused(tmp_path, capsys, recipe: dict, words: list[dict] = WORDS) -> list[str]:
    """The lines `grpo-ext validate` writes on stderr, which must exit 2."""
    assert cli.main(["validate", written(tmp_path, recipe, words)]) == 2
    return capsys.readouterr().err.splitlines()


NAMES = "the environments (games, words); set each row's environment column to one of them"
MIXED = f"{NAMES}, or give a mixture source an environment: key that names one for its rows"

CASES = [
    # (top-level keys over doc(), the rows of words.jsonl, the one line validate writes after "error: recipe.yaml: ")
    (  # a row naming an environment the mapping lacks: the row, the names available, how many more
        {},
        [*WORDS, {**WORDS[0], "environment": "chess"}, {**WORDS[0], "environment": "chess"}],
        f"environment: line 3 of {ROWS} names 'chess', not one of {MIXED} (1 more row names none of them)",
    ),
    (  # a row without the column (every row of the file has the same columns, so the file has none)
        {},
        [{k: v for k, v in row.items() if k != "environment"} for row in WORDS],
        f"environment: line 1 of {ROWS} has no environment column, which names one of {MIXED} (1 more row names none of them)",
    ),
    (  # a generator's rows carry no environment column
        {"data": {"source": "guess", "source_args": {"train": 4, "held_out": 2}}},
        WORDS,
        "environment: row 1 of the training rows (data.source guess) has no environment column, which names one of "
        f"{NAMES} (3 more rows name none of them)",
    ),
    (  # a value that is no environment: each entry is checked as one environment is, at its name
        {"environment": {"games": "guess_number", "words": 5}},
        WORDS,
        "environment.words: an environment is a class's name (guess_number, file.py:Class, module:Class) or a mapping "
        "with name and args, got 5",
    ),
    (  # a class the file lacks
        {"environment": {"games": "guess_number", "words": "game.py:Wordz"}},
        WORDS,
        "environment.words: 'game.py' has no attribute 'Wordz'; did you mean 'Words'?",
    ),
    (  # an entry's constructor, with the form that gives it args named at its own key
        {"environment": {"games": "guess_number", "words": "game.py:Sized"}},
        WORDS,
        "environment.words.args: Sized needs letters (arguments of Sized: letters); give them as environment.words: "
        "{name: game.py:Sized, args: {...}}",
    ),
    (  # an empty mapping names no environment
        {"environment": {}},
        WORDS,
        "environment: is an empty mapping; name one environment, or several by name (each row's environment column "
        "picks one), e.g. {games: guess_number, words: game.py:Words}",
    ),
    (  # rewards: [] needs every environment's get_reward: the rows of the other would score nothing
        {"environment": {"games": "guess_number", "words": "game.py:Counts"}},
        WORDS,
        "rewards: is empty and the environment.words has no get_reward; name a reward, or give the environment one",
    ),
    (  # a mixture source's environment key names none of the mapping's
        {"data": {"mixture": [{"source": "guess", "environment": "chess", "weight": 1}, {"file": "words.jsonl", "weight": 1}]}},
        WORDS,
        "data.mixture[0].environment: 'chess' is not one of the environments (games, words)",
    ),
    (  # a source's environment key with one environment: nothing to pick among
        {"environment": "game.py:Words", "data": {"mixture": [{"file": "words.jsonl", "environment": "words", "rows": 2}]}},
        WORDS,
        "data.mixture[0].environment: names one of several environments, and environment: holds one or none; leave it "
        "out, or map names to them",
    ),
    (  # an environment that writes every prompt has no rows to name it
        {"data": {"system_prompt": "Play."}},
        WORDS,
        "environment: holds several environments, which TRL picks among by each training row's environment column, and "
        "data names no training rows; give rows (data.file) that name their environment",
    ),
]


@pytest.mark.parametrize(("top", "words", "line"), CASES)
def test_a_bad_mapping_is_one_line_before_torch(top, words, line, tmp_path, capsys):
    lines = refused(tmp_path, capsys, doc(**top), words)
    assert len(lines) == 1, lines
    said = lines[0].removeprefix(f"error: {tmp_path / 'recipe.yaml'}: ").removeprefix("error: recipe.yaml: ")
    assert said == line or (line.endswith("…") and said.startswith(line[:-1])), lines


def test_a_trl_without_several_environments_names_the_version_that_has_them(tmp_path, capsys, monkeypatch):
    """TRL 1.7 takes one environment_factory (and no get_reward); the dict of them came with 1.8."""
    monkeypatch.setattr(compat, "trl_version", lambda: Version("1.7.0"))
    monkeypatch.setattr(compat, "transformers_version", lambda: Version("5.2.0"))
    (line,) = refused(tmp_path, capsys, doc())
    assert line.endswith(
        "environment: several environments (a mapping of names) need trl>=1.8 and transformers>=5.2 (installed trl 1.7.0, "
        "transformers 5.2.0); run: pip install -U 'trl>=1.8' 'transformers>=5.2'"
    ), line


def test_each_environment_gets_its_rows_without_the_column_that_chose_it(tmp_path):
    """Words.reset(prompt, word, source) takes no environment column: TRL calls the chosen environment without it (a single
    environment gets every column); the mixture's own source column is passed on to guess_number's **kwargs."""
    (tmp_path / "game.py").write_text(GAMES.replace("def reset(self, word, **row)", "def reset(self, prompt, word, source)"))
    jsonl(tmp_path / "games.jsonl", NUMBERS)
    jsonl(tmp_path / "words.jsonl", WORDS)
    recipe = load(str(write(tmp_path / "recipe.yaml", doc())))
    assert [cls.__name__ for cls in recipe.environment_types] == ["GuessNumber", "Words"]
    with pytest.raises(RecipeError) as exc:  # one environment is called with every column, environment among them
        load(str(write(tmp_path / "recipe.yaml", doc(environment="game.py:Words", data={"file": "words.jsonl"}))))
    assert exc.value.problems[0].startswith("environment: Words.reset takes no environment, and TRL passes it every column")


def test_the_factories_and_the_record(tmp_path):
    """TRL's environment_factory is a dict of factories, each building its class with its own args; the run's record
    reads back to the same recipe."""
    mapping = {"games": "guess_number", "words": {"name": "game.py:Sized", "args": {"letters": 5}}}
    recipe = load(written(tmp_path, doc(environment=mapping)))
    factories = recipe.environment_factory
    assert sorted(factories) == ["games", "words"]
    assert type(factories["games"]()).__name__ == "GuessNumber" and factories["words"]().letters == 5
    recorded = recipe.portable()["environment"]
    assert recorded == {"games": "guess_number", "words": {"name": f"{tmp_path / 'game.py'}:Sized", "args": {"letters": 5}}}
    again = load(str(write(tmp_path / "run" / "recipe.yaml", recipe.to_yaml())))
    assert again.portable() == recipe.portable() and again.environment_factory["words"]().letters == 5


def test_the_dry_run_shows_each_environment_with_its_tools(tmp_path, capsys):
    assert cli.main(["train", written(tmp_path, doc()), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "rewards: GuessNumber (the environments' get_reward, weight 1.0), Words (the environments' get_reward" in out
    assert "tools the model sees, and an environment per completion, the one its row's environment column names:" in out
    assert "  games (guess_number): guess(number: int): Guess the secret number" in out
    assert "  words (game.py:Words): say(word: str): Say a word." in out


def test_the_docs_example_validates_and_dry_runs(capsys):
    """docs/examples/two-games: the example docs/tools.md points to, as a user runs it."""
    example = str(ROOT / "docs" / "examples" / "two-games" / "recipe.yaml")
    assert cli.main(["validate", example]) == 0
    assert cli.main(["train", example, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "  numbers (guess_number): guess(number: int)" in out and "  words (words.py:Words): say(word: str)" in out


def test_a_mixture_source_names_the_environment_of_its_rows(tmp_path):
    """A generator's rows carry no environment column: the source's environment key gives each of them one, in
    training and in its held-out rows, as the rows load."""
    from grpo_ext.run import data

    mixed = {"mixture": [{"source": "guess", "source_args": {"train": 4, "held_out": 2}, "environment": "games", "weight": 1}]}
    mixed["mixture"].append({"file": "words.jsonl", "weight": 1, "eval_size": 1})
    recipe = load(written(tmp_path, doc(data=mixed, eval={"enabled": True})))
    rows = data.load(recipe.data, recipe.base_dir, 0, [], True)
    own = {"guess": "games", "words.jsonl": "words"}  # each source's rows: the guess games carry no column of their own
    assert {row["source"] for row in rows.train} == {row["source"] for row in rows.eval} == set(own)
    assert all(row["environment"] == own[row["source"]] for row in rows.train + rows.eval)
