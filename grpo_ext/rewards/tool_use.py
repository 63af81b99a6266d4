"""Rewards that read a conversation's tool turns (recipes with ``tools:`` or an ``environment:``), and the one rule
for what counts as a failed call, which the run's health counts by too.

In a tool recipe TRL hands a reward each completion as the list of messages after the prompt: the assistant's
turns (with ``tool_calls`` where it called one), the tools' results (``role: tool``), and its closing reply.
"""

from grpo_ext.rewards.registry import UNIT, register


def is_error(content) -> bool:
    """A tool result that is an error: TRL's ``{'error': ...}`` for a tool that raised, or an ``error:`` line (how
    the library's tools answer a call they cannot carry out).

    >>> is_error("13"), is_error("error: division by zero"), is_error({"error": "ValueError: x"}), is_error(None)
    (False, True, True, False)
    """
    text = str(content or "").lstrip()
    return text.startswith(("{'error'", '{"error"', "error:", "Error:"))


def tool_results(completion) -> list:
    """The contents of the tool results in one completion, in order; none for plain text."""
    if not isinstance(completion, list):
        return []
    return [m.get("content") for m in completion if isinstance(m, dict) and m.get("role") == "tool"]


@register("tool_success")
def tool_success(completions, **kwargs) -> list[float]:
    """1.0 when the completion called a tool and at least one call came back with a result that is not an error; else 0.0.

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
