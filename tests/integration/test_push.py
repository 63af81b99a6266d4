"""`grpo-ext push` on a run of the tiny model: the dry run, refusals before any network, a Hub that cannot be reached
(one line, in seconds), a user's own card, and whole pushes to a Hub served on localhost that answers the requests
huggingface_hub makes (whoami, create repo and branch, pre-upload, commit), so its real upload code runs."""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.results import model_card
from grpo_ext.verbs import push
from tests.helpers import ROOT, TIMED, run_cli, tiny_doc

CLOSED_PORT = "http://127.0.0.1:9"  # the discard port: nothing listens there, the connection is refused at once


def train(tiny_model: Path, root: Path, **sections) -> Path:
    """The tiny digit recipe trained 2 steps into ``root/run``."""
    doc = tiny_doc(yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text()), tiny_model, root / "run", **sections)
    recipe = root / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(doc))
    assert cli.main(["train", str(recipe)]) == 0
    return root / "run"


@pytest.fixture(scope="module")
def trained(tiny_model, tmp_path_factory) -> Path:
    return train(tiny_model, tmp_path_factory.mktemp("push"))


@pytest.fixture(scope="module")
def trained_lora(tiny_model, tmp_path_factory) -> Path:
    return train(tiny_model, tmp_path_factory.mktemp("push-lora"), model={"lora": {"r": 8, "lora_alpha": 16}})


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A fresh copy of the trained run, for a test to change."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def command(*args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """``grpo-ext ARGS`` in a fresh interpreter with ``env`` added: (its result, wall seconds)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "127.0.0.1,localhost", **env}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grpo_ext", *args], capture_output=True, text=True, env=full, timeout=120)
    return proc, time.monotonic() - t0


def test_dry_run_lists_the_files_and_writes_the_card(run):
    proc, _ = command("push", str(run), "owner/name", "--dry-run", HF_HUB_OFFLINE="1", HF_ENDPOINT=CLOSED_PORT)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("push --dry-run: nothing uploaded")
    assert f"to     {CLOSED_PORT}/owner/name (public if it is created), branch main" in out
    final = run / "final"
    for name in ("README.md", "config.json", "model.safetensors", "tokenizer.json", "curves.png"):
        size = push.size_text((final / name).stat().st_size)
        assert re.search(rf"^    {re.escape(name)} +{re.escape(size)}", out, re.M), name
    assert f"{len(push.listing(final))} files" in out
    card = (final / "README.md").read_text()
    assert model_card.MARKER in card and (final / "curves.png").read_bytes() == (run / "curves.png").read_bytes()
    assert "\n    ---\n    library_name: transformers\n" in out  # the card's first lines
    assert proc.stderr == ""


def test_the_card_loads_the_model_it_describes(run):
    """The card's example, pointed at the local final/ folder instead of the Hub, loads the model and generates."""
    code = re.search(r"```python\n(.*?)```", model_card.model_card(run, str(run / "final")), re.S).group(1)
    exec(compile(code, "card", "exec"), {})


