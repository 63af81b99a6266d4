"""A recipe with tools, read and reported: the library's guessing game and the rows that feed it, the worked
examples of ``data.examples`` (checked, then shaped as chat templates read them and put before each prompt),
conversations summarised for the run's health (calls, calls the parser could not read, errors back, results TRL
dropped) and shown as a person reads them, the watchdog's tool rules on metric streams, and the Tools section of
summary.json and report.md."""

import doctest
import json

import pytest

from grpo_ext.data import examples, generators
from grpo_ext.results import preflight, report, watchdog
from grpo_ext.rewards import tool_use
from grpo_ext.run import data, rollouts
from grpo_ext.tools import check_environment, environments

CALL = {"name": "calculator", "arguments": {"expression": "9 + 4"}}
WORKED = [
    {"role": "user", "content": "Ann has 9 pens and gets 4 more. How many?"},
    {"role": "assistant", "tool_calls": [CALL]},
    {"role": "tool", "name": "calculator", "content": "13"},
    {"role": "assistant", "content": "Answer: 13"},
]

EXAMPLE_PROBLEMS = [
    # (data.examples, the start of each problem line)
    (None, []),  # no examples: nothing to check
    (WORKED, []),  # a worked call, as docs/tools.md shows it
    ("Answer: 13", ["data.examples: a list of chat messages"]),  # one string is not a conversation
    ([], ["data.examples: a list of chat messages"]),  # empty: said so (below) rather than nothing shown
    ([{"role": "bot", "content": "x"}], ["data.examples[0].role: 'bot' is not a role of an example"]),
    ([{"role": "system", "content": "x"}], ["data.examples[0].role: 'system' is not a role"]),  # data.system_prompt's job
    (
        [{"role": "user", "content": 5}, {"role": "assistant", "content": "5"}],
        ["data.examples[0].content: the message's text, a string, got int 5"],
    ),
    ([{"role": "user", "content": "a", "tool_calls": [CALL]}, {"role": "assistant", "content": "b"}], ["data.examples[0]: a"]),
    ([{"role": "assistant", "tool_calls": "calculator(9+4)"}, *WORKED[2:]], ["data.examples[0].tool_calls: a list of calls"]),
    (
        [{"role": "assistant", "tool_calls": [{"name": "calculator", "args": {}}]}, *WORKED[2:]],
        ["data.examples[0].tool_calls[0]: a call t"],
    ),
    ([{"role": "assistant", "tool_calls": [{"arguments": {}}]}, *WORKED[2:]], ["data.examples[0].tool_calls[0]: a call is"]),
    (WORKED[:2] + WORKED[3:], ["data.examples[1]: calls a tool, and no tool result follows"]),  # the result left out
    (WORKED[:2] + [{"role": "tool", "content": "13"}, WORKED[3]], ["data.examples[2].name: a tool result names the tool"]),
    ([{"role": "user", "content": "2+3?"}], ["data.examples: ends with a user message"]),  # the prompt itself comes next
]


@pytest.mark.parametrize(("value", "starts"), EXAMPLE_PROBLEMS)
def test_examples_are_checked(value, starts):
    problems = [str(p) for p in examples.check(value)]
    assert len(problems) == len(starts), problems
    for problem, start in zip(problems, starts, strict=True):
        assert problem.startswith(start) and "\n" not in problem


def test_empty_examples_are_named_empty():
    assert str(examples.check([])[0]).endswith("got an empty list")


