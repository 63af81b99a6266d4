"""``llm_judge`` against real judges on localhost that never finish: one trickles its reply a byte at a time, one
answers after an hour. ``call_seconds`` is a total deadline for every request, the pre-flight's included; a request
still open then is cancelled, its connection closed, and the command exits when its own work is done.

The checks without ``timing`` are liveness checks: the deadline is 2 s and a command gets a minute or more, which
only a hang exceeds (before, a command against the trickling judge never ended and one against the sleeping judge
exited some 90 s after it had answered). The ``timed`` runs compare with the same command against a judge that
answers at once, measured beside it.
"""

import json
import math
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from grpo_ext.rewards.judge import llm_judge
from tests.helpers import TIMED, tiny_doc

DEADLINE = 2  # call_seconds of every judge here
LIVENESS = 60  # seconds a command gets against a judge that never finishes: thirty times its deadline
SEVEN = {
    "id": "grade",
    "object": "chat.completion",
    "created": 0,
    "model": "judge",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "7"}, "finish_reason": "stop"}],
}


class Judge:
    """An OpenAI-compatible server in this process: it answers the first ``answered`` requests with the grade "7",
    then ``behaviour``: answers (at once), trickles (a 200 header, then a byte every 0.2 s of a body that never
    completes) or sleeps (an hour, saying nothing). ``open`` counts the requests it is serving now."""

    def __init__(self, behaviour: str, answered: int = 0):
        judge = self
        self.open, self.seen = 0, 0
        self.lock, self.stopping = threading.Lock(), threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                with judge.lock:
                    judge.seen += 1
                    judge.open += 1
                    first = judge.seen <= answered
                try:
                    self.reply("answers" if first else behaviour)
                except OSError:  # the client closed the connection: what a cancelled request does
                    pass
                finally:
                    with judge.lock:
                        judge.open -= 1

            def reply(self, how: str) -> None:
                body = json.dumps(SEVEN).encode()
                if how == "sleeps":
                    judge.stopping.wait(3600)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body) + (10**6 if how == "trickles" else 0)))
                self.end_headers()
                if how == "answers":
                    self.wfile.write(body)
                    return
                while not judge.stopping.wait(0.2):
                    self.wfile.write(b" ")
                    self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def score(url: str, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """``grpo-ext rewards score llm_judge`` against ``url`` as a user runs it: (the process, its wall time)."""
    argv = [sys.executable, "-m", "grpo_ext", "rewards", "score", "llm_judge", "--completion", "4"]
    argv += ["--arg", f"base_url={url}", "--arg", "model=judge", "--arg", f"call_seconds={DEADLINE}"]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - t0


@pytest.mark.parametrize("timed", TIMED)
@pytest.mark.parametrize(
    "behaviour",
    [
        "trickles",  # a byte every 0.2 s: no read ever times out, so only a total deadline ends the request
        "sleeps",  # silent for an hour: the client's own timeout (30 s, twice retried) would take some 90 s
    ],
)
def test_rewards_score_exits_at_the_deadline(behaviour, timed):
    with Judge(behaviour) as judge:
        proc, seconds = score(judge.url, timeout=LIVENESS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("llm_judge: None"), proc.stdout
    assert f"1 of 1 requests failed (no answer within call_seconds={DEADLINE})" in proc.stderr, proc.stderr
    if timed:
        with Judge("answers") as prompt:
            reference, at_once = score(prompt.url, timeout=LIVENESS)
        assert reference.stdout.startswith("llm_judge: 0.7"), reference.stdout + reference.stderr
        # the deadline plus what the command costs anyway (interpreter, imports, one request), with half of it to spare
        assert (seconds - DEADLINE) / at_once < 1.5, f"{seconds:.1f} s against {at_once:.1f} s for an answer at once"


def test_a_late_request_is_cancelled_and_its_connection_closed():
    """The call returns at its deadline and the request is not left running: the server sees its connection close."""
    with Judge("trickles") as judge:
        scores = llm_judge(judge.url, "judge", call_seconds=DEADLINE)(prompts=["p"] * 3, completions=["4", "5", "6"])
        deadline = time.monotonic() + 10  # a closed socket fails the server's next write, 0.2 s later
        while judge.open and time.monotonic() < deadline:
            time.sleep(0.1)
        assert scores == [None, None, None]
        assert (judge.seen, judge.open) == (3, 0)


def judge_recipe(tmp_path: Path, digit_doc: dict, tiny_model: Path, url: str) -> Path:
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")  # 2 steps of 4 completions
    doc["rewards"] = [{"name": "llm_judge", "args": {"base_url": url, "model": "judge", "call_seconds": DEADLINE}}, "digit_exact"]
    doc["eval"]["enabled"] = False
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def train(recipe: Path, limit: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "grpo_ext", "train", str(recipe)], capture_output=True, text=True, timeout=limit, env=env
    )


def test_train_against_a_trickling_judge_stops_before_the_model_loads(tiny_model, digit_doc, tmp_path):
    with Judge("trickles") as judge:
        proc = train(judge_recipe(tmp_path, digit_doc, tiny_model, judge.url), limit=LIVENESS)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: llm_judge: {judge.url} did not answer a test request within call_seconds={DEADLINE} s; "
        "check that the server is up and serving, or raise call_seconds"
    ]
    assert not (tmp_path / "run").exists()


def test_train_scores_none_once_the_judge_trickles_and_exits(tiny_model, digit_doc, tmp_path):
    """The judge answers the pre-flight, then trickles: both steps score None with one warning, and the process ends."""
    with Judge("trickles", answered=1) as judge:
        proc = train(judge_recipe(tmp_path, digit_doc, tiny_model, judge.url), limit=5 * LIVENESS)  # a tiny run besides
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "llm_judge" in line and "warning" in line]
    assert warnings == [
        f"grpo_ext: warning: llm_judge at {judge.url}: 4 of 4 requests failed "
        f"(no answer within call_seconds={DEADLINE}); scored None"
    ]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    judged = [m.get("rewards/llm_judge/mean") for m in metrics if "rewards/digit_exact/mean" in m]
    assert len(judged) == 2 and all(s is None or math.isnan(s) for s in judged), judged
