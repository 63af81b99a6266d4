"""Rewards that read a conversation's tool turns (recipes with ``tools:`` or an ``environment:``), and the rules for
what counts as a failed call and as a result TRL dropped, which the run's health counts by too.

In a tool recipe TRL hands a reward each completion as the list of messages after the prompt: the assistant's
turns (with ``tool_calls`` where it called one), the tools' results (``role: tool``), and its closing reply.
"""

from grpo_ext.rewards.api import UNIT
from grpo_ext.rewards.registry import register


def is_error(content) -> bool:
    """A tool result that is an error: TRL's ``{'error': ...}`` for a tool that raised, or an ``error:`` line (how
    the library's tools answer a call they cannot carry out).

    >>> is_error("13"), is_error("error: division by zero"), is_error({"error": "ValueError: x"}), is_error(None)
    (False, True, True, False)
    """
    text = str(content or "").lstrip()
    return text.startswith(("{'error'", '{"error"', "error:", "Error:"))


def unanswered(completion, iterations: int | None) -> tuple[int, int]:
    """(calls whose results TRL dropped, calls it never ran) in one completion: those of its closing turn when that
    turn is a call with no result after it.

    TRL's tool loop (``_tool_call_loop``, read on TRL 1.16) runs a turn's calls, and then drops their results when
    the conversation with them would pass ``max_completion_length`` (or the model's context): it rolls the tool
    messages back and ends the sample on the call. It also ends a sample on a call it does not run once
    ``max_tool_calling_iterations`` (``iterations``; None: no limit) turns of calls have had their results. Both end
    the same way; the count of turns answered before tells them apart. TRL counts a dropped call as one that worked.

    >>> call = {"role": "assistant", "tool_calls": [{"function": {"name": "facts"}}]}
    >>> result = {"role": "tool", "name": "facts", "content": "Paris is the capital of France."}
    >>> unanswered([call], 4), unanswered([call, result, call], 1), unanswered([call, result], 4), unanswered("Paris", 4)
    ((1, 0), (0, 1), (0, 0), (0, 0))
    """
    if not isinstance(completion, list) or not completion or not isinstance(completion[-1], dict):
        return 0, 0
    last = completion[-1]
    calls = last.get("tool_calls") if last.get("role") == "assistant" else None
    if not calls:
        return 0, 0
    answered = sum(1 for m in completion[:-1] if isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls"))
    return (0, len(calls)) if iterations is not None and answered >= iterations else (len(calls), 0)


def tool_results(completion) -> list:
    """The contents of the tool results in one completion, in order; none for plain text."""
    if not isinstance(completion, list):
        return []
    return [m.get("content") for m in completion if isinstance(m, dict) and m.get("role") == "tool"]


@register("tool_success")
def tool_success(completions, **kwargs) -> list[float]:
    """1.0 when the completion called a tool and at least one call came back with a result that is not an error; else 0.0.
    A result TRL dropped (the conversation would pass max_completion_length) never came back: 0.0.

    A shaping reward, given a small weight beside the task's own (``weight: 0.2``): a model that rarely calls its
    tool, and whose first calls fail, learns from the task reward alone that answering without the tool is safer;
    this keeps a working call worth something while the answer is still wrong. Once every completion calls the tool
    it is the same for the whole group and adds nothing to the advantage.

    >>> called = [{"role": "assistant", "tool_calls": [{"function": {"name": "calculator"}}]},
    ...           {"role": "tool", "name": "calculator", "content": "13"}, {"role": "assistant", "content": "13"}]
    >>> failed = [*called[:1], {"role": "tool", "name": "calculator", "content": "error: division by zero"}]
    >>> tool_success([called, failed, [{"role": "assistant", "content": "13"}], "13"])
    [1.0, 0.0, 0.0, 0.0]
    """
    return [1.0 if any(not is_error(r) for r in tool_results(c)) else 0.0 for c in completions]


tool_success.score_range = UNIT
