"""An environment of the user's, checked at validation as TRL will use it: ``reset(**row)`` against the columns of
every set of rows that reaches it, constructor arguments (``environment: {name:, args:}``), async methods, an
environment that writes its own prompts (no training rows), and a wrong ``environment:`` in one line."""

import pytest

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import load
from grpo_ext.settings import compat
from tests.helpers import jsonl, write

pytestmark = pytest.mark.skipif(compat.tools_problem("environment") is not None, reason="needs trl>=1.8, transformers>=5.2")

GAMES = '''
class WordGame:
    """Guess the word; reset takes the word column alone."""

    def reset(self, word):
        self.word, self.won = word, False

    def guess(self, word: str) -> str:
        """Guess the secret word.

        Args:
            word: the word you guess
        """
        self.won = word == self.word
        return "right" if self.won else "wrong"

    def get_reward(self) -> float:
        return float(self.won)


class NeedsLevel(WordGame):
    def reset(self, word, level, **row):
        self.word, self.won = word, False


class TakesAll(WordGame):
    def reset(self, prompt, word, hints):
        self.word, self.won = word, False


class TakesAny(WordGame):
    def reset(self, word="apple", **row):
        self.word, self.won = word, False


class Sized(TakesAny):
    def __init__(self, letters: int, lang: str = "en"):
        self.letters = letters


class AsyncReset(TakesAny):
    async def reset(self, **row):
        self.word, self.won = "apple", False


class AsyncParts(TakesAny):
    async def guess(self, word: str) -> str:
        """Guess the secret word.

        Args:
            word: the word you guess
        """
        self.won = word == self.word
        return "right" if self.won else "wrong"

    async def get_reward(self) -> float:
        return float(self.won)


class Helper(TakesAny):
    def board(self) -> str:
        return "_" * len(self.word)


class Strict(WordGame):
    def __init__(self, words):
        self.words = words

    def get_reward(self, completion) -> float:
        return 0.0


class Owner(WordGame):
    """Writes its own prompt: the rows hold none."""

    def reset(self, **row) -> str:
        self.word, self.won = "apple", False
        return "Guess my word: a fruit, five letters."


def make_game() -> WordGame:
    return WordGame()
'''

ROWS = [{"prompt": "Guess my word.", "word": w, "hints": h} for w, h in [("apple", "a fruit"), ("river", "water")]]


def doc(**top) -> dict:
    base = {
        "model": {"name": "smollm2-135m-instruct"},
        "data": {"file": "words.jsonl"},
        "environment": "game.py:TakesAny",
        "rewards": [],
        "training": {"max_steps": 2},
        "eval": {"enabled": False},
        "output_dir": "runs/x",
    }
    return {**base, **top}


def problems(tmp_path, recipe: dict) -> list[str]:
    (tmp_path / "game.py").write_text(GAMES)
    jsonl(tmp_path / "words.jsonl", ROWS)
    try:
        load(str(write(tmp_path / "recipe.yaml", recipe)))
    except RecipeError as exc:
        return exc.problems
    return []


ROWS_SEEN = "the training rows (data.file words.jsonl)"
OWN_ROWS = "the training rows (data names none: each an empty prompt that reset adds to)"

