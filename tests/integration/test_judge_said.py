"""What ``llm_judge`` heard and said, against a real OpenAI-compatible judge on localhost (a standard-library server in
this process, as in test_judge_deadline.py): its replies in ``rewards score`` and in completions.jsonl, the prompt
``--prompt`` hands the rubric, a group scored from several ``--completion``, the server's own message when it
refuses a request (the per-call warning and the pre-flight, with the models it serves), answers from the cache
while the server fails, and samples the judge gave no grade counted wherever samples are counted. The rubric-level
rules without a server (the pre-flight's verdict on a judge that gives one grade, the count lines): tests/unit."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.rewards.judge import llm_judge
from grpo_ext.run import completions, rundir
from tests.helpers import run_cli, tiny_doc

PINNED = "judge"  # the one model the server answers for, as `transformers serve PATH` answers for PATH alone


def answer(text: str) -> tuple[int, dict]:
    return 200, {
        "id": "grade",
        "object": "chat.completion",
        "created": 0,
        "model": PINNED,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


def pinned(body: dict) -> tuple[int, dict] | None:
    """transformers serve's refusal of another model's name: status 400, the message under FastAPI's ``detail``."""
    if body["model"] != PINNED:
        return 400, {"detail": f"Server is pinned to '{PINNED}'; requested '{body['model']}'."}
    return None


