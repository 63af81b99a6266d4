import gc
import os
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import PLUGIN, ROOT  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    # A pytest-xdist worker shares the cores with the others: one thread each for torch (OpenMP, MKL), here and in
    # the processes the tests start. Set before torch is first imported.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")

from grpo_ext.core import console  # noqa: E402

# In-process tests read grpo_ext's lines as the command line writes them (grpo_ext: ...), whichever test ran first:
# cli.main installs the same handler, and a test that calls a function directly would otherwise see the lines only
# after some other test ran a command in its worker.
console.show()

TIERS = ("unit", "integration", "slow")  # the folders under tests/, each its own marker


# Files whose tests each take 10 s or more (several processes, a server that stalls, the Hub unreachable): run first,
# so that each worker ends on short files rather than one waiting for the other's last long one
LONG = ("_processes.py", "test_sharding_cpu.py", "test_hub_unreachable.py", "test_judge", "test_notebook.py")


def pytest_collection_modifyitems(config, items):
    """Every test under tests/unit, tests/integration or tests/slow carries the marker of its folder; the files of
    LONG go first (a stable sort: the order within a file, and of the other files, is kept)."""
    here = Path(__file__).resolve().parent
    for item in items:
        try:
            tier = item.path.resolve().relative_to(here).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(tier)
    items.sort(key=lambda item: not any(part in item.path.name for part in LONG))


# sys.modules' size when this worker last froze what it holds
_frozen_at = [0]


def pytest_runtest_setup(item):
    """Once a test has loaded new libraries (torch, transformers, TRL: ~1M objects that live until the worker exits),
    collect what is garbage and freeze the rest out of the collector's scans: a run's own gc.collect() (run/heap.py,
    accelerate's free_memory: three a tiny run) then scans what the tests made since, not the libraries: 0.28 s each
    in a worker otherwise, a third of a tiny run's time. Frozen objects are only those alive after a full collection,
    so nothing a test left behind is kept, and what a test makes is collected as in a run."""
    if len(sys.modules) > _frozen_at[0] + 50:
        gc.collect()
        gc.freeze()
        _frozen_at[0] = len(sys.modules)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny random Llama model with a chat template, built locally (no download)."""
    from grpo_ext.testing import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def digit_doc() -> dict:
    """The shipped digit recipe as a mapping."""
    return yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())


@pytest.fixture
def write_recipe(tmp_path):
    """Write a recipe mapping (or raw text) to a file and return its path."""

    def write(doc, name="recipe.yaml") -> Path:
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True))
        return path

    return write


@pytest.fixture(params=["libyaml", "python"])
def yaml_loader(request, monkeypatch) -> str:
    """Each parser that grpo_ext's bounded YAML loader reads with, in turn: libyaml's (skipped where PyYAML was built
    without it) and PyYAML's pure-Python one, the one a user without libyaml gets."""
    from grpo_ext.core import yaml_io

    if request.param not in yaml_io.LOADERS:
        pytest.skip("PyYAML here has no libyaml")
    monkeypatch.setattr(yaml_io, "LOADER", yaml_io.LOADERS[request.param])
    return request.param


@pytest.fixture
def no_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Make a package 'installed': a module plus a *.dist-info folder with entry_points.txt on sys.path."""
    from grpo_ext.rewards import registry

    def install(package: str, entries: dict[str, str], module: str = PLUGIN):
        root = tmp_path / f"site-{package}"
        root.mkdir()
        (root / f"{package}.py").write_text(module)
        info = root / f"{package}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
        lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
        (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{lines}")
        monkeypatch.syspath_prepend(str(root))

    return install


@pytest.fixture
def scripted_model():
    """``scripted_model(policy)``: for the rest of the test, every trainer's model replies by ``policy``, a function
    from the prompt so far (text, the tool results in it) to the reply (text, its end token included); TRL's tool
    loop, the chat template, the parser, the tools and the rewards stay real (``run/trl_internals.scripted_replies``)."""
    import contextlib

    from grpo_ext.run import trl_internals

    with contextlib.ExitStack() as stack:
        yield lambda policy: stack.enter_context(trl_internals.scripted_replies(policy))