def test_examples_become_the_messages_templates_read_before_each_prompt():
    shaped = examples.messages(WORKED)
    assert shaped[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": '{"expression": "9 + 4"}'}}],
    }
    assert shaped[2] == {"role": "tool", "content": "13", "name": "calculator"}
    text = data.format_prompt("Bob has 8 cards?", "Use the calculator.", True, shaped)
    assert [m["role"] for m in text] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert text[-1] == {"role": "user", "content": "Bob has 8 cards?"}
    own = data.format_prompt([{"role": "system", "content": "mine"}, {"role": "user", "content": "q"}], "theirs", True, shaped)
    assert [m.get("content") for m in own][:2] == ["mine", "Ann has 9 pens and gets 4 more. How many?"]  # its own system first
    assert examples.called(WORKED) == [
        (("data", "examples", 1, "tool_calls", 0), "calculator", {"expression": "9 + 4"}),
        (("data", "examples", 2), "calculator", None),
    ]


def test_examples_need_chat():
    with pytest.raises(Exception, match="data.examples: worked examples are chat turns"):
        data.format_prompt("q", None, False, examples.messages(WORKED))


def conversation(*turns):
    return [dict(t) for t in turns]


CALLED = conversation(
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": CALL}]},
    {"role": "tool", "name": "calculator", "content": "13"},
    {"role": "assistant", "content": "Answer: 13"},
)
FAILED = conversation(
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {}}}]},
    {"role": "tool", "name": "calc", "content": "{'error': 'Tool calc not found.'}"},  # TRL's words for a failed call
    {"role": "assistant", "content": "Answer: 3"},
)
UNREAD = conversation({"role": "assistant", "content": '<tool_call>\n{"name": "calculator", "arguments": {9 + 4}}'})
PLAIN = conversation({"role": "assistant", "content": "Answer: 12"})
# TRL ran the call and rolled its result back: the conversation with it would pass max_completion_length
DROPPED = conversation(CALLED[0])
# a second call after a result, dropped; and the same conversation ended by max_tool_calling_iterations 1 (never run)
AGAIN = conversation(*CALLED[:2], CALLED[0])


def test_tool_counts_of_conversations():
    done = rollouts.Rollouts(completions=[CALLED, FAILED, UNREAD, PLAIN], completion_ids=[[1]] * 4, scores={})
    assert done.tool_counts() == {
        "samples": 4,
        "called": 0.5,  # CALLED and FAILED
        "unread_call": 0.25,  # a call written that the parser could not read
        "error_back": 0.25,
        "calls_per_sample": 0.5,
        "errors_per_call": 0.5,
        "dropped": 0,
        "dropped_per_call": 0.0,
        "budget": None,
    }
    assert rollouts.Rollouts().tool_counts()["called"] == 0


UNANSWERED = [
    # (conversation, max_tool_calling_iterations, (results dropped, calls never run))
    (CALLED, 2, (0, 0)),  # every call answered
    (DROPPED, 2, (1, 0)),  # the first call's result dropped: the sample ends on the call
    (DROPPED, None, (1, 0)),  # no limit on calls: the same
    (AGAIN, 2, (1, 0)),  # the second call's result dropped, one turn before the limit
    (AGAIN, 1, (0, 1)),  # the limit reached: TRL never ran the second call
    (PLAIN, 2, (0, 0)),
    ("Answer: 12", 2, (0, 0)),  # plain text
    ([], 2, (0, 0)),
]


@pytest.mark.parametrize(("completion", "limit", "expected"), UNANSWERED)
def test_results_trl_dropped(completion, limit, expected):
    assert tool_use.unanswered(completion, limit) == expected