class Grader:
    """A judge on localhost: ``respond(request body)`` gives (status, JSON body) for each chat completion; ``GET
    /v1/models`` lists ``PINNED``. ``heard`` keeps each request's message; ``failing`` makes it answer 503."""

    def __init__(self, respond):
        grader = self
        self.heard: list[str] = []
        self.failing = False

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
                self.send(200, {"object": "list", "data": [{"id": PINNED, "object": "model", "created": 0, "owned_by": "me"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                grader.heard.append(body["messages"][-1]["content"])
                if grader.failing:
                    return self.send(503, {"error": {"message": "the engine is down"}})
                self.send(*respond(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def replying(text: str):
    return lambda body: pinned(body) or answer(text)


def score(url: str, *options: str) -> list[str]:
    return ["rewards", "score", "llm_judge", "--arg", f"base_url={url}", "--arg", f"model={PINNED}", *options]


# (what the judge replies, the options, what rewards score prints)
SAID = [
    # a reply without a grade: None, with the reply itself below (before: the None and its reason alone)
    (
        "I would rather not grade this one.",
        ["--completion", "4"],
        [
            "llm_judge: None; the judge's reply held no grade from 0 to 10 for it",
            "judge said: 'I would rather not grade this one.'",
        ],
    ),
    # a grade: the score, and the reply it was read from
    ("7", ["--completion", "4"], ["llm_judge: 0.7", "judge said: '7'"]),
    # a long reply is cut to one line of 300 characters, its line breaks shown as \n
    (
        "Grade:\n" + "x" * 400,
        ["--completion", "4"],
        ["llm_judge: None; the judge's reply held no grade from 0 to 10 for it", "judge said: 'Grade:\\n" + "x" * 290 + "…"],
    ),
    # several completions in group mode: one request grades them together; each score, then the one reply
    (
        "1: 9\n2: 4",
        ["--completion", "4", "--completion", "5", "--arg", "mode=group"],
        ["llm_judge #1: 0.9", "llm_judge #2: 0.4", "judge said: '1: 9\\n2: 4'"],
    ),
    # several completions in single mode: a request each, each score with its reply
    (
        "6",
        ["--completion", "4", "--completion", "5"],
        ["llm_judge #1: 0.6", "judge said: '6'", "llm_judge #2: 0.6", "judge said: '6'"],
    ),
]


@pytest.mark.parametrize(("reply", "options", "printed"), SAID)
def test_rewards_score_shows_what_the_judge_said(reply, options, printed, capsys):
    with Grader(replying(reply)) as grader:
        assert run_cli(score(grader.url, *options)) == 0
    assert capsys.readouterr().out.splitlines() == printed
    assert len(grader.heard) == (1 if "mode=group" in options else options.count("--completion"))


# (how the prompt is given, the prompt the judge reads)
PROMPTS = [
    (["--prompt", "What is 2 + 2?"], "What is 2 + 2?"),
    # a column named prompt is the prompt, its line breaks kept
    (["--column", "prompt=What is 2 + 2?\nShow your work."], "What is 2 + 2?\nShow your work."),
    ([], ""),  # none given: empty, as before
]


@pytest.mark.parametrize(("options", "prompt"), PROMPTS)
def test_the_prompt_reaches_the_rubric(options, prompt, capsys):
    with Grader(replying("8")) as grader:
        assert run_cli(score(grader.url, "--completion", "4", *options)) == 0
    (message,) = grader.heard
    assert f"Request:\n{prompt}\n\nResponse:\n4\n\n" in message, message  # the default rubric's own layout
    assert capsys.readouterr().out.splitlines()[0] == "llm_judge: 0.8"


def test_the_prompt_given_twice_is_refused(capsys):
    with Grader(replying("8")) as grader:
        assert run_cli(score(grader.url, "--completion", "4", "--prompt", "a", "--column", "prompt=b")) == 2
    assert capsys.readouterr().err == (
        "error: rewards score: the prompt is given twice (--prompt and --column prompt=...); keep --prompt\n"
    )
    assert grader.heard == []


# (the server's refusal, the model asked for, api_key_env, what the warning and the pre-flight quote)
REFUSALS = [
    # transformers serve: FastAPI's detail, which the client drops ("Error code: 400" alone); the served model listed
    (
        pinned,
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        None,
        "BadRequestError (HTTP 400): Server is pinned to 'judge'; requested 'HuggingFaceTB/SmolLM2-135M-Instruct'",
        "; it serves 'judge': set model to that name",
    ),
    # OpenAI's shape: error.message, quoted as such
    (
        lambda body: (404, {"error": {"message": f"The model `{body['model']}` does not exist.", "code": "model_not_found"}}),
        "gpt-judge",
        None,
        "NotFoundError (HTTP 404): The model `gpt-judge` does not exist",
        "; it serves 'judge': set model to that name",
    ),
    # a key the server wants, from a variable that is not set: said beside the server's message; the model is served
    (
        lambda body: (401, {"error": {"message": "Incorrect API key provided"}}),
        PINNED,
        "GRPO_EXT_TEST_JUDGE_KEY",
        "AuthenticationError (HTTP 401): Incorrect API key provided",
        "; api_key_env GRPO_EXT_TEST_JUDGE_KEY is not set, so no key was sent",
    ),
]


@pytest.mark.parametrize(("respond", "model", "key_env", "message", "hint"), REFUSALS)
def test_a_refusal_quotes_the_server(respond, model, key_env, message, hint, monkeypatch, capsys):
    monkeypatch.delenv("GRPO_EXT_TEST_JUDGE_KEY", raising=False)
    with Grader(respond) as grader:
        judge = llm_judge(grader.url, model, retries=0, api_key_env=key_env)
        assert judge(prompts=["p"], completions=["4"]) == [None]
        with pytest.raises(RecipeError) as refused:
            judge.preflight()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"grpo_ext: warning: llm_judge at {grader.url}: 1 of 1 requests failed ({message}); scored None"
    )
    assert str(refused.value) == f"error: llm_judge: {grader.url} refused a test request: {message}{hint}"


def test_a_key_variable_that_is_not_set_is_a_warning_at_validate(digit_doc, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GRPO_EXT_TEST_JUDGE_KEY", raising=False)
    doc = {**digit_doc, "rewards": [{"name": "llm_judge", "args": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}]}
    doc["rewards"][0]["args"]["api_key_env"] = "GRPO_EXT_TEST_JUDGE_KEY"
    recipe = tmp_path / "judge.yaml"
    recipe.write_text(yaml.safe_dump(doc))
    assert run_cli(["validate", str(recipe)]) == 0
    out, err = capsys.readouterr()
    assert out == f"{recipe}: ok\n"
    assert err == (
        "grpo_ext: warning: llm_judge: api_key_env names GRPO_EXT_TEST_JUDGE_KEY, which is not set here; "
        "requests go without a key "
        "(export GRPO_EXT_TEST_JUDGE_KEY=... before the run, or leave api_key_env out for a server that needs none)\n"
    )
    monkeypatch.setenv("GRPO_EXT_TEST_JUDGE_KEY", "secret")  # set: nothing to say
    assert run_cli(["validate", str(recipe)]) == 0
    assert capsys.readouterr().err == ""


def test_answers_from_the_cache_do_not_say_the_judge_answers_again(capsys):
    """Failing, a call whose every answer comes from the cache says so once and leaves the judge failing; the line
    that it answers again waits for a request the server answered."""
    with Grader(replying("7")) as grader:
        judge = llm_judge(grader.url, PINNED, retries=0)
        assert judge(prompts=["p", "p"], completions=["a", "b"]) == [0.7, 0.7]
        grader.failing = True
        assert judge(prompts=["p", "p"], completions=["a", "c"]) == [0.7, None]  # "a" from the cache, "c" fails
        assert judge(prompts=["p", "p"], completions=["a", "b"]) == [0.7, 0.7]  # all from the cache
        assert judge(prompts=["p"], completions=["b"]) == [0.7]  # said once
        grader.failing = False
        assert judge(prompts=["p", "p"], completions=["a", "d"]) == [0.7, 0.7]
    assert capsys.readouterr().err.splitlines() == [
        f"grpo_ext: warning: llm_judge at {grader.url}: 1 of 2 requests failed "
        "(InternalServerError (HTTP 503): the engine is down); scored None; 1 of 2 answered from the cache",
        f"grpo_ext: llm_judge at {grader.url}: all 2 answers came from the cache (asked before it failed); "
        "the server was not asked, so it may still be failing",
        f"grpo_ext: llm_judge at {grader.url}: answering again; 1 of 2 answered from the cache",
    ]


UNGRADED = "Choose a digit from 0 to 9"  # the second eval prompt of recipes/digit.yaml: the judge gives its samples no grade


def grade_all_but_one_prompt(body: dict) -> tuple[int, dict]:
    """0.5 (5 on 0 to 10) for every request, but no grade for the samples of one eval prompt."""
    return pinned(body) or answer("I cannot grade this." if UNGRADED in body["messages"][-1]["content"] else "5")


def test_a_run_counts_the_samples_its_judge_left_ungraded_and_keeps_its_replies(tiny_model, digit_doc, tmp_path, capsys):
    """A tiny run (pre-flight, eval before and after, one step): the judge grades every sample 5 but those of one eval
    prompt. The eval lines and report.md count those samples; completions.jsonl keeps each reply beside its score;
    the pre-flight names a judge that gives every sample one grade as such."""
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", health={"preflight": "warn", "preflight_prompts": 2})
    doc["training"]["max_steps"] = 1
    with Grader(grade_all_but_one_prompt) as grader:
        doc["rewards"] = [{"name": "llm_judge", "args": {"base_url": grader.url, "model": PINNED, "retries": 0}}]
        recipe = tmp_path / "judge.yaml"
        recipe.write_text(yaml.safe_dump(doc))
        with pytest.MonkeyPatch.context() as env:
            env.setenv("HF_HUB_OFFLINE", "1")
            assert cli.main(["train", str(recipe)]) == 0
    rundir.release(tmp_path / "run")
    err = capsys.readouterr().err
    assert doc["data"]["eval_prompts"][1].startswith(UNGRADED)  # 2 eval prompts x 2 samples: 2 of the 4 ungraded
    for label in ("before", "after"):
        assert re.search(rf"eval {label}: pass rate llm_judge 0\.0 \(4 samples, 2 of them not scored by llm_judge, ", err), err
    report = (tmp_path / "run" / "report.md").read_text()
    assert (
        "not scored (None), left out of the mean and pass rate: llm_judge 2 of 4 samples before, 2 of 4 samples after" in report
    )
    assert "llm_judge gave the grade 0.5 to all 8 samples: the judge cannot tell them apart" in err
    assert "too strict" not in err
    lines = [json.loads(line) for line in (tmp_path / "run" / completions.FILE).read_text().splitlines()]
    assert len(lines) == 4 and all(
        line["replies"] == {"llm_judge": "5"} and line["rewards"]["llm_judge"] == 0.5 for line in lines
    )


def test_the_completions_log_holds_each_reply_beside_its_score():
    """The lines a batch is written as: each judge's reply to each completion, None where its request failed."""

    def respond(body):
        return (500, {"detail": "boom"}) if "Response:\nb" in body["messages"][-1]["content"] else answer("7")

    with Grader(respond) as grader:
        judge = llm_judge(grader.url, PINNED, retries=0)
        batch = {"prompt": ["p", "p"], "completion": ["a", "b"], "advantages": [0.5, -0.5]}
        batch["rewards"] = {"llm_judge": judge(prompts=batch["prompt"], completions=batch["completion"])}
    said = completions.replies([judge], batch)
    written = [json.loads(line) for line in completions.lines(3, batch, said)]
    assert [(w["rewards"], w["replies"]) for w in written] == [
        ({"llm_judge": 0.7}, {"llm_judge": "7"}),
        ({"llm_judge": None}, {"llm_judge": None}),
    ]
