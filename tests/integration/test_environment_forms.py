"""Environments in the forms TRL takes them, trained on the tiny ChatML model under a scripted policy (``scripted_model``;
the chat template, TRL's parser, its tool loop and the environment are real):
constructor arguments (``environment: {name:, args:}``), a ``reset`` whose text is added to the prompt, async tool
methods, an async ``get_reward`` and an async tool, and an environment that writes every prompt itself (the data
section names no training rows). The policy wins only if it read the word that reset added to the prompt, and only
if the awaited tools answered it."""

import json
import re

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import completions
from grpo_ext.settings import compat
from tests.helpers import tool_call

pytestmark = pytest.mark.skipif(
    compat.tools_problem("environment") is not None, reason="environments need trl>=1.8, transformers>=5.2"
)

GAME = '''
import asyncio


class Secret:
    """A word game built with its words (environment.args); reset names the word in the prompt."""

    def __init__(self, words: list, intro: str = "My word is"):
        self.words, self.intro, self.games = words, intro, 0

    def reset(self, **row) -> str:
        self.word, self.won = self.words[self.games % len(self.words)], False
        self.games += 1
        return f" {self.intro} {self.word}."

    async def guess(self, word: str) -> str:
        """Guess the secret word.

        Args:
            word: the word you guess
        """
        await asyncio.sleep(0)
        self.won = word == self.word
        return "right" if self.won else "wrong"

    async def get_reward(self) -> float:
        await asyncio.sleep(0)
        return 1.0 if self.won else 0.0


async def shout(text: str) -> str:
    """Say a word louder.

    Args:
        text: the word
    """
    await asyncio.sleep(0)
    return text.upper()
'''


def word_player(prompt: str) -> str:
    """Reads the word reset added to the prompt, shouts it (the async tool), guesses it (the async method), then
    stops once told right."""
    text = prompt.rsplit("My word is ", 1)  # the game's prompt, then its turns (results as user turns)
    word = re.match(r"(\w+)\.", text[-1]) if len(text) == 2 else None
    answers = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text[-1], re.S)
    if word is None or (answers and answers[-1] == "right"):
        reply = "Done."
    elif not answers:
        reply = tool_call("shout", text=word.group(1))
    else:
        reply = tool_call("guess", word=word.group(1))
    return reply + "<|im_end|>"


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


def game_recipe(tmp_path, model, data: dict) -> dict:
    (tmp_path / "game.py").write_text(GAME)
    return {
        "model": {"name": str(model)},
        "data": data,
        "tools": ["game.py:shout"],
        "environment": {"name": "game.py:Secret", "args": {"words": ["apple", "river", "stone"]}},
        "rewards": [],
        "training": {
            "max_steps": 1,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
            "max_completion_length": 400,
            "max_tool_calling_iterations": 3,
            "save_strategy": "no",
        },
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 2},
        "logging": {"completions_steps": 1},
        "output_dir": str(tmp_path / "run"),
    }


def trained(tmp_path, doc: dict) -> dict:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path)]) == 0
    return json.loads((tmp_path / "run" / "summary.json").read_text())


def test_args_a_reset_observation_and_async_methods(tmp_path, chatml_model, no_hub, scripted_model):
    scripted_model(word_player)
    data = {"prompts": ["Find my word.", "Guess the word."], "eval_prompts": ["Play the word game."]}
    summary = trained(tmp_path, game_recipe(tmp_path, chatml_model, data))
    # every game won: the word came from args through reset's text in the prompt, the awaited tools answered,
    # and the async get_reward scored it; in training, the pre-flight and the eval alike
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["rewards/Secret/mean"] for m in metrics if "rewards/Secret/mean" in m] == [1.0]
    assert summary["health"]["preflight"]["rewards"]["Secret"]["mean"] == 1.0
    assert summary["eval_before"]["rewards"]["Secret"]["pass_rate"] == 1.0
    assert summary["eval_before"]["tools"]["calls_per_sample"] == 2.0 and summary["eval_before"]["tools"]["error_back"] == 0
    logged = [json.loads(x) for x in (tmp_path / "run" / completions.FILE).read_text().splitlines()]
    assert all(re.search(r"(Find|Guess) (my|the) word\. My word is (apple|river|stone)\.", r["prompt"]) for r in logged)


def test_an_environment_that_writes_every_prompt(tmp_path, chatml_model, no_hub, scripted_model, capsys):
    scripted_model(word_player)
    doc = game_recipe(tmp_path, chatml_model, {"system_prompt": "Play the word game with your tools."})
    doc["eval"] = {"enabled": False}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    assert "none: the environment's reset writes each prompt" in capsys.readouterr().out
    summary = trained(tmp_path, doc)
    assert "data: 1 training prompt, 0 eval prompts, chat messages" in capsys.readouterr().err  # one generation batch
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["rewards/Secret/mean"] for m in metrics if "rewards/Secret/mean" in m] == [1.0]
    assert summary["health"]["preflight"]["rewards"]["Secret"]["mean"] == 1.0
    logged = [json.loads(x) for x in (tmp_path / "run" / completions.FILE).read_text().splitlines()]
    # the system prompt of the data section, then the user turn: an empty prompt with reset's text added
    shown = r"system: Play the word game with your tools\.\nuser:  My word is (apple|river|stone)\."
    assert logged and all(re.fullmatch(shown, r["prompt"]) for r in logged), logged