CASES = [
    # (top-level keys over doc(), the problem lines)
    ({}, []),  # reset(word, **row) takes every column
    ({"environment": "game.py:TakesAll"}, []),  # each column by name
    (  # TRL passes every column: a reset without **kwargs fails on the ones it does not name
        {"environment": "game.py:WordGame"},
        [
            f"environment: WordGame.reset takes no hints or prompt, and TRL passes it every column of {ROWS_SEEN}: "
            "word, hints, prompt; add **kwargs to reset, or drop hints from the rows"
        ],
    ),
    (  # a column reset needs that the rows lack
        {"environment": "game.py:NeedsLevel"},
        [
            f"environment: NeedsLevel.reset needs level, which {ROWS_SEEN} lack (columns: word, hints, prompt); "
            "add the column to the rows, or give level a default"
        ],
    ),
    (  # the eval rows reach reset too, each set checked with its own columns
        {
            "environment": "game.py:NeedsLevel",
            "data": {"file": "words.jsonl", "eval_prompts": [{"prompt": "Guess.", "word": "stone", "level": 1}]},
            "eval": {"enabled": True},
        },
        [
            f"environment: NeedsLevel.reset needs level, which {ROWS_SEEN} lack (columns: word, hints, prompt); "
            "add the column to the rows, or give level a default"
        ],
    ),
    # constructor arguments, as tools take them: TRL builds one instance per rollout with them
    ({"environment": {"name": "game.py:Sized", "args": {"letters": 5}}}, []),
    ({"environment": {"name": "game.py:Sized", "args": {"letters": 5, "lang": "fr"}}}, []),
    (
        {"environment": {"name": "game.py:Sized", "args": {"size": 5}}},
        [
            "environment.args: Sized takes no size (arguments of Sized: letters, lang)",
            "environment.args: Sized needs letters (arguments of Sized: letters, lang)",
        ],
    ),
    (
        {"environment": "game.py:Sized"},  # TRL calls the class with nothing
        [
            "environment.args: Sized needs letters (arguments of Sized: letters, lang); "
            "give them as environment: {name: game.py:Sized, args: {...}}"
        ],
    ),
    (
        {"environment": {"name": "guess_number", "args": {"high": 20}}},  # the library's takes none
        ["environment.args: GuessNumber takes no high (arguments of GuessNumber: none)"],
    ),
    (
        {"environment": {"name": "game.py:TakesAny", "seed": 1}},
        [
            "environment: an environment is a class's name (guess_number, file.py:Class, module:Class) or a mapping "
            "with name and args, got {'name': 'game.py:TakesAny', 'seed': 1}"
        ],
    ),
    # a wrong shape is one line: no follow-on line for rewards: [], which an environment may leave empty
    ({"environment": ["a", "b"]}, ["environment: expected a string or a mapping or null, got list ['a', 'b']"]),
    (  # a mapping without name: several environments by name (one here), each row's environment column picks one
        {"environment": {"a": "game.py:WordGame"}},
        [f"environment: line 1 of {ROWS_SEEN} has no environment column, which names one of the environments (a); …"],
    ),
    (  # a factory function: the line names it, never <function make_game at 0x…>
        {"environment": "game.py:make_game"},
        [
            "environment: make_game is a function, not a class; name the environment's class (TRL builds one per "
            "rollout), with what its constructor takes in args"
        ],
    ),
    (  # a public helper is offered to the model as a tool: a docstring, or a name of its own
        {"environment": "game.py:Helper"},
        [
            "environment.board: board has no docstring; write what it does, then Args: with a line for each argument, "
            "or name it _board if it is not a tool (TRL offers the model every public method but reset and get_reward)"
        ],
    ),
    (  # the class's problems, its constructor's and its reset's against the rows, in one round
        {"environment": "game.py:Strict"},
        [
            "environment: Strict.get_reward takes completion; TRL calls it with nothing, once a rollout ends",
            "environment.args: Strict needs words (arguments of Strict: words); give them as environment: {name: …",
            f"environment: Strict.reset takes no hints or prompt, and TRL passes it every column of {ROWS_SEEN}: …",
        ],
    ),
    # async: TRL awaits async tool methods and an async get_reward, never an async reset
    ({"environment": "game.py:AsyncParts"}, []),
    (
        {"environment": "game.py:AsyncReset"},
        ["environment: AsyncReset.reset is async; TRL calls reset without awaiting it, so write it as a plain def"],
    ),
]


@pytest.mark.parametrize("top,lines", CASES)
def test_environment_problems(top, lines, tmp_path):
    found = problems(tmp_path, doc(**top))
    assert len(found) == len(lines), found
    for line, want in zip(found, lines, strict=True):
        assert line == want or (want.endswith("…") and line.startswith(want[:-1])), found


OWNED = [
    # (top-level keys over doc() with no training rows, the problem lines)
    ({"environment": "game.py:Owner"}, []),  # reset writes the prompt; rows of an empty prompt carry it
    ({"environment": "game.py:Owner", "data": {"system_prompt": "Play.", "chat": "auto"}}, []),
    (  # the run's length is its steps: the rows are placeholders
        {"environment": "game.py:Owner", "training": {}},
        [
            "training.max_steps: the environment writes every prompt (data names no training rows), so a run is as long "
            "as its steps; set training.max_steps"
        ],
    ),
    (  # those rows have a prompt column alone
        {"environment": "game.py:WordGame"},
        [
            f"environment: WordGame.reset takes no prompt, and TRL passes it every column of {OWN_ROWS}: prompt; add "
            "**kwargs to reset",
            "environment: WordGame.reset needs word, which the training rows (data names none: each an empty "
            "prompt that reset adds to) lack (columns: prompt); add the column to the rows, or give word a default",
        ],
    ),
    ({"environment": "game.py:Owner", "eval": {"enabled": True}}, ["data.eval_prompts: missing; …"]),
]


