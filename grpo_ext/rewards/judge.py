"""A reward that asks a model: ``llm_judge``, a grader behind an OpenAI-compatible chat-completions endpoint.

Any server that speaks the protocol will do: vLLM (``vllm serve``), SGLang, llama.cpp's server, ``transformers
serve``, ``trl vllm-serve`` on a GPU, or a hosted API. Each completion is graded with a rubric, a template that
can use ``{prompt}``, ``{completion}`` and any data column by name; the first number in the reply, on the
rubric's ``scale``, becomes a score in [0, 1]. In ``group`` mode the judge sees a prompt's completions together
and scores each (a ranking, as RULER does), which calibrates scores within the group GRPO compares.

The API key comes from the environment variable the recipe names (``api_key_env``), never from the recipe. A
step's requests go out concurrently (``concurrency`` at a time), identical requests are answered from a cache,
and the client retries with back-off (``retries``). ``call_seconds`` is a total deadline, not a limit per read:
every request of one call, retries included, ends by it, and the request still open then is cancelled (its
connection closed), so a slow, dead or trickling server gives None scores and one line saying so, never a hung
run nor a process that waits for it at exit. A server that answers with an error status is quoted: its own message
(``error.message``, or FastAPI's ``detail`` as ``transformers serve`` sends it), which the client's exception drops
unless the body is OpenAI's shape. Before the model loads, one request, under the same deadline, checks that the
server answers and that the rubric's reply parses (``preflight``); a server that refuses it has its models listed
(``GET /models``) when the name asked for is not among them. What the judge replied to each completion is kept
(``said``) for ``completions.jsonl`` and ``grpo-ext rewards score``.
"""

import dataclasses
import importlib.util
import json
import os
import re
import string
import threading
from collections import OrderedDict

from grpo_ext.core import console
from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import clip
from grpo_ext.rewards.api import completion_text, prompt_text
from grpo_ext.rewards.registry import register

RUBRIC = (
    "Grade the response to the request below on a scale of {low} to {high}, where {high} is a response that fully "
    "and correctly does what was asked and {low} one that does not.\n\nRequest:\n{prompt}\n\nResponse:\n{completion}\n\n"
    "Reply with the grade only."
)
GROUP_RUBRIC = (
    "Grade each of the {n} responses to the request below on a scale of {low} to {high}, where {high} is a response "
    "that fully and correctly does what was asked and {low} one that does not.\n\nRequest:\n{prompt}\n\n{responses}\n\n"
    "Reply with one line per response, in order: its number, a colon and its grade."
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OWN_FIELDS = {"prompt", "completion", "low", "high", "n", "responses"}
SAID_CHARS = 300  # of a server's error message in a line: a stack trace some servers send stays out of it


def said_in(body) -> str | None:
    """The message of an error response's body: OpenAI's ``{"error": {"message": ...}}``, FastAPI's ``{"detail": ...}``
    (a text, or its validation errors' ``msg``), a ``message``, or the text itself; None when it holds none.

    >>> said_in({"detail": "Server is pinned to 'm'"}), said_in({"error": {"message": "no such model", "code": 404}})
    ("Server is pinned to 'm'", 'no such model')
    >>> said_in({"detail": [{"loc": ["body", "model"], "msg": "Field required"}]}), said_in({"ok": 1}), said_in(" ")
    ('Field required', None, None)
    """
    if isinstance(body, str):
        return body.strip() or None
    if isinstance(body, dict):
        return next((found for key in ("error", "detail", "message") if (found := said_in(body.get(key)))), None)
    if isinstance(body, list):
        parts = [said_in(item.get("msg") if isinstance(item, dict) else item) for item in body]
        return "; ".join(p for p in parts if p) or None
    return None


def problem(exc: BaseException) -> str:
    """A failed request in one line: the exception's name, and for an error status the status and the server's own
    message, on one line without its closing full stop (the client's text keeps it only when the body is OpenAI's
    shape: ``Error code: 400`` alone otherwise)."""
    status = getattr(exc, "status_code", None)  # openai's APIStatusError: status_code, and body as the server sent it
    message = said_in(getattr(exc, "body", None)) if isinstance(status, int) else None
    if message is None:
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__} (HTTP {status}): {clip(' '.join(message.split()).rstrip('.'), SAID_CHARS)}"


