"""Recipes with tools and an environment as a user writes them: a file tool, a module tool and library tools, and a
file environment, each train 2 steps on a tiny ChatML model (whose own template, like SmolLM2's, cannot show tools,
so grpo_ext's ChatML tool template takes its place); each validation rule has a bad case that exits 2 with one line
per problem before torch is imported; on a TRL without tools the recipe is refused the same way, nothing written."""

import json
import re
import sys

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.recipe import load
from grpo_ext.run import memory
from grpo_ext.settings import compat
from tests.helpers import ROOT, TIMED, run_command, tiny_doc

TOOLS = '''
def double(x: int) -> int:
    """Double a whole number.

    Args:
        x: the number to double
    """
    return 2 * x


def undocumented(x: int) -> int:
    return x


def untyped(x):
    """Return x.

    Args:
        x: anything
    """
    return x


def half_documented(x: int, y: int) -> int:
    """Add two numbers.

    Args:
        x: the first
    """
    return x + y
'''

GAME = '''
class Guess:
    """Guess a number from 1 to 9, told higher or lower after each guess."""

    def reset(self, **row) -> None:
        self.secret, self.found, self.tries = 7, False, 0

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: a whole number from 1 to 9
        """
        self.tries += 1
        if number == self.secret:
            self.found = True
            return "right"
        return "higher" if number < self.secret else "lower"

    def get_reward(self) -> float:
        return 1.0 / self.tries if self.found else 0.0


class NoReset:
    def guess(self, number: int) -> str:
        """Guess.

        Args:
            number: a guess
        """
        return "no"
'''

needs_tools = pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")
needs_environment = pytest.mark.skipif(
    compat.tools_problem("environment") is not None, reason="needs trl>=1.8, transformers>=5.2"
)


@pytest.fixture(scope="module")
def chatml_model(tmp_path_factory):
    from grpo_ext.testing import tiny

    # room for three tools' schemas, which the tiny tokenizer spells in about 1,600 tokens
    return tiny.build(tmp_path_factory.mktemp("tiny-chatml") / "model", chatml=True, context=2048)


def agent_doc(tmp_path, digit_doc, model, **top) -> dict:
    (tmp_path / "mytools.py").write_text(TOOLS)
    (tmp_path / "game.py").write_text(GAME)
    (tmp_path / "caps.csv").write_text("country,capital\nFrance,Paris\nPeru,Lima\n")
    doc = tiny_doc(digit_doc, model, tmp_path / "run")
    doc["training"].update(max_completion_length=16, max_tool_calling_iterations=2)
    doc["eval"]["enabled"] = False
    doc["explore"] = {"end_boost": None}
    doc.update(top)
    return doc


@needs_tools
def test_file_module_and_library_tools_train_two_steps(tmp_path, digit_doc, chatml_model, no_hub, capsys):
    tools = [
        "mytools.py:double",  # a file of the user's, relative to the recipe
        "grpo_ext.tools.library:calculator",  # a module:function
        {"name": "lookup", "args": {"path": "caps.csv"}},  # a library factory, its file relative to the recipe
    ]
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(agent_doc(tmp_path, digit_doc, chatml_model, tools=tools)))
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "tools the model sees:\n  double(x: int): Double a whole number.\n  calculator(expression: str): " in out
    assert "  lookup(key: str): " in out
    assert cli.main(["train", str(path)]) == 0
    err = capsys.readouterr().err
    assert "tools: the model's ChatML template cannot show tools; grpo_ext's ChatML tool template is used" in err
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "tools/call_frequency" in r] == [1, 2]  # TRL's tool loop ran each step
    recorded = yaml.safe_load((tmp_path / "run" / "recipe.yaml").read_text())["tools"]
    assert recorded[0] == f"{tmp_path / 'mytools.py'}:double" and recorded[2]["args"]["path"] == str(tmp_path / "caps.csv")


