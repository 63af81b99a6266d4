"""A new user's first hour with tools, an environment, a judge and code: four tasks written as a user writes them
(files of their own, a recipe each), each validated, dry-run and trained 2 steps on the tiny model, then the
mistakes a newcomer makes in each, as a table of (the files changed, the command, what the one line says, the exit
status): every one refused in one line that names the key and the fix, no traceback, nothing written.

Task 1 gives the model a function of the user's (``mytools.py:lookup_capital``) through a chat template of the user's
(the tiny model's own cannot show tools); task 2 an environment class (``game.py:WordGame``) built with constructor
args, whose ``reset`` reads two columns of the rows and writes a board into the prompt; task 3 grades with
``llm_judge`` against a standard-library OpenAI-compatible server on localhost (as test_judge_said.py), which refuses
any model name but its own and any path but ``/v1``; task 4 runs ``code_tests`` on five programming tasks, one of
them stdin/stdout pairs. In tasks 1 and 2 a scripted policy stands in for the model (``scripted_model``; the
template, TRL's parser and tool loop, the tools and the rewards are real), so the calls are made and
scored; tasks 3 and 4 train the tiny model as it is.
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from grpo_ext.settings import compat
from tests.helpers import jsonl, run_cli

# --- the tasks' files ------------------------------------------------------------------------------------------------

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Norway": "Oslo", "Egypt": "Cairo"}

MYTOOLS = '''
CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima", "norway": "Oslo", "egypt": "Cairo"}


def lookup_capital(country: str) -> str:
    """Find the capital city of a country.

    Args:
        country: the country's name in English, e.g. "Japan"
    """
    return CAPITALS.get(country.strip().lower(), f"no capital known for {country!r}")


def capital_nodoc(country: str) -> str:
    return CAPITALS.get(country.lower(), "?")


def capital_untyped(country):
    """Find the capital.

    Args:
        country: the country
    """
    return CAPITALS.get(country.lower(), "?")
'''

# the tiny model's turns (<|user|> ... <|end|>) with the tools listed in the system turn and each call written as a
# <tool_call> line, the form TRL's Qwen parser reads back; a tool's result comes back in a user turn
TOOLS_JINJA = """\
{%- for m in messages %}
    {%- if m['role'] == 'system' or (loop.first and tools) %}
        {{- '<|system|>' + (m['content'] if m['role'] == 'system' else '') }}
        {%- if tools %}
            {{- ' Tools:' }}
            {%- for t in tools %}{{ ' ' + (t | tojson) }}{% endfor %}
            {{- ' Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call>' }}
        {%- endif %}
        {{- '<|end|>' }}
        {%- if m['role'] != 'system' %}{{ '<|' + m['role'] + '|>' + m['content'] + '<|end|>' }}{% endif %}
    {%- elif m['role'] == 'assistant' and m.get('tool_calls') %}
        {{- '<|assistant|>' + (m['content'] or '') }}
        {%- for c in m['tool_calls'] %}
            {%- set c = c['function'] if c['function'] is defined else c %}
            {%- set arguments = c['arguments'] if c['arguments'] is string else c['arguments'] | tojson %}
            {{- '<tool_call>{"name": "' + c['name'] + '", "arguments": ' + arguments + '}</tool_call>' }}
        {%- endfor %}
        {{- '<|end|>' }}
    {%- elif m['role'] == 'tool' %}
        {{- '<|user|><tool_response>' + m['content'] + '</tool_response><|end|>' }}
    {%- else %}
        {{- '<|' + m['role'] + '|>' + m['content'] + '<|end|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}
"""

# a template that shows the tools but drops the calls and their results
TOOLS_DROPPED_JINJA = """\
{%- for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}<|end|>{% endfor %}
{%- if tools %}<|system|>{{ tools | tojson }}<|end|>{% endif %}{% if add_generation_prompt %}<|assistant|>{% endif %}
"""

GAME = '''
class WordGame:
    """Guess a hidden word, a letter at a time or whole."""

    def __init__(self, max_misses: int = 6, blank: str = "_"):
        self.max_misses, self.blank = max_misses, blank

    def reset(self, word: str, hint: str, **row) -> str:
        self.word, self.seen, self.misses, self.solved = word.lower(), set(), 0, False
        return f" Hint: {hint}. The word: {self._board()}"

    def _board(self) -> str:
        return " ".join(c if c in self.seen else self.blank for c in self.word)

    def letter(self, char: str) -> str:
        """Ask whether a letter is in the word.

        Args:
            char: one letter, a to z
        """
        char = char.strip().lower()[:1]
        if char in self.word:
            self.seen.add(char)
        else:
            self.misses += 1
        return self._board()

    def solve(self, word: str) -> str:
        """Say the whole word.

        Args:
            word: your guess at the hidden word
        """
        self.solved = word.strip().lower() == self.word
        self.misses += not self.solved
        return "right" if self.solved else "wrong"

    def get_reward(self) -> float:
        return 1.0 - self.misses / (self.max_misses + 1) if self.solved else 0.0
'''

# the mistakes' own environments: a public helper, a reset that returns its state as gym's does, three problems at once
GAME_MISTAKES = '''
class Helper:
    def reset(self, **row) -> None:
        self.word = row["word"]

    def board(self) -> str:
        return "_" * len(self.word)

    def solve(self, word: str) -> str:
        """Say the whole word.

        Args:
            word: your guess
        """
        return "right" if word == self.word else "wrong"

    def get_reward(self) -> float:
        return 0.0


class StateReset(Helper):
    def reset(self, **row) -> dict:
        self.word = row["word"]
        return {"board": "_" * len(self.word)}

    board = None


class Strict:
    def __init__(self, words):
        self.words = words

    def reset(self, word):
        self.word = word

    def solve(self, word: str) -> str:
        """Say the whole word.

        Args:
            word: your guess
        """
        return "right" if word == self.word else "wrong"

    def get_reward(self, completion) -> float:
        return 0.0
'''

WORDS = {"apple": "a red or green fruit", "river": "water that flows to the sea", "tiger": "a striped cat"}
WORDS |= {"piano": "it has 88 keys", "eagle": "a large bird of prey", "lemon": "a sour yellow fruit"}

CODE_TASKS = [
    {
        "prompt": "Write a function is_even(n) that returns True when n is even.",
        "tests": "assert is_even(4)\nassert not is_even(7)",
    },
    {
        "prompt": "Write a function reverse_words(s) that reverses the order of the words in s.",
        "tests": "assert reverse_words('a b c') == 'c b a'\nassert reverse_words('hi') == 'hi'",
    },
    {
        "prompt": "Write a function count_vowels(s) returning how many of a, e, i, o, u s holds.",
        "tests": "assert count_vowels('banana') == 3\nassert count_vowels('xyz') == 0",
    },
    {  # a list of asserts, one case each
        "prompt": "Write a function fizz(n) returning 'Fizz' for multiples of 3, else str(n).",
        "tests": ["assert fizz(3) == 'Fizz'", "assert fizz(4) == '4'"],
    },
    {  # stdin/stdout pairs
        "prompt": "Write a program that reads two integers on one line and prints their sum.",
        "tests": [{"input": "2 3", "output": "5"}, {"input": "10 -4", "output": "6"}],
    },
]

# a right function, then the "example usage" a small model writes after it (it reads input: it must not run)
ANSWER_MD = """Here is a function that counts vowels:

```python
def count_vowels(s):
    return sum(1 for c in s.lower() if c in "aeiou")
```

Example usage:

```python
print(count_vowels("banana"))  # 3
text = input("Enter text: ")
print(count_vowels(text))
```
"""

TESTS_PY = "assert count_vowels('banana') == 3\nassert count_vowels('xyz') == 0\nassert count_vowels('AEIOU') == 5\n"


# --- the scripted policies -------------------------------------------------------------------------------------------


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def capital_player(prompt: str) -> str:
    """Asked for a country's capital, it calls lookup_capital; once a result is back, it answers with it."""
    turn = prompt.rsplit("capital of ", 1)[-1]
    result = re.findall(r"<tool_response>(.*?)</tool_response>", turn)
    country = re.match(r"(\w+)\?", turn)
    text = f"Answer: {result[-1]}" if result else _call("lookup_capital", country=country.group(1)) if country else "?"
    return text + "<|end|>"


def word_player(prompt: str) -> str:
    """Reads the hint reset wrote, asks for a letter the word lacks (one miss), then solves it; done when told right."""
    turn = prompt.rsplit("Hint: ", 1)[-1]
    hint = next((h for h in WORDS.values() if turn.startswith(h)), None)
    results = re.findall(r"<tool_response>(.*?)</tool_response>", turn)
    if hint is None or "right" in results:
        text = "Done."
    elif not results:
        text = _call("letter", char="z")
    else:
        text = _call("solve", word=next(w for w, h in WORDS.items() if h == hint))
    return text + "<|end|>"


# --- a judge on localhost --------------------------------------------------------------------------------------------

SERVED = "my-judge"


class Judge:
    """An OpenAI-compatible chat-completions server in this process, as ``transformers serve`` answers: only under
    ``/v1``, only for the model it serves (400, its message under ``detail``, otherwise), ``grade`` every time;
    ``heard`` keeps what it was asked."""

    def __init__(self, grade: str = "8"):
        judge = self
        self.heard: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path != "/v1/models":
                    return self.send(404, {"detail": "Not Found"})
                self.send(200, {"object": "list", "data": [{"id": SERVED, "object": "model", "created": 0, "owned_by": "me"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                if self.path != "/v1/chat/completions":
                    return self.send(404, {"detail": "Not Found"})
                if body["model"] != SERVED:
                    return self.send(400, {"detail": f"Server is pinned to '{SERVED}'; requested '{body['model']}'."})
                judge.heard.append(body["messages"][-1]["content"])
                message = {"role": "assistant", "content": grade}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self.send(200, {"id": "g", "object": "chat.completion", "created": 0, "model": SERVED, "choices": [choice]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def judge():
    with Judge() as served:
        yield served


# --- the tasks as a user writes them ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_tiny(tmp_path_factory):
    """The tiny model with room for a tool's schema in the prompt (its own template, which cannot show tools)."""
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-long") / "model", context=1024)


def training(**keys) -> dict:
    return {"max_steps": 2, "per_device_train_batch_size": 4, "num_generations": 4, "save_strategy": "no", **keys}


def capitals_task(folder: Path, model: Path) -> Path:
    (folder / "mytools.py").write_text(MYTOOLS)
    (folder / "tools.jinja").write_text(TOOLS_JINJA)
    jsonl(folder / "questions.jsonl", [{"prompt": f"What is the capital of {c}?", "answer": a} for c, a in CAPITALS.items()])
    doc = {
        "model": {"name": str(model), "chat_template": "tools.jinja"},
        "data": {
            "file": "questions.jsonl",
            "eval_size": 2,
            "system_prompt": "Call lookup_capital, then end with: Answer: <capital>.",
        },
        "tools": ["mytools.py:lookup_capital"],
        "rewards": ["answer_match", {"name": "tool_success", "weight": 0.2}],
        "training": training(max_completion_length=256, max_tool_calling_iterations=2),
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 1},
        "output_dir": "runs/capitals",
    }
    return write(folder / "capitals.yaml", doc)


def words_task(folder: Path, model: Path) -> Path:
    (folder / "game.py").write_text(GAME)
    (folder / "mistakes.py").write_text(GAME_MISTAKES)
    (folder / "tools.jinja").write_text(TOOLS_JINJA)
    rows = [{"prompt": "Find the hidden word with letter and solve.", "word": w, "hint": h} for w, h in WORDS.items()]
    jsonl(folder / "words.jsonl", rows)
    doc = {
        "model": {"name": str(model), "chat_template": "tools.jinja"},
        "data": {"file": "words.jsonl", "eval_size": 2},
        "environment": {"name": "game.py:WordGame", "args": {"max_misses": 4}},
        "rewards": [],
        "training": training(max_completion_length=320, max_tool_calling_iterations=3),
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 1},
        "output_dir": "runs/words",
    }
    return write(folder / "words.yaml", doc)


def judged_task(folder: Path, model: Path, url: str) -> Path:
    asks = ["Write a haiku about rain.", "Describe a cat in one sentence.", "Give one tip for sleeping well."]
    asks += ["Name a colour you like.", "Say hello to a friend.", "Explain what a map is."]
    jsonl(folder / "asks.jsonl", [{"prompt": a, "style": "friendly"} for a in asks])
    rubric = "How {style} is this reply to '{prompt}', from 0 to 10? Reply with the number only.\n\n{completion}"
    doc = {
        "model": {"name": str(model)},
        "data": {"file": "asks.jsonl", "eval_size": 2},
        "rewards": [{"name": "llm_judge", "args": {"base_url": url, "model": SERVED, "rubric": rubric, "max_tokens": 2}}],
        "training": training(max_completion_length=8),
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 2},
        "output_dir": "runs/judged",
    }
    return write(folder / "judged.yaml", doc)


def code_task(folder: Path, model: Path) -> Path:
    jsonl(folder / "tasks.jsonl", CODE_TASKS)
    (folder / "answer.md").write_text(ANSWER_MD)
    (folder / "tests.py").write_text(TESTS_PY)
    doc = {
        "model": {"name": str(model)},
        "data": {"file": "tasks.jsonl", "eval_size": 1, "system_prompt": "Answer with one Python code block."},
        "rewards": ["code_tests", {"name": "code_tests", "args": {"all_or_nothing": True}}],
        "training": training(max_completion_length=8),
        "eval": {"samples": 2},
        "health": {"preflight_prompts": 2},
        "output_dir": "runs/code",
    }
    return write(folder / "code.yaml", doc)


def write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def steps(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def first_runs(recipe: Path, capsys) -> tuple[str, dict]:
    """``validate``, ``train --dry-run`` and ``train`` as the README runs them, each exiting 0: (the dry run's output,
    the run's summary)."""
    assert run_cli(["validate", str(recipe)]) == 0, capsys.readouterr().err
    assert run_cli(["train", str(recipe), "--dry-run"]) == 0, capsys.readouterr().err
    shown = capsys.readouterr().out
    assert run_cli(["train", str(recipe)]) == 0, capsys.readouterr().err[-2000:]
    capsys.readouterr()
    return shown, json.loads((recipe.parent / "runs" / recipe.stem / "summary.json").read_text())


needs_tools = pytest.mark.skipif(compat.tools_problem("tools") is not None, reason="tools need trl>=0.26, transformers>=5")
needs_environment = pytest.mark.skipif(
    compat.tools_problem("environment") is not None, reason="environments need trl>=1.8, transformers>=5.2"
)


@needs_tools
def test_task_1_a_tool_of_my_own(tmp_path, long_tiny, no_hub, monkeypatch, scripted_model, capsys):
    monkeypatch.chdir(tmp_path)  # output_dir is relative, as a user writes it
    scripted_model(capital_player)
    shown, summary = first_runs(capitals_task(tmp_path, long_tiny), capsys)
    assert "  lookup_capital(country: str): Find the capital city of a country." in shown
    assert "chat template: tools.jinja (model.chat_template)" in shown
    # every question looked up and answered from the result, in training and in the eval
    assert [(m["rewards/answer_match/mean"], m["rewards/tool_success/mean"]) for m in steps(tmp_path / "runs/capitals")] == [
        (1.0, 1.0),
        (1.0, 1.0),
    ]
    for when in ("eval_before", "eval_after"):
        assert summary[when]["rewards"]["answer_match"]["pass_rate"] == 1.0
        assert summary[when]["tools"]["calls_per_sample"] == 1.0


@needs_environment
def test_task_2_an_environment_of_my_own(tmp_path, long_tiny, no_hub, monkeypatch, scripted_model, capsys):
    monkeypatch.chdir(tmp_path)
    scripted_model(word_player)
    shown, summary = first_runs(words_task(tmp_path, long_tiny), capsys)
    assert "  letter(char: str): Ask whether a letter is in the word.\n  solve(word: str): Say the whole word." in shown
    # every game won after one miss: 1 - 1/(max_misses + 1) with the args' max_misses 4 (the default 6 gives 0.857);
    # the hint reached the prompt through reset, which read two columns of the row
    assert [m["rewards/WordGame/mean"] for m in steps(tmp_path / "runs/words")] == [pytest.approx(0.8)] * 2
    assert summary["eval_after"]["rewards"]["WordGame"]["mean"] == pytest.approx(0.8)


def test_task_3_a_judge(tmp_path, tiny_model, judge, no_hub, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shown, summary = first_runs(judged_task(tmp_path, tiny_model, judge.url), capsys)
    assert "rewards: llm_judge (weight 1.0)" in shown
    assert [m["rewards/llm_judge/mean"] for m in steps(tmp_path / "runs/judged")] == [pytest.approx(0.8)] * 2
    assert summary["eval_after"]["rewards"]["llm_judge"]["mean"] == pytest.approx(0.8)
    # the rubric as the judge read it: the row's style column, the prompt (a chat prompt's turns as "role: text") and
    # the completion filled in
    asked = [h for h in judge.heard if h.startswith("How friendly is this reply to 'user: ")]
    assert asked and all(re.match(r"How friendly is this reply to 'user: [A-Z][^']+', from 0 to 10\?", h) for h in asked)


def test_task_4_code(tmp_path, tiny_model, no_hub, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shown, summary = first_runs(code_task(tmp_path, tiny_model), capsys)
    assert "rewards: code_tests (weight 1.0), code_tests_2 (weight 1.0)" in shown
    # every row's tests were read (asserts, a list of asserts, stdin/stdout pairs): a score for each sample, no None
    for line in steps(tmp_path / "runs/code"):
        assert line["rewards/code_tests/mean"] == 0.0 and not line.get("reward_none/code_tests"), line
    assert summary["eval_before"]["rewards"]["code_tests"]["mean"] == 0.0
    # a right function followed by an example that reads input: the function passes, the example does not run
    argv = ["rewards", "score", "code_tests", "--completion", ANSWER_MD, "--column", f"tests={TESTS_PY}"]
    assert run_cli(argv) == 0
    assert capsys.readouterr().out == "code_tests: 1.0\n"
    pairs = "tests=[{input: '2 3', output: '5'}, {input: '10 -4', output: '6'}]"
    program = "Sure:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\n"
    assert run_cli(["rewards", "score", "code_tests", "--completion", program, "--column-yaml", pairs]) == 0
    assert capsys.readouterr().out == "code_tests: 1.0\n"


# --- the mistakes ----------------------------------------------------------------------------------------------------

CAPITAL_ROWS = "".join(json.dumps({"prompt": f"What is the capital of {c}?", "capital": a}) + "\n" for c, a in CAPITALS.items())
SECRET_ROWS = "".join(json.dumps({"prompt": "Find the word.", "secret": w, "hint": h}) + "\n" for w, h in WORDS.items())
TEST_ROWS = "".join(json.dumps({"prompt": t["prompt"], "test": t["tests"]}) + "\n" for t in CODE_TASKS)
CALLED_BY_NAME = (
    "data.examples=[{role: user, content: 'Capital of Chile?'}, "
    "{role: assistant, tool_calls: [{name: lookup_capital, arguments: {name: Chile}}]}, "
    "{role: tool, name: lookup_capital, content: Santiago}, {role: assistant, content: 'Answer: Santiago'}]"
)
SCORE = ["rewards", "score", "code_tests", "--completion", ANSWER_MD]


def case(name: str, task: str, argv: list[str], said: str | tuple, status: int = 2, files: dict | None = None, loads=False):
    """A mistake: the task's files with ``files`` written over them, the command (``{url}``: the judge's, ``{root}``:
    the same without /v1, ``{closed}``: a port nothing listens on), what its one line says (each part, in a tuple),
    its exit status, and whether the model loads before it is said (the tokenizer is needed to tell)."""
    return pytest.param(task, files or {}, argv, (said,) if isinstance(said, str) else said, status, loads, id=name)


MISTAKES = [
    # -- 1. a tool of my own
    # the answers under another column name than the one answer_match reads
    case(
        "answer-column",
        "capitals",
        ["validate", "capitals.yaml"],
        (
            "rewards[0] (answer_match) needs column 'answer', which the training rows (data.file questions.jsonl) lack",
            "(columns: capital, prompt); add it to the data, or point the reward at a column they have",
        ),
        files={"questions.jsonl": CAPITAL_ROWS},
    ),
    # a tool without a docstring: the model would read no description
    case(
        "tool-docstring",
        "capitals",
        ["validate", "capitals.yaml", "tools=[mytools.py:capital_nodoc]"],
        "tools[0]: capital_nodoc has no docstring; write what it does, then Args: with a line for each argument",
    ),
    # an argument without a type hint, and no return hint: a line each
    case(
        "tool-hints",
        "capitals",
        ["validate", "capitals.yaml", "tools=[mytools.py:capital_untyped]"],
        (
            "argument 'country' of capital_untyped has no type hint; write country: str",
            "capital_untyped has no return type hint; write -> str",
        ),
    ),
    # the function's name misspelled
    case(
        "tool-name",
        "capitals",
        ["validate", "capitals.yaml", "tools=[mytools.py:lookup_capitol]"],
        "tools[0].name: 'mytools.py' has no attribute 'lookup_capitol'; did you mean 'lookup_capital'?",
    ),
    # a reward misspelled
    case(
        "reward-name",
        "capitals",
        ["validate", "capitals.yaml", "rewards.0=answer_mach"],
        "rewards[0].name: unknown reward 'answer_mach'; did you mean 'answer_match'?",
    ),
    # a worked example that calls the tool with an argument it does not take
    case(
        "example-argument",
        "capitals",
        ["validate", "capitals.yaml", CALLED_BY_NAME],
        "data.examples[1].tool_calls[0].arguments: lookup_capital takes country, not name",
    ),
    # the tiny model's own template, which cannot show tools: a recipe error, with a file to start from (was exit 1)
    case(
        "no-tool-template",
        "capitals",
        ["train", "capitals.yaml", "model.chat_template=null"],
        ("its chat template cannot show tools to the model", "set model.chat_template to a Jinja file", "chatml-tools.jinja"),
        loads=True,
    ),
    # a template of my own that drops the calls and their results (was exit 1)
    case(
        "template-drops-calls",
        "capitals",
        ["train", "capitals.yaml", "model.chat_template=dropped.jinja"],
        ("model.chat_template: ", "dropped.jinja does not render a tool call and its result"),
        files={"dropped.jinja": TOOLS_DROPPED_JINJA},
        loads=True,
    ),
    # -- 2. an environment of my own
    # a public helper method: offered to the model as a tool, so it needs a docstring, or a leading underscore (the
    # line said the docstring alone)
    case(
        "public-helper",
        "words",
        ["validate", "words.yaml", "environment.name=mistakes.py:Helper"],
        (
            "environment.board: board has no docstring; write what it does, then Args: with a line for each argument",
            ", or name it _board if it is not a tool",
        ),
    ),
    # reset reads a column the rows call otherwise
    case(
        "reset-column",
        "words",
        ["validate", "words.yaml"],
        (
            "environment: WordGame.reset needs word, which the training rows (data.file words.jsonl) lack",
            "(columns: secret, hint, prompt); add the column to the rows, or give word a default",
        ),
        files={"words.jsonl": SECRET_ROWS},
    ),
    # a constructor argument misspelled
    case(
        "constructor-argument",
        "words",
        ["validate", "words.yaml", "environment.args.max_miss=3"],
        "environment.args: WordGame takes no max_miss (arguments of WordGame: max_misses, blank)",
    ),
    # the class's name misspelled
    case(
        "class-name",
        "words",
        ["validate", "words.yaml", "environment.name=game.py:Wordgame"],
        ("environment.name: ", "game.py' has no attribute 'Wordgame'; did you mean 'WordGame'?"),
    ),
    # three problems at once, each its own line in one round (get_reward's alone was said)
    case(
        "three-at-once",
        "words",
        ["validate", "words.yaml", "environment=mistakes.py:Strict"],
        (
            "environment: Strict.get_reward takes completion; TRL calls it with nothing",
            "environment.args: Strict needs words",
            "environment: Strict.reset takes no hint or prompt",
        ),
    ),
    # a reset that returns its state, as a gym environment does: one line naming it (it was "training failed:
    # TypeError: can only concatenate str (not "dict") to str"); a fault of the run, exit 1
    case(
        "reset-returns-state",
        "words",
        ["train", "words.yaml", "environment=mistakes.py:StateReset"],
        (
            "environment: StateReset.reset returned a dict ({'board': '_____'}); TRL adds what reset returns to the end",
            "of the prompt: return the text the model is to read (a str), or None",
        ),
        status=1,
        loads=True,
    ),
    # -- 3. a judge
    # a model name the server does not serve: the line names the one it does
    case(
        "judge-model",
        "judged",
        ["train", "judged.yaml", "rewards.0.args.model=tiny"],
        (
            "refused a test request: BadRequestError (HTTP 400): Server is pinned to 'my-judge'; requested 'tiny'",
            "; it serves 'my-judge': set model to that name",
        ),
    ),
    # base_url without /v1 (it was NotFoundError (HTTP 404): Not Found, and nothing more)
    case(
        "judge-without-v1",
        "judged",
        ["train", "judged.yaml", "rewards.0.args.base_url={root}"],
        (
            "refused a test request: NotFoundError (HTTP 404): Not Found; OpenAI-compatible servers",
            "answer under /v1: set base_url to {root}/v1",
        ),
    ),
    # no server at that port
    case(
        "judge-not-listening",
        "judged",
        ["train", "judged.yaml", "rewards.0.args.base_url=http://127.0.0.1:{closed}/v1"],
        "did not answer a test request: APIConnectionError",
    ),
    # the rubric names a column the rows lack
    case(
        "rubric-column",
        "judged",
        ["validate", "judged.yaml", "rewards.0.args.rubric=How {tone} is it? {completion}"],
        (
            "rewards[0] (llm_judge) needs column 'tone', which the training rows",
            "(data.file asks.jsonl) lack (columns: style, prompt)",
        ),
    ),
    # an argument misspelled
    case(
        "judge-argument",
        "judged",
        ["validate", "judged.yaml", "rewards.0.args.rubrik=Grade it."],
        "rewards[0].args: got an unexpected keyword argument 'rubrik' (arguments of 'llm_judge': base_url, model, rubric,",
    ),
    # a rubric that never shows the judge the completion
    case(
        "rubric-without-completion",
        "judged",
        ["validate", "judged.yaml", "rewards.0.args.rubric=Grade it from 0 to 10."],
        "rubric: single mode needs {completion} in the rubric",
    ),
    # -- 4. code
    # the tests under another column name
    case(
        "tests-column",
        "code",
        ["validate", "code.yaml"],
        (
            "rewards[0] (code_tests) needs column 'tests', which the training rows",
            "(data.file tasks.jsonl) lack (columns: test, prompt)",
        ),
        files={"tasks.jsonl": TEST_ROWS},
    ),
    # the reward misspelled
    case(
        "code-reward-name",
        "code",
        ["validate", "code.yaml", "rewards.0=code_test"],
        "rewards[0].name: unknown reward 'code_test'; did you mean 'code_tests'?",
    ),
    # its column argument misspelled
    case(
        "tests-column-argument",
        "code",
        ["validate", "code.yaml", "rewards.0={name: code_tests, args: {test_column: test}}"],
        "rewards[0].args: got an unexpected keyword argument 'test_column' (arguments of 'code_tests': tests_column,",
    ),
    # tests with a syntax error: not scored, and why
    case(
        "tests-syntax",
        "code",
        [*SCORE, "--column", "tests=assert count_vowels('xyz' == 0"],
        (
            "code_tests: None; the 'tests' column holds no test this reward reads",
            "(read as Python: SyntaxError at line 1: '(' was never closed)",
        ),
        status=0,
    ),
    # stdin/stdout pairs given as text (--column) where they are a list (--column-yaml)
    case(
        "pairs-as-text",
        "code",
        ["rewards", "score", "code_tests", "--completion", "print(sum(map(int, input().split())))"]
        + ["--column", "tests=[{input: '2 3', output: '5'}]"],
        ("the text of input/output pairs: give the pairs as a list, not as text", "--column-yaml tests="),
        status=0,
    ),
    # the tests given under another column name
    case(
        "score-column",
        "code",
        [*SCORE, "--column", "test=" + TESTS_PY],
        "code_tests reads column 'tests' of each row; pass --column tests=VALUE",
    ),
]

TASKS = {"capitals": capitals_task, "words": words_task, "judged": judged_task, "code": code_task}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("task", "files", "argv", "said", "status", "loads"), MISTAKES)
def test_each_mistake_is_one_line(
    task, files, argv, said, status, loads, tmp_path, long_tiny, judge, no_hub, monkeypatch, capsys
):
    if task in ("capitals", "words") and compat.tools_problem("environment" if task == "words" else "tools"):
        pytest.skip("on a TRL without tools every such recipe is refused by the version rule (test_agent_recipes.py)")
    monkeypatch.chdir(tmp_path)
    TASKS[task](tmp_path, long_tiny, judge.url) if task == "judged" else TASKS[task](tmp_path, long_tiny)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    port = {"url": judge.url, "root": judge.url.removesuffix("/v1"), "closed": free_port()}

    def filled(text: str) -> str:
        for name, value in port.items():
            text = text.replace(f"{{{name}}}", str(value))
        return text

    argv = [filled(arg) for arg in argv]
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    problems = [line for line in err.splitlines() if line.startswith("error: ")]
    for fragment in said:
        assert filled(fragment) in (out if status == 0 else "\n".join(problems)), f"exit {rc}\n{out}\n{err[-1500:]}"
    assert rc == status, err[-1500:]
    assert "Traceback" not in err
    # every line of the error is a problem of its own, each naming what it is in (a key, or the file)
    assert all(not line.startswith(" ") for line in err.splitlines()), err
    if status == 2:
        assert not (tmp_path / "runs").exists()  # nothing written
        assert ("grpo_ext: model: " in err) == loads  # refused before the model loads, but for what needs its tokenizer
