"""Safety with a process or a model: importing and validating touch no network (an audit hook in a fresh
interpreter), and a user's reward factory runs only when a run of the tiny model needs it."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli, recipe
from tests.helpers import FACTORY_FILE, ROOT, tiny_doc

NO_NETWORK = """
import sys
def deny(event, args):
    if event.startswith("socket.") and event not in ("socket.__new__", "socket.bind"):
        raise RuntimeError(f"network touched: {event} {args!r:.80}")
sys.addaudithook(deny)
import grpo_ext, grpo_ext.cli, grpo_ext.rewards, grpo_ext.recipe, grpo_ext.settings.compat, grpo_ext.run.rundir
from grpo_ext import cli
assert cli.main(["train", "digit", "--dry-run"]) == 0
assert cli.main(["train", "no-such-recipe"]) == 2
"""


def test_import_and_validation_touch_no_network(tmp_path):
    """An audit hook refuses every socket connection and name lookup; import, validation and dry run still work."""
    proc = subprocess.run(
        [sys.executable, "-c", NO_NETWORK],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GRPO_EXT_CACHE": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "network touched" not in proc.stderr


def _merge_reads(path: Path) -> None:
    """``merge RUN_DIR`` validates the run's own recipe.yaml before any model loads."""
    from grpo_ext.verbs import merge

    run = path.parent / "run"
    (run / "final").mkdir(parents=True)
    (run / "final" / "adapter_config.json").write_text('{"base_model_name_or_path": "x"}')
    (run / "recipe.yaml").write_text(recipe.load(str(path)).to_yaml())  # as a run records it: paths absolute
    merge.read_run(run)


@pytest.mark.parametrize(
    "command,runs",
    [
        (lambda path: cli.main(["validate", str(path)]), False),  # checks the factory's signature, calls nothing
        (lambda path: cli.main(["train", str(path), "--dry-run"]), False),
        (lambda path: cli.main(["plan", str(path)]), False),
        (_merge_reads, False),
        (lambda path: cli.main(["train", str(path)]), True),  # a run needs the reward: the factory runs
    ],
    ids=["validate", "dry-run", "plan", "merge", "train"],
)
def test_user_factory_runs_only_when_a_run_needs_it(command, runs, digit_doc, tiny_model, tmp_path, no_hub):
    marker = tmp_path / "factory-ran"
    (tmp_path / "my_rewards.py").write_text(FACTORY_FILE)
    reward = {"name": "./my_rewards.py:make", "args": {"n": 2, "marker": str(marker)}}
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "out", rewards=[reward], eval={"enabled": False})
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert command(path) in (0, None)
    assert marker.exists() is runs