@pytest.mark.parametrize("top,lines", OWNED)
def test_an_environment_that_writes_its_prompts(top, lines, tmp_path):
    recipe = doc(**top)
    recipe["data"] = {key: value for key, value in recipe["data"].items() if key != "file"}
    found = problems(tmp_path, recipe)
    assert len(found) == len(lines), found
    for line, want in zip(found, lines, strict=True):
        assert line == want or (want.endswith("…") and line.startswith(want[:-1])), found


def test_without_an_environment_the_data_names_rows(tmp_path):
    recipe = doc(rewards=["digit_exact"], data={})
    del recipe["environment"]
    assert [p for p in problems(tmp_path, recipe) if p.startswith("data: give prompts")]


def test_the_arguments_are_recorded_and_build_each_instance(tmp_path):
    recipe_path = tmp_path / "recipe.yaml"
    problems(tmp_path, doc(environment={"name": "game.py:Sized", "args": {"letters": 5}}))
    recipe = load(str(recipe_path))
    assert recipe.environment_class.__name__ == "Sized"
    game = recipe.environment_factory()  # what TRL calls, once per rollout
    assert type(game).__name__ == "Sized" and game.letters == 5
    recorded = recipe.portable()["environment"]
    assert recorded == {"name": f"{tmp_path / 'game.py'}:Sized", "args": {"letters": 5}}
    assert load(str(write(tmp_path / "run" / "recipe.yaml", recipe.to_yaml()))).environment_factory().letters == 5


def test_a_plain_class_is_built_by_its_factory(tmp_path):
    problems(tmp_path, doc())
    recipe = load(str(tmp_path / "recipe.yaml"))
    assert type(recipe.environment_factory()) is recipe.environment_class  # TRL finds the tools and get_reward on the class


RESETS = [
    # (what reset returns, the line it stops the run with; None: TRL takes it)
    (None, None),  # nothing added to the prompt
    ("My word has 5 letters.", None),  # added to the end of the prompt
    ([{"type": "text", "text": "5 letters"}], None),  # content parts, for a multimodal prompt
    ({"board": "_____"}, "environment: Echo.reset returned a dict ({'board': '_____'}); TRL adds what reset returns"),
    (("_____", {}), "environment: Echo.reset returned a tuple (('_____', {})); TRL adds"),  # gym's (observation, info)
    (5, "environment: Echo.reset returned an int (5); TRL adds what reset returns to the end of the prompt: return the text"),
]


@pytest.mark.parametrize(("returned", "line"), RESETS)
def test_what_reset_returns_is_checked_as_trl_calls_it(returned, line, tmp_path, monkeypatch):
    """TRL appends reset's return to the prompt (``content + observation``): anything but None, a str or a list fails
    there with a bare TypeError; the instance the factory builds says so in one line naming reset."""
    from grpo_ext.core.errors import RunError

    (tmp_path / "echo.py").write_text(ECHO)
    problems(tmp_path, doc(environment="echo.py:Echo"))
    game = load(str(tmp_path / "recipe.yaml")).environment_factory()
    game.returns = returned
    if line is None:
        assert game.reset(prompt="p", word="apple", hints="h") == returned
    else:
        with pytest.raises(RunError) as raised:
            game.reset(prompt="p", word="apple", hints="h")
        assert str(raised.value).startswith(line), raised.value


ECHO = '''
class Echo:
    returns = None

    def reset(self, **row):
        return self.returns

    def guess(self, word: str) -> str:
        """Guess the secret word.

        Args:
            word: the word you guess
        """
        return "wrong"

    def get_reward(self) -> float:
        return 0.0
'''


def test_validate_prints_one_line_for_a_wrong_shape(tmp_path, capsys):
    problems(tmp_path, doc(environment=["a", "b"]))
    assert cli.main(["validate", str(tmp_path / "recipe.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "rewards:" not in err, err


def test_a_hub_datasets_columns_are_checked_once_loaded(tmp_path, monkeypatch):
    """A hub dataset's columns are known once it loads (before the model): reset is checked against them there."""
    from datasets import Dataset

    from grpo_ext.run import data

    problems(tmp_path, doc(environment="game.py:WordGame", data={"hub": "someone/words"}))  # validates: columns unknown
    recipe = load(str(tmp_path / "recipe.yaml"))
    monkeypatch.setattr(data, "_hub", lambda d, split: Dataset.from_list(ROWS))
    with pytest.raises(RecipeError) as info:
        data.load(recipe.data, recipe.base_dir, 0, [], False, recipe.environment_class)
    assert info.value.problems == [
        "environment: WordGame.reset takes no prompt or hints, and TRL passes it every column of the training rows "
        "(data.hub someone/words): prompt, word, hints; add **kwargs to reset, or drop hints from the rows"
    ]