def test_dropped_results_are_counted_and_shown():
    """A facts tool at 48 tokens: TRL dropped every result, tool_success gave 0, and nothing said why."""
    done = rollouts.Rollouts(completions=[DROPPED, DROPPED, CALLED, AGAIN], iterations=2, budget=48)
    counts = done.tool_counts()
    assert (counts["dropped"], counts["dropped_per_call"], counts["error_back"]) == (3, 0.6, 0.0)  # 3 of 5 calls
    assert preflight.describe_tools(counts).endswith(
        "; 3 tool results dropped: the conversation would pass max_completion_length (48)"
    )
    assert done.transcripts()[0] == (
        '→ calculator({"expression": "9 + 4"})\n← (result dropped: the conversation would pass max_completion_length (48))'
    )
    assert done.transcripts()[2] == rollouts.transcript(CALLED)  # an answered call as before
    assert tool_use.tool_success([DROPPED, CALLED]) == [0.0, 1.0]
    capped = rollouts.Rollouts(completions=[AGAIN], iterations=1, budget=48)
    assert capped.tool_counts()["dropped"] == 0 and "dropped" not in capped.transcripts()[0]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("{'error': 'boom'}", True),  # TRL's result for a tool that raised
        ("error: division by zero", True),  # the library's tools answer bad input so
        ("13", False),
        (None, False),
        ("the error was yours", False),  # the word alone is not an error result
    ],
)
def test_error_results(content, error):
    assert tool_use.is_error(content) is error


def test_transcript_shows_calls_and_results():
    assert rollouts.transcript(CALLED) == '→ calculator({"expression": "9 + 4"})\n← 13\nAnswer: 13'
    assert rollouts.transcript("plain text") == "plain text"


def steps(n, **metrics):
    """``n`` metrics records; a metric is a constant or a list of one value per step."""
    named = {key.replace("__", "/"): value for key, value in metrics.items()}
    return [
        {"step": s, "reward": 0.1, "loss": 0.1, **{k: v[s - 1] if isinstance(v, list) else v for k, v in named.items()}}
        for s in range(1, n + 1)
    ]


class CharTokenizer:
    """One token a character (``<|im_start|>`` and ``<|im_end|>`` one each), with grpo_ext's ChatML tool template."""

    eos_token_id = 1

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        import jinja2

        from grpo_ext.run import chat_tools

        env = jinja2.Environment()
        env.filters["tojson"] = json.dumps
        template = env.from_string(chat_tools.TEMPLATE.read_text())
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt)

    def __call__(self, text, add_special_tokens):
        import re

        parts = re.split(r"(<\|im_start\|>|<\|im_end\|>)", text)
        special = {"<|im_start|>": 2, "<|im_end|>": self.eos_token_id}
        return {"input_ids": [t for part in parts for t in ([special[part]] if part in special else map(ord, part))]}


def test_worked_exchanges_are_measured_as_trl_counts_them():
    """TRL's count of a conversation after the prompt: the call as generated (up to its end token), then the result
    rendered by the template with the next turn's opening, then the answer to its end token."""
    shaped = data.format_prompt("Bob has 8 cards?", "Use the calculator.", True, examples.messages(WORKED + WORKED))
    first, second = rollouts.worked_exchanges(CharTokenizer(), shaped)
    call = len('<tool_call>\n{"name": "calculator", "arguments": {"expression": "9 + 4"}}\n</tool_call>') + 1  # + <|im_end|>
    # "\n", <|im_start|>, "user\n<tool_response>...", <|im_end|>, "\n", <|im_start|>, "assistant\n"
    result = 1 + 1 + len("user\n<tool_response>\n13\n</tool_response>") + 1 + 1 + 1 + len("assistant\n")
    answer = len("Answer: 13") + 1
    assert (first.start, first.through_results, first.whole) == (1, (call + result,), call + result + answer)
    assert (second.start, second.through_results, second.whole) == (5, first.through_results, first.whole)
    assert rollouts.worked_exchanges(CharTokenizer(), "plain prompt") == []
    plain = data.format_prompt("q", None, True, examples.messages([WORKED[0], WORKED[3]]))
    assert rollouts.worked_exchanges(CharTokenizer(), plain) == []  # no call among the examples: nothing to hold


DROPPING = {"tools__call_frequency": 1.0, "tools__failure_frequency": 0.0}

