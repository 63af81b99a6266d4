"""Worked examples shown before every prompt (``data.examples``): chat turns, tool calls among them.

A small model seldom does what it has only been told to; it copies what it has been shown. SmolLM2-135M called a
calculator in none of 32 samples when the system prompt asked it to, and in 11 of 32 after two worked exchanges
(docs/tools.md). The examples are plain chat messages, written in the recipe as a person reads them:

    examples:
      - {role: user, content: "Ann has 9 pens and gets 4 more. How many pens does Ann have now?"}
      - {role: assistant, tool_calls: [{name: calculator, arguments: {expression: "9 + 4"}}]}
      - {role: tool, name: calculator, content: "13"}
      - {role: assistant, content: "Answer: 13"}

and become the messages chat templates read (``tool_calls`` in the OpenAI form, arguments as a JSON string so
that rows of one dataset share one column type whatever each tool's arguments are).
"""

import json

from grpo_ext.core.errors import Loc, Problem
from grpo_ext.core.text import shown
from grpo_ext.core.values import kind_of

ROLES = ("user", "assistant", "tool")
SHAPE = "a list of chat messages, e.g. [{role: user, content: '2+3?'}, {role: assistant, content: '5'}]"


def check(value, loc: Loc = ("data", "examples")) -> list[Problem]:
    """Problems with ``data.examples`` (at ``loc``), one each (none for null)."""
    if value is None:
        return []
    if not isinstance(value, list) or not value:
        got = "an empty list" if value == [] else f"{kind_of(value)} {shown(value, 40)}"
        return [Problem(loc, f"{SHAPE}, got {got}")]
    problems = []
    for i, message in enumerate(value):
        at = (*loc, i)
        if not isinstance(message, dict):
            problems.append(Problem(at, f"a message is a mapping with a role ({', '.join(ROLES)}), got {shown(message, 60)}"))
            continue
        role = message.get("role")
        if role not in ROLES:
            roles = ", ".join(ROLES)
            problems.append(
                Problem(
                    (*at, "role"), f"{shown(role)} is not a role of an example; use {roles} (a system prompt: data.system_prompt)"
                )
            )
            continue
        allowed = {"role", "content"} | ({"tool_calls"} if role == "assistant" else set())
        allowed |= {"name"} if role == "tool" else set()
        extra = sorted(set(message) - allowed)
        if extra:
            problems.append(Problem(at, f"a {role} message takes {', '.join(sorted(allowed))}, not {', '.join(extra)}"))
        calls = message.get("tool_calls")
        content = message.get("content", "" if calls else None)
        if not isinstance(content, str):
            problems.append(
                Problem((*at, "content"), f"the message's text, a string, got {kind_of(content)} {shown(content, 40)}")
            )
        if calls is not None and role == "assistant":
            problems.extend(_check_calls(calls, (*at, "tool_calls")))
            following = value[i + 1] if i + 1 < len(value) else None
            if not isinstance(following, dict) or following.get("role") != "tool":
                problems.append(Problem(at, "calls a tool, and no tool result follows; give each call its result (role: tool)"))
        if role == "tool" and not isinstance(message.get("name"), str):
            problems.append(Problem((*at, "name"), "a tool result names the tool that gave it, e.g. name: calculator"))
    if isinstance(value[-1], dict) and value[-1].get("role") == "user":
        problems.append(Problem(loc, "ends with a user message; end each example with the assistant's reply"))
    return problems


def _check_calls(calls, loc: Loc) -> list[Problem]:
    if not isinstance(calls, list) or not calls:
        return [Problem(loc, "a list of calls, e.g. [{name: calculator, arguments: {expression: '9 + 4'}}]")]
    problems = []
    for j, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(call.get("arguments", {}), dict):
            problems.append(
                Problem((*loc, j), f"a call is {{name: TOOL, arguments: {{ARGUMENT: VALUE}}}}, got {shown(call, 60)}")
            )
        elif set(call) - {"name", "arguments"}:
            extra = ", ".join(sorted(set(call) - {"name", "arguments"}))
            problems.append(Problem((*loc, j), f"a call takes name and arguments, not {extra}"))
    return problems


def called(value) -> list[tuple[Loc, str, dict | None]]:
    """(key path, tool name, arguments or None) of each tool call and each tool result in checked examples, to hold
    against the recipe's tools."""
    found: list[tuple[Loc, str, dict | None]] = []
    for i, message in enumerate(value or []):
        for j, call in enumerate(message.get("tool_calls") or []):
            found.append((("data", "examples", i, "tool_calls", j), call["name"], call.get("arguments") or {}))
        if message["role"] == "tool":
            found.append((("data", "examples", i), message["name"], None))
    return found


def messages(value) -> list[dict]:
    """Checked examples as the messages chat templates read: every message with content, calls in the OpenAI form.

    >>> shaped = messages([{"role": "assistant", "tool_calls": [{"name": "calc", "arguments": {"x": "1+1"}}]}])
    >>> shaped[0]["content"], shaped[0]["tool_calls"]
    ('', [{'type': 'function', 'function': {'name': 'calc', 'arguments': '{"x": "1+1"}'}}])
    """
    out = []
    for message in value or []:
        shaped = {"role": message["role"], "content": message.get("content") or ""}
        if message.get("name"):
            shaped["name"] = message["name"]
        if message.get("tool_calls"):
            shaped["tool_calls"] = [
                {"type": "function", "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})}}
                for c in message["tool_calls"]
            ]
        out.append(shaped)
    return out