@needs_environment
def test_a_file_environment_trains_two_steps_and_rewards(tmp_path, digit_doc, chatml_model, no_hub, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(agent_doc(tmp_path, digit_doc, chatml_model, environment="game.py:Guess")))
    assert cli.main(["train", str(path)]) == 0
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "rewards/Guess/mean" in r] == [1, 2]  # get_reward scored every rollout
    # the guess tool's schema is part of every prompt: the run counts it, and the planner counts as the run does
    longest = int(re.search(r"prompt tokens: min \d+, median [\d.]+, max (\d+)", capsys.readouterr().err).group(1))
    without = {k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "environment"}
    assert longest > memory.prompt_tokens(load(str(write(tmp_path / "plain.yaml", without))), chatml_model)[0] + 30
    assert memory.prompt_tokens(load(str(path)), chatml_model)[0] == longest


def write(path, doc):
    path.write_text(yaml.safe_dump(doc))
    return path


def train_without_torch(path, timed: bool, *flags: str):
    """``grpo-ext train PATH FLAGS`` in a fresh interpreter that fails if torch was imported: (process, ratio)."""
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(['train', *sys.argv[1:]]); "
        "assert 'torch' not in sys.modules, 'imported torch'; sys.exit(rc)"
    )
    return run_command([sys.executable, "-c", code, str(path), *flags], timed, cwd=ROOT)


CALLED = [  # a worked call of the calculator, as data.examples writes it
    {"role": "user", "content": "2+3?"},
    {"role": "assistant", "tool_calls": [{"name": "calculator", "arguments": {"expression": "2+3"}}]},
    {"role": "tool", "name": "calculator", "content": "5"},
    {"role": "assistant", "content": "5"},
]


@needs_tools
def test_the_dry_run_shows_the_examples_and_the_template(tmp_path, digit_doc, chatml_model, capsys):
    doc = agent_doc(tmp_path, digit_doc, chatml_model, tools=["calculator"])
    doc["data"]["examples"] = CALLED
    path = write(tmp_path / "recipe.yaml", doc)
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "worked examples: 4 messages before every prompt, after the system prompt, with 1 tool call (data.examples)" in out
    assert "chat template: the model's own if it can show tools, else grpo_ext's ChatML tool template" in out
    (tmp_path / "mine.jinja").write_text("{{ messages }}")
    doc["model"]["chat_template"] = "mine.jinja"
    assert cli.main(["train", str(write(path, doc)), "--dry-run"]) == 0
    assert "chat template: mine.jinja (model.chat_template)" in capsys.readouterr().out


BAD = [
    # (top-level keys, the start of a problem line)
    ({"tools": ["calculater"]}, "tools[0].name: unknown tool 'calculater'; did you mean 'calculator'?"),
    ({"tools": ["mytools.py:undocumented"]}, "tools[0]: undocumented has no docstring"),  # the model would see no description
    ({"tools": ["mytools.py:untyped"]}, "tools[0]: argument 'x' of untyped has no type hint"),  # no schema for its argument
    ({"tools": ["mytools.py:nothere"]}, "tools[0].name: 'mytools.py' has no attribute 'nothere'"),
    ({"tools": [{"name": "lookup", "args": {"path": "missing.csv"}}]}, "tools[0].args: 'lookup' refused them"),
    ({"tools": ["calculator", "grpo_ext.tools.library:calculator"]}, "tools[0] and tools[1] are both named 'calculator'"),
    ({"tools": ["os:system"]}, "tools[0].name: 'os:system' comes from os"),
    ({"environment": "game.py:NoReset"}, "environment: NoReset has no reset method"),
    ({"environment": "Guess"}, "environment: unknown environment 'Guess'"),  # neither the library's nor a file's
    ({"environment": "guess_numbr"}, "environment: unknown environment 'guess_numbr'; did you mean 'guess_number'?"),
    # a worked example that calls a tool the model is not given: it would copy a call that fails
    (
        {"tools": ["calculator"], "examples": [*CALLED[:2], {**CALLED[2], "name": "calc"}, CALLED[3]]},
        "data.examples[2].name: is a result of 'calc', which the recipe does not give the model (its tools are calculator)",
    ),
    # a worked call with an argument the tool does not take: the model would copy a call that fails
    (
        {
            "tools": ["calculator"],
            "examples": [
                CALLED[0],
                {**CALLED[1], "tool_calls": [{"name": "calculator", "arguments": {"expr": "2+3"}}]},
                *CALLED[2:],
            ],
        },
        "data.examples[1].tool_calls[0].arguments: calculator takes expression, not expr",
    ),
    ({"tools": ["calculator"], "examples": CALLED, "data_chat": False}, "data.examples: worked examples are chat turns"),
    ({"tools": ["calculator"], "data_chat": False}, "tools: the model sees its tools through the chat template"),
    ({"tools": ["calculator"], "examples": [{"role": "user", "content": "2+3?"}]}, "data.examples: ends with a user message"),
]