def numbered(responses: list[str]) -> str:
    """The responses a group-mode rubric shows, numbered from 1 as ``parse_group`` reads the grades back."""
    return "\n\n".join(f"Response {k}:\n{text}" for k, text in enumerate(responses, start=1))


def parse_score(reply: str, low: float, high: float) -> float | None:
    """The first number of a judge's reply on the scale [low, high], as a score in [0, 1]; None if it has none.

    >>> parse_score("8", 0, 10), parse_score("Grade: 3/5", 1, 5), parse_score("no idea", 0, 10), parse_score("12", 0, 10)
    (0.8, 0.5, None, None)
    """
    found = _NUMBER.search(reply or "")
    if not found:
        return None
    value = float(found.group())
    return (value - low) / (high - low) if low <= value <= high else None


def parse_group(reply: str, n: int, low: float, high: float) -> list[float | None]:
    """Scores of ``n`` responses from lines ``i: grade`` (1-based); a response the reply misses scores None.

    >>> parse_group("1: 9\\n2: 4\\n3: seven", 3, 0, 10)
    [0.9, 0.4, None]
    """
    scores: list[float | None] = [None] * n
    for line in (reply or "").splitlines():
        number, _, grade = line.partition(":")
        number = number.strip().strip("#").removeprefix("Response").strip()
        if number.isdigit() and 1 <= int(number) <= n:
            scores[int(number) - 1] = parse_score(grade, low, high)
    return scores


# The requests run as asyncio tasks on one event loop per process, on a daemon thread. A deadline that covers a
# whole request needs cancellation: httpx's timeouts apply to each read, so a server that sends a byte a second
# never reaches them, and a blocking request on a thread cannot be stopped (a thread pool then joins it at exit).
# A cancelled task closes its connection at once, so nothing is left to wait for; the daemon thread sits idle
# between calls and is never joined. One loop, rather than one per call, keeps the connections alive between steps
# and serves a caller whose own thread already runs a loop (a notebook). The one wait left at exit is a host name
# lookup still running on the loop's executor thread, which the system resolver's own timeout ends.
# asyncio is imported where a judge first runs, not at the top: importing it costs every command's start, a judge or not.
_loop = None  # the asyncio event loop, made at the first use
_loop_lock = threading.Lock()


def _forget_loop() -> None:
    global _loop, _loop_lock
    _loop, _loop_lock = None, threading.Lock()  # a forked child has the loop's object but not its thread


os.register_at_fork(after_in_child=_forget_loop)


def judge_loop():
    """This process's asyncio event loop for judge requests, running on a daemon thread started at the first use."""
    import asyncio

    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, daemon=True, name="grpo_ext-judge").start()
        return _loop


def on_judge_loop(work):
    """The result of coroutine ``work`` run on ``judge_loop``; an interrupted caller (Ctrl-C) cancels it."""
    import asyncio

    future = asyncio.run_coroutine_threadsafe(work, judge_loop())
    try:
        return future.result()
    finally:
        future.cancel()  # a no-op once it is done


@dataclasses.dataclass(frozen=True)
class JudgeSettings:
    """What ``llm_judge`` was asked for, checked (see its arguments)."""

    base_url: str
    model: str
    rubric: str
    low: float
    high: float
    mode: str  # "single" or "group"
    api_key_env: str | None
    max_tokens: int
    temperature: float
    concurrency: int
    timeout: float
    retries: int
    call_seconds: float
    cache_size: int
    extra_body: dict