TOOL_CASES = [
    # (records, the rules fired with their steps)
    (steps(8, tools__call_frequency=0.0, tools__failure_frequency=0.0), [("tools_never_called", 8)]),
    (steps(7, tools__call_frequency=0.0, tools__failure_frequency=0.0), []),  # shorter than tool_steps
    (steps(8, tools__call_frequency=0.5, tools__failure_frequency=0.75), [("tool_calls_failing", 8)]),
    (steps(8, tools__call_frequency=0.5, tools__failure_frequency=0.25), []),  # most calls work
    (steps(8, tools__call_frequency=1.0, tools__failure_frequency=0.0), []),  # a model that uses its tool
    (steps(8), []),  # a recipe without tools: TRL logs no tools/ metrics
    # every call's result dropped from step 1 (TRL's failure_frequency 0): named at once, not after tool_steps
    (steps(2, **DROPPING, tools__dropped_results=16, tools__dropped_frequency=1.0), [("tool_results_dropped", 1)]),
    # a quarter of the calls' results dropped (a second call past the budget): counted, not a finding
    (steps(8, **DROPPING, tools__dropped_results=4, tools__dropped_frequency=0.25), []),
    # none dropped
    (steps(8, **DROPPING, tools__dropped_results=0, tools__dropped_frequency=0.0), []),
    # a few dropped at first, then every one: named when the mean share reaches half
    (
        steps(3, **DROPPING, tools__dropped_results=[2, 16, 16], tools__dropped_frequency=[0.125, 1.0, 1.0]),
        [("tool_results_dropped", 2)],
    ),
]


@pytest.mark.parametrize(("records", "expected"), TOOL_CASES)
def test_watchdog_tool_rules(records, expected):
    dog = watchdog.Watchdog()
    fired = [(f.rule, f.step) for record in records for f in dog.update(record) if f.rule.startswith("tool")]
    assert fired == expected
    for finding in dog.findings:
        assert "remedy: " in finding.line() and "\n" not in finding.line()


def test_a_model_that_gave_its_tool_up_is_told_of_tool_success():
    """Seed 2 of arith-tools: a quarter of step 1's completions called, every call failed, and none called again."""
    records = steps(9, tools__call_frequency=0.0, tools__failure_frequency=0.0)
    records[0].update({"tools/call_frequency": 0.25, "tools/failure_frequency": 0.25})
    dog = watchdog.Watchdog()
    (finding,) = [f for r in records for f in dog.update(r) if f.rule == "tools_never_called"]
    assert finding.step == 9 and "after 25% of a step's completions did" in finding.line()
    assert "rewards: tool_success with weight 0.2" in finding.line()
    dog = watchdog.Watchdog()
    (never,) = [f for r in steps(8, tools__call_frequency=0.0) for f in dog.update(r) if f.rule == "tools_never_called"]
    assert "tool_success" not in never.line() and "data.examples" in never.line()  # it never called: show it calls


def test_entropy_is_not_read_as_a_collapse_while_most_completions_call():
    """A call's JSON and the result copied from it leave a few nats to sample: arith-tools seed 0 solved at 0.023."""
    low = steps(1, tools__call_frequency=1.0, tools__failure_frequency=0.0)[0] | {"entropy": 0.023}
    assert not [f for f in watchdog.Watchdog().update(low) if f.rule == "entropy_collapse"]
    alone = low | {"tools/call_frequency": 0.0}  # the same entropy with no call: the rule speaks
    assert [f.rule for f in watchdog.Watchdog().update(alone) if f.rule == "entropy_collapse"] == ["entropy_collapse"]


def test_the_watchdog_leaves_a_solved_run_without_calls_alone():
    records = steps(8, tools__call_frequency=0.0, tools__failure_frequency=0.0)
    records = [{**r, "reward": 1.0, "rewards/math_accuracy/mean": 1.0} for r in records]
    assert not [f for r in records for f in watchdog.Watchdog().update(r)]


