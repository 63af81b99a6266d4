"""Several environments in one run, trained on the tiny ChatML model under a scripted policy (``scripted_model``; the
chat template, TRL's parser, its tool loop and the environments are real): a mixture of two sources, each row naming
its environment in its ``environment`` column. The policy calls the one tool its prompt shows and gives up when it
is shown both, so a reward of 1 says that the row was shown its own environment's tools alone, played in it, and
scored by its ``get_reward``; a bad row is refused before torch."""

import json
import re
import subprocess
import sys

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.run import completions
from grpo_ext.settings import compat
from tests.helpers import ROOT, jsonl

pytestmark = pytest.mark.skipif(
    compat.tools_problem("environment") is not None, reason="environments need trl>=1.8, transformers>=5.2"
)

GAMES = '''
class Doors:
    """Open the row's door."""

    def reset(self, door, **row) -> None:
        self.door, self.opened = door, None

    def open_door(self, number: int) -> str:
        """Open a door.

        Args:
            number: the door's number
        """
        self.opened = number
        return f"door {number} is open"

    def get_reward(self) -> float:
        return 1.0 if self.opened == self.door else 0.0


class Colours:
    """Paint the row's colour."""

    def reset(self, colour, **row) -> None:
        self.colour, self.painted = colour, None

    def paint(self, colour: str) -> str:
        """Paint the wall.

        Args:
            colour: the colour to paint
        """
        self.painted = colour
        return f"the wall is {colour}"

    def get_reward(self) -> float:
        return 1.0 if self.painted == self.colour else 0.0
'''

# every row has both columns (a mixture's sources share their columns); its environment column picks its game
DOORS = [{"prompt": f"Open door {n}.", "door": n, "colour": "", "environment": "doors"} for n in (3, 7)]
COLOURS = [{"prompt": f"Paint the wall {c}.", "door": 0, "colour": c, "environment": "colours"} for c in ("red", "blue")]


def call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def player(prompt: str) -> str:
    """Calls the one tool the prompt shows, with what the question asks; stops once answered; gives up when shown
    both tools (a row shown another environment's tools)."""
    doors, colours = '"open_door"' in prompt, '"paint"' in prompt
    door, colour = re.search(r"Open door (\d+)\.", prompt), re.search(r"Paint the wall (\w+)\.", prompt)
    if "<tool_response>\n" in prompt or doors == colours:  # a result came back (the system turn names the tag)
        reply = "Done."
    elif doors and door:
        reply = call("open_door", number=int(door.group(1)))
    elif colours and colour:
        reply = call("paint", colour=colour.group(1))
    else:
        reply = "Done."
    return reply + "<|im_end|>"


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


def recipe(tmp_path, model) -> dict:
    (tmp_path / "games.py").write_text(GAMES)
    jsonl(tmp_path / "doors.jsonl", DOORS)
    jsonl(tmp_path / "colours.jsonl", COLOURS)
    return {
        "model": {"name": str(model)},
        "data": {
            "mixture": [{"file": "doors.jsonl", "weight": 1}, {"file": "colours.jsonl", "weight": 1}],
            "eval_prompts": [
                {**DOORS[0], "door": 5, "prompt": "Open door 5."},
                {**COLOURS[0], "colour": "green", "prompt": "Paint the wall green."},
            ],
        },
        "environment": {"doors": "games.py:Doors", "colours": {"name": "games.py:Colours", "args": {}}},
        "rewards": [],
        "training": {
            "max_steps": 2,
            "num_generations": 2,
            "per_device_train_batch_size": 4,  # two rows a step: the four rows in two steps
            "max_completion_length": 200,
            "max_tool_calling_iterations": 2,
            "save_strategy": "no",
        },
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 2},
        "logging": {"completions_steps": 1},
        "output_dir": str(tmp_path / "run"),
    }


def test_each_row_plays_in_its_own_environment(tmp_path, chatml_model, no_hub, scripted_model):
    scripted_model(player)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe(tmp_path, chatml_model)))
    assert cli.main(["train", str(path)]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # the pre-flight and the eval play each row in its own environment too (the eval's rows: one of each)
    assert summary["health"]["preflight"]["rewards"]["Doors"]["mean"] == 1.0
    assert summary["health"]["preflight"]["rewards"]["Colours"]["mean"] == 1.0
    for when in ("eval_before", "eval_after"):
        assert summary[when]["rewards"]["Doors"]["pass_rate"] == summary[when]["rewards"]["Colours"]["pass_rate"] == 1.0
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    stepped = [m for m in metrics if "rewards/Doors/mean" in m]
    assert len(stepped) == 2 and all(m["rewards/Doors/mean"] == m["rewards/Colours/mean"] == 1.0 for m in stepped)
    logged = [json.loads(x) for x in (tmp_path / "run" / completions.FILE).read_text().splitlines()]
    asked = {r["prompt"].rsplit("\n", 1)[-1] for r in logged}  # the user's turn, last
    assert asked <= {row["prompt"] for row in DOORS + COLOURS} and len(logged) == 4, (
        asked
    )  # the first step (logging.completions_steps)
    assert any("Open door" in a for a in asked) and any("Paint" in a for a in asked), asked
    for r in logged:  # scored by its own environment's get_reward alone, after a call of its own tool
        own, other = ("Doors", "Colours") if "Open door" in r["prompt"] else ("Colours", "Doors")
        assert r["rewards"] == {own: 1.0, other: None}, r
        assert ("open_door" if own == "Doors" else "paint") in r["completion"], r


def test_a_row_naming_no_environment_is_refused_before_torch(tmp_path, chatml_model):
    doc = recipe(tmp_path, chatml_model)
    jsonl(tmp_path / "colours.jsonl", [{**row, "environment": "colors"} for row in COLOURS])
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(['train', sys.argv[1]]); print('torch' in sys.modules); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == "False\n", (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [
        f"error: {path}: environment: line 1 of the training rows (data.mixture[1].file colours.jsonl) names 'colors', "
        "not one of the environments (colours, doors); set each row's environment column to one of them, or give a "
        "mixture source an environment: key that names one for its rows (1 more row names none of them)"
    ]