class Judge:
    """The ``llm_judge`` reward (see ``llm_judge``); picklable: its client and cache are rebuilt after a copy."""

    __name__ = "llm_judge"

    def __init__(self, settings: JudgeSettings, columns: tuple[str, ...]):
        self.settings = settings
        self.columns = columns  # the data columns the rubric names, checked before any model loads
        self._client = None
        self._client_loop = None
        self._cache: OrderedDict[str, str] = OrderedDict()  # read and written on the judge loop's thread only
        self._said: OrderedDict[tuple[str, str] | str, str | None] = OrderedDict()  # (prompt, completion) or completion -> reply
        self.replies: list[str | None] = []  # the reply to each completion of the last call, None where none came
        self.failing = False
        self.cache_noted = False  # while failing: said that a call's answers all came from the cache

    def __reduce__(self):
        return Judge, (self.settings, self.columns)  # a copy starts with no client, cache or failure

    def client(self):
        """The asynchronous client, built on the running loop (the judge loop) and again on a new one."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from openai import AsyncOpenAI

            s = self.settings
            key = os.environ.get(s.api_key_env) if s.api_key_env else None
            limits = {"timeout": s.timeout, "max_retries": s.retries}  # timeout: httpx's, per read; see call_seconds
            self._client = AsyncOpenAI(base_url=s.base_url, api_key=key or "none", **limits)
            self._client_loop = loop
        return self._client

    async def complete(self, client, content: str) -> str:
        """The text of the judge's reply to one user message, through ``client``."""
        s = self.settings
        reply = await client.chat.completions.create(
            model=s.model,
            messages=[{"role": "user", "content": content}],
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            extra_body=s.extra_body or None,
        )
        return reply.choices[0].message.content or ""

    def scale(self) -> dict:
        """The rubric's ``{low}`` and ``{high}``, written as a person would (``0``, not ``0.0``)."""
        return {"low": f"{self.settings.low:g}", "high": f"{self.settings.high:g}"}

    async def ask(self, content: str, gate) -> tuple[str, bool]:
        """(the judge's reply to one user message, whether it came from the cache, keyed by the message's text);
        a request goes out once ``gate`` (an asyncio.Semaphore) lets it."""
        if content in self._cache:
            self._cache.move_to_end(content)
            return self._cache[content], True
        async with gate:
            text = await self.complete(self.client(), content)
        self._cache[content] = text
        while len(self._cache) > self.settings.cache_size:
            self._cache.popitem(last=False)
        return text, False

    async def ask_all(self, messages: list[str]) -> tuple[list, set]:
        """Every message asked, ``concurrency`` at a time: (the asyncio tasks in order, those cancelled at
        ``call_seconds``)."""
        import asyncio

        self.client()  # built before the deadline starts: the first time, importing openai takes a second or two
        gate = asyncio.Semaphore(self.settings.concurrency)
        tasks = [asyncio.create_task(self.ask(message, gate)) for message in messages]
        if not tasks:
            return tasks, set()
        _, late = await asyncio.wait(tasks, timeout=self.settings.call_seconds)
        for task in late:
            task.cancel()
        if late:  # a cancelled request closes its connection at once; the second only bounds it
            await asyncio.wait(late, timeout=1.0)
        return tasks, late

    def _fields(self, prompt, kwargs: dict, i: int) -> dict:
        return {c: kwargs[c][i] for c in self.columns} | {"prompt": prompt_text(prompt, roles=True)} | self.scale()

    def requests(self, prompts, completions, kwargs: dict) -> list[tuple[list[int], str]]:
        """(the completions a request grades, its message): one each, or one per prompt's group."""
        rubric = self.settings.rubric
        if self.settings.mode == "single":
            return [
                ([i], rubric.format_map(self._fields(p, kwargs, i) | {"completion": completion_text(c)}))
                for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
            ]
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault(json.dumps(p, sort_keys=True, default=str), []).append(i)
        out = []
        for members in groups.values():
            responses = numbered([completion_text(completions[i]) for i in members])
            fields = self._fields(prompts[members[0]], kwargs, members[0]) | {"responses": responses, "n": len(members)}
            out.append((members, rubric.format_map(fields)))
        return out

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        s = self.settings
        scores: list[float | None] = [None] * len(completions)
        self.replies = [None] * len(completions)
        jobs = self.requests(prompts, completions, kwargs)
        tasks, late = on_judge_loop(self.ask_all([message for _, message in jobs]))
        answered = [(task, members) for task, (members, _) in zip(tasks, jobs, strict=True) if task not in late]
        errors = [task.exception() for task, _ in answered if task.exception() is not None]
        cached = 0
        for task, members in answered:
            if task.exception() is not None:
                continue
            text, from_cache = task.result()
            cached += from_cache
            for i in members:
                self.replies[i] = text
            if s.mode == "single":
                scores[members[0]] = parse_score(text, s.low, s.high)
            else:
                for i, score in zip(members, parse_group(text, len(members), s.low, s.high), strict=True):
                    scores[i] = score
        self._remember(prompts, completions)
        self._say(len(jobs), len(errors) + len(late), cached, problem(errors[0]) if errors else None)
        return scores

    def _say(self, requests: int, failed: int, cached: int, why: str | None) -> None:
        """One line when the judge starts failing, one when it answers again; answers that all came from the cache
        while it fails say so once, and leave it failing: the server was not asked."""
        s = self.settings
        from_cache = f"; {cached} of {requests} answered from the cache" if cached else ""
        if failed and not self.failing:
            why = why or f"no answer within call_seconds={s.call_seconds:g}"
            console.logger(__name__).warning(
                f"warning: llm_judge at {s.base_url}: {failed} of {requests} requests failed ({why}); scored None{from_cache}"
            )
        elif not failed and self.failing and cached == requests:
            if not self.cache_noted and requests:
                console.logger(__name__).warning(
                    f"llm_judge at {s.base_url}: all {requests} answers came from the cache (asked before it failed); "
                    "the server was not asked, so it may still be failing"
                )
                self.cache_noted = True
            return
        elif not failed and self.failing:
            console.logger(__name__).warning(f"llm_judge at {s.base_url}: answering again{from_cache}")
        if bool(failed) != self.failing:  # a change: the next call from the cache alone is said again
            self.failing, self.cache_noted = bool(failed), False

    def _remember(self, prompts, completions) -> None:
        """Keep each reply of the last call under its (prompt, completion) and under its completion alone, for
        ``said``; the oldest go past ``cache_size`` of each."""
        for prompt, completion, reply in zip(prompts, completions, self.replies, strict=True):
            text = completion_text(completion)
            for key in ((prompt_text(prompt, roles=True), text), text):
                self._said[key] = reply
                self._said.move_to_end(key)
        while len(self._said) > 2 * self.settings.cache_size:
            self._said.popitem(last=False)

    def why_none(self, row: dict, index: int = 0) -> str:
        """Why completion ``index`` of the last call scored None: its request failed, or the reply held no grade."""
        low, high = self.settings.low, self.settings.high
        if index < len(self.replies) and self.replies[index] is None:
            return "the judge's request failed (the warning says why)"
        return f"the judge's reply held no grade from {low:g} to {high:g} for it"

    def said(self, prompt, completion) -> str | None:
        """What the judge replied, in one of its recent calls, to ``completion`` of ``prompt`` (a completion alone
        where the prompt is written another way, as TRL up to 1.14 keeps it: through the chat template); None where
        its request failed or it was not asked in this process."""
        text = completion_text(completion)
        return self._said.get((prompt_text(prompt, roles=True), text), self._said.get(text))

    async def test_request(self, message: str) -> str:
        """The reply to the pre-flight's message: one try, cancelled at ``call_seconds``."""
        import asyncio

        client = self.client().with_options(max_retries=0)
        return await asyncio.wait_for(self.complete(client, message), self.settings.call_seconds)

    async def served(self) -> list[str]:
        """The names of the models the server lists (``GET /models``): one try, cancelled at ``call_seconds``."""
        import asyncio

        client = self.client().with_options(max_retries=0)
        page = await asyncio.wait_for(client.models.list(), self.settings.call_seconds)
        return [str(model.id) for model in page.data]

    def _hint(self, status: int) -> str:
        """What to change after the server refused the pre-flight's request with ``status``: a ``base_url`` without
        the ``/v1`` the servers answer under, when nothing was found there (404); the models it serves, when the one
        asked for is not among them; and an ``api_key_env`` that is not set; empty when none applies."""
        s = self.settings
        hints = []
        if status == 404 and not s.base_url.rstrip("/").endswith("/v1"):
            hints.append(
                "OpenAI-compatible servers (vLLM, SGLang, llama.cpp, transformers serve) answer under /v1: "
                f"set base_url to {s.base_url.rstrip('/')}/v1"
            )
        try:
            names = on_judge_loop(self.served())
        except Exception:  # a server without the list, or one that refuses it too: the message above is all there is
            names = []
        if names and s.model not in names:
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            served = ", ".join(repr(clip(name, 200)) for name in names[:5]) + more
            hints.append(f"it serves {served}: set model to {'that name' if len(names) == 1 else 'one of them'}")
        if s.api_key_env and not os.environ.get(s.api_key_env):
            hints.append(f"api_key_env {s.api_key_env} is not set, so no key was sent")
        return "".join(f"; {hint}" for hint in hints)

    def preflight(self) -> None:
        """One request before the model loads: the server answers and the reply parses; RecipeError if not."""
        import asyncio

        s = self.settings
        example = {c: f"<{c}>" for c in self.columns} | {"prompt": "What is 2 + 2?"} | self.scale()
        if s.mode == "single":
            message = s.rubric.format_map(example | {"completion": "4"})
        else:
            message = s.rubric.format_map(example | {"responses": numbered(["4", "5"]), "n": 2})
        try:
            text = on_judge_loop(self.test_request(message))
        except asyncio.TimeoutError:  # the deadline (TimeoutError itself from Python 3.11)
            raise RecipeError(
                f"llm_judge: {s.base_url} did not answer a test request within call_seconds={s.call_seconds:g} s; "
                "check that the server is up and serving, or raise call_seconds"
            ) from None
        except Exception as exc:  # the client's own errors: connection, status, timeout
            if isinstance(getattr(exc, "status_code", None), int):  # it answered, with an error status
                raise RecipeError(
                    f"llm_judge: {s.base_url} refused a test request: {problem(exc)}{self._hint(exc.status_code)}"
                ) from None
            raise RecipeError(f"llm_judge: {s.base_url} did not answer a test request: {problem(exc)}") from None
        parsed = [parse_score(text, s.low, s.high)] if s.mode == "single" else parse_group(text, 2, s.low, s.high)
        if all(p is None for p in parsed):
            raise RecipeError(
                f"llm_judge: {s.model} replied {text[:80]!r} to a test request, which holds no grade from {s.low:g} to "
                f"{s.high:g}; make the rubric ask for the grade alone, or raise max_tokens ({s.max_tokens})"
            )