def test_summary_and_report_say_how_tools_were_used():
    records = steps(2, tools__call_frequency=0.25, tools__failure_frequency=0.0)
    records[1]["tools/call_frequency"] = 1.0
    used = report.tool_use(records)
    assert used == {
        "calls_per_completion_first": 0.25,
        "calls_per_completion_last": 1.0,
        "calls_per_completion_mean": 0.625,
        "failed_share_mean": 0.0,
    }
    counts = {"samples": 8, "called": 0.25, "unread_call": 0.125, "error_back": 0.0, "calls_per_sample": 0.25, "dropped": 0}
    lines = report.tools_markdown({"tools": used, "eval_before": {"tools": counts}, "eval_after": None})
    assert "| before | 8 | 25% | 12% | 0% | 0.25 | 0 |" in lines
    assert any("from 0.25 at the first step to 1 at the last" in line and "dropped" not in line for line in lines)
    assert report.tools_markdown({}) == [] and report.tool_use(steps(2)) is None
    # a mean over 64 samples is shown to 3 significant digits, in the table and in the pre-flight's line
    many = {**counts, "samples": 64, "calls_per_sample": 1.1562}
    assert "| before | 64 | 25% | 12% | 0% | 1.16 | 0 |" in report.tools_markdown({"eval_before": {"tools": many}})
    assert preflight.describe_tools(many).endswith("error back; 1.16 calls a sample")


def test_summary_and_report_count_the_results_trl_dropped():
    """TRL's failure_frequency counts a dropped call as one that worked: the report says 0% failed and how many were
    dropped, in training and in each eval, with the budget they would have passed."""
    records = steps(2, **DROPPING, tools__dropped_results=[16, 12], tools__dropped_frequency=[1.0, 0.75])
    used = report.tool_use(records)
    assert used["results_dropped"] == 28 and used["failed_share_mean"] == 0.0
    counts = {"samples": 4, "called": 1.0, "unread_call": 0.0, "error_back": 0.0, "calls_per_sample": 1.0}
    before = {**counts, "dropped": 4, "budget": 48}
    lines = report.tools_markdown({"tools": used, "eval_before": {"tools": before}}, budget=48)
    assert "| before | 4 | 100% | 0% | 0% | 1 | 4 |" in lines
    assert "- eval before: 4 tool results dropped: the conversation would pass max_completion_length (48)" in lines
    assert any(
        line.endswith(
            "0% of the calls failed on the mean step; 28 tool results dropped: the conversation would pass "
            "max_completion_length (48) (TRL counts these calls as ones that worked)."
        )
        for line in lines
    )


def test_the_progress_line_counts_the_results_trl_dropped():
    from grpo_ext.run import progress

    record = {"reward": 0.0, "tools/dropped_results": 16.0, "tools/dropped_frequency": 1.0}
    assert progress.step_stats(record).endswith("  16 tool results dropped")
    assert progress.step_stats({**record, "tools/dropped_results": 1.0}).endswith("  1 tool result dropped")
    assert "dropped" not in progress.step_stats({**record, "tools/dropped_results": 0.0})


class Gathered:
    """An accelerator of one process: gather hands the tensor back."""

    device = "cpu"

    def gather(self, tensor):
        return tensor


def test_training_counts_the_results_trl_dropped_over_a_step():
    """One count for the whole step (TRL logs the mean of a metric's entries: each generation batch adds to one),
    and the share of the calls TRL ran (a call it never ran, at max_tool_calling_iterations, is not one)."""
    import collections
    import types

    from grpo_ext.run.trl_internals import Step

    training = types.SimpleNamespace(training=True)
    step = Step(types.SimpleNamespace(accelerator=Gathered(), max_tool_calling_iterations=1, model=training), metrics := {})
    metrics["train"] = collections.defaultdict(list)
    count = rollouts.DroppedResults()
    count.on_rewards(step, [DROPPED, DROPPED, CALLED, PLAIN], [], None)
    count.on_rewards(step, [DROPPED, AGAIN], [], None)  # a second generation batch in the step; AGAIN's call never ran
    assert metrics["train"]["tools/dropped_results"] == [3]
    assert metrics["train"]["tools/dropped_frequency"] == [2 / 3, 1 / 2]