def test_a_lora_run_pushes_its_adapter_with_a_card_of_its_own(trained_lora, tmp_path):
    """peft saves a blank card template beside the adapter: the dry run replaces it, and the example loads the adapter."""
    run = Path(shutil.copytree(trained_lora, tmp_path / "run"))
    assert "[More Information Needed]" in (run / "final" / "README.md").read_text()
    proc, _ = command("push", str(run), "owner/lora", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    card = (run / "final" / "README.md").read_text()
    assert model_card.MARKER in card and "[More Information Needed]" not in card
    assert "adapter_model.safetensors" in proc.stdout and not re.search(r"^    model\.safetensors ", proc.stdout, re.M)
    code = re.search(r"```python\n(.*?)```", model_card.model_card(run, str(run / "final")), re.S).group(1)
    assert "PeftModel.from_pretrained" in code
    exec(compile(code, "card", "exec"), {})


def test_a_users_card_is_left_untouched(run):
    own = run / "final" / "README.md"
    own.write_text("---\nlicense: mit\n---\n# My model\n\nWritten by hand.\n")
    before = own.read_bytes()
    proc, _ = command("push", str(run), "owner/name", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert own.read_bytes() == before and "your own card, kept as it is" in proc.stdout
    assert not (run / "final" / "curves.png").exists()  # plots are copied only for the card that links them


def test_a_card_without_its_marker_is_the_users(run):
    """Deleting the marker line keeps one's edits of grpo_ext's card."""
    assert run_cli(["push", str(run), "owner/name", "--dry-run"]) == 0
    card = run / "final" / "README.md"
    card.write_text(card.read_text().replace(model_card.MARKER + "\n", "").replace("# name", "# my edited title"))
    edited = card.read_bytes()
    assert run_cli(["push", str(run), "owner/name", "--dry-run"]) == 0
    assert card.read_bytes() == edited


def no_final(run: Path) -> Path:
    shutil.rmtree(run / "final")
    return run


def lone_config(run: Path) -> Path:
    for path in (run / "final").iterdir():
        if path.name != "config.json":
            path.unlink()
    return run


def not_a_run(run: Path) -> Path:
    return run / "final"


REFUSED = [
    # (how the run is spoilt, repo id, what the one line says)
    (None, "justaname", "give OWNER/NAME"),  # no owner
    (None, "owner/bad--name", "is not a Hub repo id"),  # huggingface_hub's validator
    (None, "a/b/c", "give OWNER/NAME"),  # a path, not a repo id
    (no_final, "owner/name", "no model or LoRA adapter to push; train it first: grpo-ext train"),  # not trained
    (lone_config, "owner/name", "no model or LoRA adapter to push"),  # weights gone
    (not_a_run, "owner/name", "not a run directory"),  # final/ given for the run directory
]


@pytest.mark.parametrize("spoil, repo_id, said", REFUSED)
def test_bad_input_exits_2_with_one_line_and_nothing_written(run, capsys, spoil, repo_id, said):
    target = spoil(run) if spoil else run
    before = snapshot(run)
    assert run_cli(["push", str(target), repo_id]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and said in err, err
    assert snapshot(run) == before


def listening_but_silent():
    """A port where connections are taken (the kernel's backlog) and never answered."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


UNREACHABLE = [
    # (environment, what failed, the fix): the one line says both
    ({"HF_HUB_OFFLINE": "1"}, "the Hub is switched off here (HF_HUB_OFFLINE", "unset it to push"),  # before any request
    ({"HF_ENDPOINT": CLOSED_PORT}, f"cannot reach the Hub at {CLOSED_PORT}", "check the network connection"),  # refused
]


@pytest.mark.parametrize("timed", TIMED)
@pytest.mark.parametrize("env, said, fix", UNREACHABLE)
def test_an_unreachable_hub_fails_at_once_with_one_line(run, env, said, fix, timed):
    proc, seconds = command("push", str(run), "owner/name", HF_TOKEN="hf_test", **env)
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1 and said in proc.stderr and fix in proc.stderr, proc.stderr
    assert proc.stdout == ""
    if timed:
        reference, ref_seconds = command("push", str(run), "owner/name", "--dry-run")  # the same start, no request
        assert reference.returncode == 0
        assert seconds < 5, f"{seconds:.1f} s"
        assert seconds < 3 * ref_seconds, f"{seconds:.1f} s against {ref_seconds:.1f} s for the dry run"


@pytest.mark.parametrize("timed", TIMED)
def test_a_hub_that_never_answers_fails_after_the_probe(run, timed):
    sock = listening_but_silent()
    try:
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
        proc, seconds = command("push", str(run), "owner/name", HF_TOKEN="hf_test", HF_ENDPOINT=endpoint)
    finally:
        sock.close()
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1 and f"cannot reach the Hub at {endpoint}" in proc.stderr, proc.stderr
    if timed:
        _, ref_seconds = command("push", str(run), "owner/name", "--dry-run")
        assert seconds < push.PROBE_SECONDS + 3 * ref_seconds, f"{seconds:.1f} s against {ref_seconds:.1f} s for the dry run"


def test_no_token_stops_before_any_request(run, tmp_path):
    proc, _ = command("push", str(run), "owner/name", HF_TOKEN="", HF_TOKEN_PATH=str(tmp_path / "token"), HF_ENDPOINT=CLOSED_PORT)
    assert proc.returncode == 1
    assert proc.stderr == "error: push: no Hugging Face token; set HF_TOKEN to a write token or run `hf auth login`\n"
    assert not (run / "final" / "README.md").exists()  # nothing is written before the checks that need no network


class Hub:
    """The Hub's endpoints that a push calls, on localhost: it records each request and keeps each commit's files."""

    def __init__(self, token: str = "hf_test", private_repo: bool = False):
        self.requests: list[tuple[str, str, dict]] = []
        self.commits: list[dict] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                hub.requests.append(("GET", self.path, dict(self.headers)))
                if self.path == "/api/whoami-v2":
                    if self.headers.get("authorization") != f"Bearer {token}":
                        return self.answer(401, {"error": "Invalid credentials in Authorization header"})
                    return self.answer(200, {"name": "owner", "type": "user"})
                if self.path.startswith("/api/models/owner/name"):
                    return self.answer(200, {"id": "owner/name", "private": private_repo, "sha": "0" * 40})
                return self.answer(404, {"error": "not here"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                hub.requests.append(("POST", self.path, dict(self.headers)))
                if self.path == "/api/repos/create":
                    payload = json.loads(body)
                    hub.created = payload
                    return self.answer(200, {"url": f"{hub.endpoint}/{payload['organization']}/{payload['name']}"})
                if "/preupload/" in self.path:
                    modes = [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in json.loads(body)["files"]
                    ]
                    return self.answer(200, {"files": modes})
                if "/commit/" in self.path:
                    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    files = {e["value"]["path"]: base64.b64decode(e["value"]["content"]) for e in lines if e["key"] == "file"}
                    header = next(e["value"] for e in lines if e["key"] == "header")
                    hub.commits.append({"path": self.path, "message": header["summary"], "files": files})
                    oid = "a" * 40
                    return self.answer(200, {"commitUrl": f"{hub.endpoint}/owner/name/commit/{oid}", "commitOid": oid})
                return self.answer(200, {})  # creating a branch, validating the card's YAML

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.created: dict = {}

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def paths(self) -> list[str]:
        return [f"{method} {path}" for method, path, _ in self.requests]


def test_a_push_commits_final_with_its_card(run):
    (run / "final" / ".README.md.123.abcd1234").write_text("left behind by a kill")  # hidden: never uploaded
    with Hub() as hub:
        proc, _ = command("push", str(run), "owner/name", "--revision", "v1", HF_TOKEN="hf_test", HF_ENDPOINT=hub.endpoint)
    assert proc.returncode == 0, proc.stderr
    final = run / "final"
    sent = dict(push.listing(final))
    (commit,) = hub.commits
    assert commit["path"] == "/api/models/owner/name/commit/v1" and commit["message"] == "Upload run, trained with grpo_ext"
    assert sorted(commit["files"]) == sorted(sent) and "README.md" in sent and "curves.png" in sent
    assert all(commit["files"][name] == (final / name).read_bytes() for name in sent)
    public = [{"visibility": "public"}, {"private": False}]  # huggingface_hub 1.0 on, and before
    assert hub.created in [{"name": "name", "organization": "owner", **said} for said in public]
    assert "POST /api/models/owner/name/branch/v1" in hub.paths()
    assert proc.stdout == f"pushed {len(sent)} files to owner/name: {hub.endpoint}/owner/name/commit/{'a' * 40}\n"
    total = push.size_text(sum(sent.values()))
    assert proc.stderr.splitlines() == [f"grpo_ext: push: uploading {len(sent)} files ({total}) to owner/name as owner"]


def test_a_users_card_is_uploaded_as_it_is(run):
    own = "# My model\n\nWritten by hand.\n"
    (run / "final" / "README.md").write_text(own)
    with Hub() as hub:
        proc, _ = command("push", str(run), "owner/name", HF_TOKEN="hf_test", HF_ENDPOINT=hub.endpoint)
    assert proc.returncode == 0, proc.stderr
    assert hub.commits[0]["files"]["README.md"].decode() == own and (run / "final" / "README.md").read_text() == own


HUB_REFUSALS = [
    # (the Hub, the token, the flags, what the one line says)
    ({}, "hf_wrong", [], "the Hub refused the token (401 while checking the token)"),  # a token the Hub does not know
    ({"private_repo": False}, "hf_test", ["--private"], "owner/name exists and is public"),  # --private on a public repo
]


@pytest.mark.parametrize("hub_args, token, flags, said", HUB_REFUSALS)
def test_what_the_hub_refuses_is_one_line_and_no_commit(run, hub_args, token, flags, said):
    with Hub(**hub_args) as hub:
        proc, _ = command("push", str(run), "owner/name", *flags, HF_TOKEN=token, HF_ENDPOINT=hub.endpoint)
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1 and said in proc.stderr, proc.stderr
    assert hub.commits == []