@register("llm_judge", factory=True, example={"base_url": "http://localhost:8000/v1", "model": "judge"})
def llm_judge(
    base_url: str,
    model: str,
    rubric: str | None = None,
    scale: list | tuple = (0, 10),
    mode: str = "single",
    api_key_env: str | None = None,
    max_tokens: int = 16,
    temperature: float = 0.0,
    concurrency: int = 8,
    timeout: float = 30.0,
    retries: int = 2,
    call_seconds: float = 60.0,
    cache_size: int = 4096,
    extra_body: dict | None = None,
) -> Judge:
    """A grade from a judge model behind an OpenAI-compatible endpoint, on the rubric's scale, as a score in [0, 1].

    ``base_url`` (e.g. ``http://localhost:8000/v1``) and ``model`` name the server and its model; ``rubric`` is
    the message, with ``{prompt}``, ``{completion}``, ``{low}``, ``{high}`` and data columns by name (``group``
    mode: ``{responses}`` and ``{n}`` instead of ``{completion}``); ``scale`` is ``[low, high]``. The key is read
    from the environment variable ``api_key_env``. A reply without a grade on the scale scores None, as does a
    request that failed after ``retries`` or did not end within ``call_seconds``: a total deadline for all requests
    of one call, retries included, and for the pre-flight's one request; a request still open then is cancelled.
    ``timeout`` is the client's limit on connecting and on each read alone, which a server that trickles its reply
    never reaches. ``extra_body`` is sent with each request as it is (a server's own parameters).

    >>> judge = llm_judge("http://localhost:8000/v1", "judge", rubric="Is {completion} the {answer}? 0 to 1")
    >>> judge.columns
    ('answer',)
    """
    if importlib.util.find_spec("openai") is None:
        raise ValueError("needs the openai package (the client of the protocol): pip install 'grpo_ext[judge]'")
    if mode not in ("single", "group"):
        raise ValueError(f"mode {mode!r}: give single or group")
    rubric = rubric if rubric is not None else (RUBRIC if mode == "single" else GROUP_RUBRIC)
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(rubric) if name is not None}
    except ValueError as exc:
        raise ValueError(f"rubric: {exc} (write a literal brace as {{{{ or }}}})") from None
    if any(not f.isidentifier() for f in fields):
        raise ValueError(f"rubric: fields are names such as {{prompt}}; got {sorted(f for f in fields if not f.isidentifier())}")
    needed = "completion" if mode == "single" else "responses"
    if needed not in fields:
        raise ValueError(f"rubric: {mode} mode needs {{{needed}}} in the rubric, where the judge reads what it grades")
    if not (isinstance(scale, (list, tuple)) and len(scale) == 2 and all(isinstance(v, (int, float)) for v in scale)):
        raise ValueError(f"scale: give [low, high], e.g. [0, 10]; got {scale!r}")
    low, high = float(scale[0]), float(scale[1])
    if not low < high:
        raise ValueError(f"scale: low must be below high, got {scale!r}")
    if concurrency < 1 or max_tokens < 1 or timeout <= 0 or call_seconds <= 0 or retries < 0:
        raise ValueError("concurrency and max_tokens at least 1, timeout and call_seconds positive, retries at least 0")
    if api_key_env is not None and not str(api_key_env).isidentifier():
        raise ValueError(f"api_key_env: the name of an environment variable, e.g. OPENAI_API_KEY; got {api_key_env!r}")
    if api_key_env is not None and not os.environ.get(api_key_env):  # a local server needs none: a warning, not an error
        console.logger(__name__).warning(
            f"warning: llm_judge: api_key_env names {api_key_env}, which is not set here; requests go without a key "
            f"(export {api_key_env}=... before the run, or leave api_key_env out for a server that needs none)"
        )
    settings = JudgeSettings(
        base_url=str(base_url),
        model=str(model),
        rubric=rubric,
        low=low,
        high=high,
        mode=mode,
        api_key_env=api_key_env,
        max_tokens=int(max_tokens),
        temperature=float(temperature),
        concurrency=int(concurrency),
        timeout=float(timeout),
        retries=int(retries),
        call_seconds=float(call_seconds),
        cache_size=int(cache_size),
        extra_body=dict(extra_body or {}),
    )
    return Judge(settings, tuple(sorted(fields - _OWN_FIELDS)))