@pytest.mark.parametrize("module", [examples, environments, generators, report])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


GAMES = [
    # (secret, guesses, reward)
    (6, [6], 1.0),  # won on the first guess
    (6, [5, 7, 6], 1.0),  # won on the third
    (6, [], 0.0),  # never guessed: nothing to rank
    (6, [5, 7], 0.4375),  # lost, nearest guess 1 away of a range of 8: 0.5 x 7/8
    (1, [9], 0.0),  # lost as far as the range goes
]


@pytest.mark.parametrize(("secret", "guesses", "reward"), GAMES)
def test_the_guessing_game_rewards_a_win_and_ranks_a_loss(secret, guesses, reward):
    game = environments.GuessNumber()
    game.reset(secret=secret, low=1, high=9, prompt="ignored: TRL passes every column")
    for g in guesses:
        game.guess(g)
    assert game.get_reward() == pytest.approx(reward)


def test_the_library_game_is_one_trl_can_use_and_its_rows_feed_it():
    assert check_environment(environments.GuessNumber, "environment") == []
    train, held_out = generators.guess(train=50, held_out=10, low=1, high=9, seed=3)
    assert len(train) == 50 and len(held_out) == 10
    assert {r["secret"] for r in train} <= set(range(1, 10)) and len({r["secret"] for r in train}) > 5
    assert train[0]["prompt"] == held_out[0]["prompt"] and "from 1 to 9" in train[0]["prompt"]
    with pytest.raises(ValueError, match="low=5 must be below high=5"):
        generators.guess(low=5, high=5)


def test_the_tool_listing_names_the_library_environments(capsys):
    from grpo_ext import cli

    assert cli.main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "calculator " in out and "\nenvironments (environment: NAME):\nguess_number " in out


def test_completions_log_writes_a_tool_conversation_with_its_calls():
    import json

    from grpo_ext.run import completions

    batch = {
        "prompt": [[{"role": "user", "content": "9 + 4?"}]] * 2,
        "completion": [CALLED, PLAIN],
        "rewards": {"math_accuracy": [1.0, 0.0]},
        "advantages": [0.5, -0.5],
    }
    written = [json.loads(line) for line in completions.lines(3, batch)]
    assert written[0]["completion"] == '→ calculator({"expression": "9 + 4"})\n← 13\nAnswer: 13'
    # a worked example in the prompt shows its call too, not an empty assistant turn
    shown = data.format_prompt("2 + 2?", None, True, examples.messages(WORKED))
    (line,) = completions.lines(3, {**batch, "prompt": [shown], "completion": [PLAIN], "rewards": {}, "advantages": [0.0]})
    assert 'assistant: → calculator({"expression": "9 + 4"})\ntool: 13\n' in json.loads(line)["prompt"]
    assert written[1]["completion"] == "Answer: 12"  # a plain reply as before
    assert rollouts.has_tool_turns(CALLED) and not rollouts.has_tool_turns(PLAIN) and not rollouts.has_tool_turns("text")


def test_tools_show_gives_the_call_the_model_makes(capsys):
    from grpo_ext import cli

    assert cli.main(["tools", "show", "calculator"]) == 0
    out = capsys.readouterr().out
    assert "call: calculator(expression: str) -> str" in out  # not the factory's empty signature
    schema = json.loads(out.split("the model reads (the schema in its prompt):\n", 1)[1])
    assert schema["name"] == "calculator" and list(schema["parameters"]["properties"]) == ["expression"]
    assert ">>>" not in out  # the docstring's examples are for people; the model never reads them
    assert cli.main(["tools", "show", "lookup"]) == 0
    out = capsys.readouterr().out  # a factory: the args a recipe gives it, and the entry that gives them
    assert "args: path: str | pathlib.Path\nin a recipe: {name: lookup, args: {path: ...}}\n" in out
