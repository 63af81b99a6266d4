"""``llm_judge`` against a real OpenAI-compatible server on localhost: ``transformers serve`` with the tiny model.

The tiny model's weights are random, so the requests carry a logit bias (``extra_body``, passed to the server as
it is) that makes it answer "7": the grade, 7 on the scale 0 to 10, is then known, and what reaches the trainer
can be checked. The server is started for real and killed for real in the middle of a run.
"""

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from transformers import TrainerCallback

from grpo_ext import cli
from grpo_ext.recipe import load
from grpo_ext.verbs.train import train
from tests.helpers import tiny_doc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``transformers serve`` with ``model`` on a free port (or ``command``, run as it is, in its place), in a process
    group of its own: stopped with everything it started when it does not start within ``start_seconds``, when the
    test stops it, and at the latest when the test process exits."""

    def __init__(self, model: Path, command: list[str] | None = None, start_seconds: float = 120):
        self.port = free_port()
        self.model = str(model)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        command = command or [str(Path(sys.executable).with_name("transformers")), "serve", "--port", str(self.port), self.model]
        self.log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a server that logs every request never blocks on it
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        atexit.register(self.stop)
        try:
            self.wait_until_ready(start_seconds)
        except BaseException:
            self.stop()
            raise

    def wait_until_ready(self, start_seconds: float) -> None:
        deadline = time.monotonic() + start_seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"transformers serve exited: {self.log.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://localhost:{self.port}/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"transformers serve did not start within {start_seconds:g} s")

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}/v1"

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self.log.closed:  # stopped already: its group is gone, and its number may be another's by now
            return
        with contextlib.suppress(ProcessLookupError):  # the whole group: a server's workers as well as the server
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()


def ended(pid: int) -> bool:
    """Whether process ``pid`` has ended: gone, or a zombie that its parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize(
    ("then", "error"),
    [
        ("wait", "did not start within 1 s"),  # never answers /health: stopped when its time is up
        ("exit 3", "transformers serve exited"),  # exits at once, leaving a child of its own behind
    ],
)
def test_a_server_that_does_not_start_is_stopped_with_what_it_started(then, error, tmp_path):
    pids = tmp_path / "pids"
    command = ["sh", "-c", f"sleep 600 & echo $$ $! > {pids}; {then}"]
    with pytest.raises(RuntimeError, match=error):
        Server(tmp_path, command=command, start_seconds=1)
    started = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 10  # a kill takes effect in milliseconds; the bound only keeps a failure short
    while not all(map(ended, started)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(started) == 2 and all(map(ended, started)), [(pid, ended(pid)) for pid in started]


@pytest.fixture(scope="module")
def server(tiny_model):
    served = Server(tiny_model)
    yield served
    served.stop()


def seven(tiny_model: Path) -> dict:
    """The bias that makes the tiny model answer with the token "7"."""
    from transformers import AutoTokenizer

    (token,) = AutoTokenizer.from_pretrained(tiny_model).encode("7")
    return {"logit_bias": {str(token): 100.0}}


def judge_recipe(tmp_path, digit_doc, tiny_model, url: str, **training) -> Path:
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run")
    doc["training"].update(training)
    args = {
        "base_url": url,
        "model": str(tiny_model),
        "max_tokens": 1,
        "retries": 1,
        "timeout": 5,
        "extra_body": seven(tiny_model),
    }
    doc["rewards"] = [{"name": "llm_judge", "args": args}, "digit_exact"]
    doc["eval"]["enabled"] = False
    path = tmp_path / "judge.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def judged(run: Path) -> list:
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [line.get("rewards/llm_judge/mean") for line in lines if "rewards/digit_exact/mean" in line]


def test_two_steps_with_a_judge(server, tiny_model, digit_doc, tmp_path, no_hub):
    recipe = judge_recipe(tmp_path, digit_doc, tiny_model, server.url)
    assert cli.main(["train", str(recipe)]) == 0
    assert judged(tmp_path / "run") == [pytest.approx(0.7), pytest.approx(0.7)]  # "7" on 0 to 10, every sample


def test_the_judge_dies_mid_run(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    """Killed after step 1: the later steps score None, one warning line, and the run finishes."""
    doomed = Server(tiny_model)

    class KillAfterFirstStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                doomed.stop()

    try:
        recipe = judge_recipe(tmp_path, digit_doc, tiny_model, doomed.url, max_steps=3)
        summary = train(load(str(recipe)), callbacks=[KillAfterFirstStep()])
    finally:
        doomed.stop()
    assert summary["status"] == "completed"
    scores = judged(tmp_path / "run")
    assert scores[0] == pytest.approx(0.7) and all(s is None or s != s for s in scores[1:]), scores
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning: llm_judge" in line]
    assert len(warnings) == 1 and "requests failed" in warnings[0], warnings


def test_no_server_stops_before_the_model_loads(tiny_model, digit_doc, tmp_path, no_hub, capsys):
    recipe = judge_recipe(tmp_path, digit_doc, tiny_model, f"http://localhost:{free_port()}/v1")
    assert cli.main(["train", str(recipe)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "did not answer a test request" in line and "Connection" in line, line
    assert not (tmp_path / "run").exists()


def test_a_rubric_whose_reply_has_no_grade_stops_before_the_model_loads(server, tiny_model, digit_doc, tmp_path, no_hub, capsys):
    recipe = judge_recipe(tmp_path, digit_doc, tiny_model, server.url, max_steps=1)
    doc = yaml.safe_load(recipe.read_text())
    doc["rewards"][0]["args"]["scale"] = [0, 5]
    recipe.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(recipe)]) == 2  # "7" is off the scale 0 to 5
    assert "holds no grade from 0 to 5" in capsys.readouterr().err
