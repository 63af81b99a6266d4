"""Safety: YAML is read safely, no user code runs unless the recipe names it, no remote model code by default,
and importing or validating touches no network."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ext import cli, models, recipe

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "payload",
    [
        "!!python/object/apply:os.system ['touch {marker}']",  # arbitrary call on load
        "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
        "!!python/name:os.system",
    ],
)
def test_yaml_tags_never_construct_objects(payload, tmp_path, capsys):
    marker = tmp_path / "pwned"
    path = tmp_path / "r.yaml"
    path.write_text(f"model: {payload.format(marker=marker)}\n")
    assert cli.main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not marker.exists()


def test_user_code_runs_only_when_named(digit_doc, tmp_path):
    """Python files beside a recipe are not imported unless a reward names them; a named one is."""
    marker = tmp_path / "imported"
    for name in ("rewards.py", "my_rewards.py", "sitecustomize.py", "conftest.py"):
        (tmp_path / name).write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n"
            "def score(completions, **kwargs):\n    return [0.0] * len(completions)\n"
        )
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(digit_doc))
    recipe.load(str(path))
    cli.main(["train", str(path), "--dry-run"])
    assert not marker.exists()
    digit_doc["rewards"] = ["./my_rewards.py:score"]
    path.write_text(yaml.safe_dump(digit_doc))
    recipe.load(str(path))
    assert marker.read_text() == "my_rewards.py\n"


@pytest.mark.parametrize(
    "setting,expected",
    [
        (None, False),  # off unless the recipe turns it on
        (False, False),
        (True, True),
    ],
)
def test_trust_remote_code_follows_the_recipe(setting, expected, digit_doc, tmp_path, monkeypatch):
    import transformers

    seen = []

    def record(*args, **kwargs):
        seen.append(kwargs.get("trust_remote_code"))
        raise OSError("stop here")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", record)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", record)
    digit_doc["model"]["name"] = str(tmp_path)  # a local directory: nothing fetched
    if setting is not None:
        digit_doc["model"]["trust_remote_code"] = setting
    r = recipe.validate(digit_doc)
    with pytest.raises(models.RunError):
        models.load(r["model"], r.base_dir, log=lambda _: None)
    assert seen == [expected]


NO_NETWORK = """
import sys
def deny(event, args):
    if event.startswith("socket.") and event not in ("socket.__new__", "socket.bind"):
        raise RuntimeError(f"network touched: {event} {args!r:.80}")
sys.addaudithook(deny)
import grpo_ext, grpo_ext.cli, grpo_ext.rewards, grpo_ext.recipe, grpo_ext.compat, grpo_ext.rundir
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