@pytest.mark.parametrize("top,start", BAD)
def test_each_rule_refuses_before_torch(top, start, tmp_path, digit_doc, tiny_model):
    if compat.tools_problem("tools"):
        pytest.skip("on a TRL without tools every such recipe is refused by the version rule (test below)")
    doc = agent_doc(tmp_path, digit_doc, tiny_model, **{k: v for k, v in top.items() if k not in ("examples", "data_chat")})
    if "examples" in top:
        doc["data"]["examples"] = top["examples"]
    if "data_chat" in top:
        doc["data"]["chat"] = top["data_chat"]
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    proc, _ = train_without_torch(path, False)
    assert proc.returncode == 2, proc.stderr
    assert f"recipe.yaml: {start}" in proc.stderr or f"\n  - {start}" in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


LIGHT = [
    # (top-level keys, the problem line): a tool or an environment of the user's, refused without transformers
    ({"tools": ["mytools.py:undocumented"]}, "tools[0]: undocumented has no docstring"),
    ({"tools": ["mytools.py:untyped"]}, "tools[0]: argument 'x' of untyped has no type hint"),
    ({"tools": ["mytools.py:half_documented"]}, "tools[0]: argument 'y' of half_documented has no line in its docstring's Args:"),
    ({"environment": "game.py:NoReset"}, "environment: NoReset has no reset method"),  # its guess tool is read too
]


@pytest.mark.parametrize("top,problem", LIGHT)
def test_a_bad_tool_or_environment_is_refused_without_transformers(top, problem, tmp_path, digit_doc, tiny_model):
    """Reading a tool's docstring and hints needs neither transformers nor torch (grpo_ext/tools/schema.py)."""
    if compat.tools_problem("environment"):
        pytest.skip("on a TRL without tools every such recipe is refused by the version rule")
    path = write(tmp_path / "recipe.yaml", agent_doc(tmp_path, digit_doc, tiny_model, **top))
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(['validate', sys.argv[1]]); "
        "heavy = {'torch', 'transformers'} & set(sys.modules); assert not heavy, f'imported {heavy}'; sys.exit(rc)"
    )
    proc, _ = run_command([sys.executable, "-c", code, str(path)], False, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert problem in proc.stderr, proc.stderr


@pytest.mark.parametrize("timed", TIMED)
def test_a_trl_without_tools_refuses_the_recipe(timed, tmp_path, digit_doc, tiny_model):
    """On the oldest matrix row (TRL 0.19) the version rule refuses; on a newer one, the same check is shown refusing
    an older version by hand (compat.tools_problem's doctest) and this recipe passes the rule."""
    doc = agent_doc(tmp_path, digit_doc, tiny_model, tools=["calculator"])
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    proc, ratio = train_without_torch(path, timed, "--dry-run")
    problem = compat.tools_problem("tools")
    if problem is None:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == 2 and problem in proc.stderr, proc.stderr
        assert not (tmp_path / "run").exists()
    if timed:
        assert ratio < 1 / 2, f"{ratio:.2f} of a torch import"
