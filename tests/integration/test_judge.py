"""``llm_judge`` against a real OpenAI-compatible server on localhost: ``transformers serve`` with the tiny model.

The tiny model's weights are random, so the requests carry a logit bias (``extra_body``, passed to the server as
it is) that makes it answer "7": the grade, 7 on the scale 0 to 10, is then known, and what reaches the trainer
can be checked. The server is started for real and killed for real in the middle of a run.
"""

import json
import os
import socket
import subprocess
import sys
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
    def __init__(self, model: Path):
        self.port = free_port()
        self.model = str(model)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        command = [str(Path(sys.executable).with_name("transformers")), "serve", "--port", str(self.port), str(model)]
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited: {self.proc.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://localhost:{self.port}/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("transformers serve did not start within 120 s")

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}/v1"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


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
