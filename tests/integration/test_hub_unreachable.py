"""A hub id while the Hugging Face Hub cannot be reached, for real: HF_ENDPOINT on a localhost port that refuses the
connection, or one that takes it and never answers. A model that is not in the local Hugging Face cache stops in one
line within seconds (huggingface_hub's retries took a minute before); one that is there loads from the cache, said in
one line (minutes before: every optional file it lacks was asked for with retries). Nothing but grpo_ext's lines is
written (huggingface_hub's warnings of each retry were)."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from grpo_ext.run import model_cache
from tests.helpers import ROOT, TIMED

CLOSED_PORT = "http://127.0.0.1:9"  # the discard port: nothing listens there, the connection is refused at once
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CACHED = "someone/tiny"  # in the local Hugging Face cache (the tiny model)
MISSING = "someone/nothing-here"  # nowhere
# The environment variables that would let huggingface_hub or transformers skip the Hub, or look elsewhere for it
HUB_SETTINGS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_ETAG_TIMEOUT")
# A process's first request to the Hub waits up to 3 s more where the Hub does not answer: huggingface_hub (2.x) first
# fetches a registry from it for the user-agent header it sends
USER_AGENT_SECONDS = 3


def in_hub_cache(home: Path, repo_id: str, model: Path) -> None:
    """``model`` where huggingface_hub keeps a download of ``repo_id`` under ``home`` (HF_HOME): the snapshot of the
    commit that refs/main names."""
    repo = home / "hub" / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(model, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)


@pytest.fixture
def silent_hub():
    """A Hub address whose port takes connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def workdir(tmp_path, tiny_model, digit_doc) -> Path:
    """A tiny digit recipe (one eval prompt, one sample of 2 tokens) and a Hugging Face home holding CACHED."""
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(digit_doc))
    in_hub_cache(tmp_path / "hf", CACHED, tiny_model)
    return tmp_path


def command(workdir: Path, verb: str, model: str, endpoint: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """``grpo-ext VERB`` of the recipe on ``model`` with the Hub at ``endpoint``, in a fresh interpreter: (its result,
    wall seconds)."""
    full = {k: v for k, v in os.environ.items() if k not in HUB_SETTINGS}
    full.update(PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", HF_HOME=str(workdir / "hf"), HF_ENDPOINT=endpoint, **env)
    recipe = str(workdir / "recipe.yaml")
    if verb == "eval":
        argv = ["eval", recipe, "--model", model, "--out", str(workdir / "eval"), "--force", "eval.max_prompts=1"]
        argv += ["eval.samples=1", "eval.max_new_tokens=2"]
    else:
        argv = ["train", recipe, f"model.name={model}"]
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grpo_ext", *argv], capture_output=True, text=True, env=full, timeout=120)
    return proc, time.monotonic() - t0


REFUSED = "[Errno 111] Connection refused"
SILENT = f"no answer in {model_cache.REACH_SECONDS:g} s; HF_HUB_ETAG_TIMEOUT sets how long to wait"
EVAL_FIX = "pass a catalog alias (grpo-ext ls), a local path or a run directory, or reach the Hub"
TRAIN_FIX = "give a catalog alias (grpo-ext ls), a local model directory or a run's final/, or reach the Hub"

CASES = [
    # (command, model, the Hub, exit status, the last line with {hub} for the Hub's address)
    # not cached, the connection refused: eval's line as before, extended with why and how to reach the model
    pytest.param(
        "eval",
        MISSING,
        "refused",
        1,
        f"error: --model {MISSING}: no such file or directory, and not loadable as a hub id: not in the local Hugging "
        f"Face cache, and the Hub at {{hub}} could not be reached ({REFUSED}); {EVAL_FIX}",
        id="eval-missing-refused",
    ),
    # the same for train's model.name
    pytest.param(
        "train",
        MISSING,
        "refused",
        1,
        f"error: model.name {MISSING!r}: not in the local Hugging Face cache, and the Hub at {{hub}} could not be reached "
        f"({REFUSED}); {TRAIN_FIX}",
        id="train-missing-refused",
    ),
    # not cached, a Hub that takes the connection and never answers: one request, cut after REACH_SECONDS
    pytest.param(
        "eval",
        MISSING,
        "silent",
        1,
        f"error: --model {MISSING}: no such file or directory, and not loadable as a hub id: not in the local Hugging "
        f"Face cache, and the Hub at {{hub}} could not be reached ({SILENT}); {EVAL_FIX}",
        id="eval-missing-silent",
    ),
    # cached: read from the cache alone, said in one line, and the eval runs
    pytest.param("eval", CACHED, "refused", 0, "grpo_ext: wrote ", id="eval-cached-refused"),
]


@pytest.mark.parametrize("timed", TIMED)
@pytest.mark.parametrize("verb, model, hub, status, last", CASES)
def test_a_hub_id_with_the_hub_unreachable_is_one_line_at_once(workdir, silent_hub, verb, model, hub, status, last, timed):
    endpoint = CLOSED_PORT if hub == "refused" else silent_hub
    proc, seconds = command(workdir, verb, model, endpoint)
    lines = proc.stderr.splitlines()
    assert proc.returncode == status, proc.stderr
    assert all(line.startswith("grpo_ext: ") for line in lines[:-1]), proc.stderr  # no retry's warnings
    assert lines[-1].startswith(last.format(hub=endpoint)), proc.stderr
    if status == 0:
        said = f"grpo_ext: model: the Hub at {endpoint} could not be reached ({REFUSED}); loading {model!r} from the local "
        assert f"{said}Hugging Face cache" in lines, proc.stderr
    if timed:
        # the same command with huggingface_hub switched off: the same start and load, and no request
        reference, ref_seconds = command(workdir, verb, model, endpoint, HF_HUB_OFFLINE="1")
        assert reference.returncode == status, reference.stderr
        wait = model_cache.REACH_SECONDS + USER_AGENT_SECONDS if hub == "silent" else 0
        assert seconds < 1.5 * ref_seconds + wait, f"{seconds:.1f} s against {ref_seconds:.1f} s offline"


def test_train_asks_the_hub_once_before_torch_loads(workdir):
    """`grpo-ext train` asks the Hub about a hub id before anything heavy loads (``models.ask_hub``): one that is not
    cached stops with its one line, torch not imported and no output_dir made; one that is cached trains, said once,
    its model load reading the answer rather than asking again."""
    env = {k: v for k, v in os.environ.items() if k not in HUB_SETTINGS}
    env.update(PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", HF_HOME=str(workdir / "hf"), HF_ENDPOINT=CLOSED_PORT)
    recipe, out = str(workdir / "recipe.yaml"), workdir / "runs" / "digit"
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(sys.argv[1:]); "
        "print('torch' in sys.modules, file=sys.stderr); sys.exit(rc)"
    )
    argv = [sys.executable, "-c", code, "train", recipe]
    proc = subprocess.run([*argv, f"model.name={MISSING}"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and proc.stderr.splitlines()[-1] == "False", proc.stderr
    assert proc.stderr.splitlines()[-2].startswith(f"error: model.name {MISSING!r}: not in the local Hugging Face cache")
    assert not out.exists()
    small = ["training.max_steps=1", "eval.enabled=false", "health.preflight=false"]
    proc = subprocess.run([*argv, f"model.name={CACHED}", *small], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = f"grpo_ext: model: the Hub at {CLOSED_PORT} could not be reached ({REFUSED}); loading {CACHED!r} from the local "
    assert proc.stderr.splitlines().count(f"{said}Hugging Face cache") == 1, proc.stderr
    assert (out / "final").is_dir()
