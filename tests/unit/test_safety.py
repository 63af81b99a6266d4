"""Safety: YAML is read safely, no user code runs unless the recipe names it, no remote model code by default,
and importing or validating touches no network (tests/integration/test_safety_processes.py)."""

from pathlib import Path

import pytest
import yaml

from grpo_ext import cli, recipe
from grpo_ext.core.errors import RecipeError
from grpo_ext.run import models
from tests.helpers import FACTORY_FILE


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
        models.load(r.model, r.base_dir, log=lambda _: None)
    assert seen == [expected]


def test_dry_run_shows_a_deferred_factory_as_a_call(digit_doc, tmp_path, capsys):
    (tmp_path / "my_rewards.py").write_text(FACTORY_FILE)
    digit_doc["rewards"] = ["digit_exact", {"name": "./my_rewards.py:make", "args": {"n": 2, "marker": "m"}}]
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(digit_doc, sort_keys=False))  # the args in the order the recipe gives them
    assert cli.main(["train", str(path), "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("rewards: "))
    assert line == "rewards: digit_exact (weight 1.0), ./my_rewards.py:make(n=2, marker='m') (weight 1.0)"


@pytest.mark.parametrize(
    "reward,column",
    [
        ({"name": "./my_rewards.py:make", "args": {"n": 2, "marker": "m"}, "extra": 1}, "rewards[0].extra"),  # a typo
        ({"name": "./my_rewards.py:make", "args": {"n": 2}}, "rewards[0].args"),  # a missing argument: by signature
    ],
)
def test_factory_arguments_checked_by_signature(reward, column, digit_doc, tmp_path):
    (tmp_path / "my_rewards.py").write_text(FACTORY_FILE)
    digit_doc["rewards"] = [reward]
    with pytest.raises(RecipeError) as info:
        recipe.validate(digit_doc, tmp_path / "r.yaml")
    assert [line.split(":")[0] for line in info.value.problems] == [column]


COLUMN_FACTORY = """
def make(column):
    def graded(completions, gold, **kwargs):
        return [0.0] * len(completions)
    return graded
"""


def test_deferred_factory_column_check_when_built(digit_doc, tmp_path):
    """A user's factory's reward needs a column: the check validation gives a registry reward happens when it is
    built, with the same line."""
    (tmp_path / "my_rewards.py").write_text(COLUMN_FACTORY)
    digit_doc["rewards"] = [{"name": "./my_rewards.py:make", "args": {"column": "gold"}}]
    digit_doc["eval"]["enabled"] = False  # the training rows alone
    checked = recipe.validate(digit_doc, tmp_path / "r.yaml")
    with pytest.raises(RecipeError) as info:
        checked.build_rewards()
    (problem,) = info.value.problems
    assert problem.startswith("rewards[0] (graded) needs column 'gold', which the training rows (data.prompts) lack")


@pytest.mark.parametrize(
    "name",
    [
        "os:system",  # runs a shell command with its args
        "subprocess:run",
        "shutil:rmtree",
        "builtins:exec",
        "runpy:run_path",
        "posix:system",  # os's own implementation module
        "importlib:import_module",
        "os.path:join",  # inside a refused module
        "./aliases.py:system",  # a file's alias of os.system: refused by the function's own module
    ],
)
def test_system_modules_refused_by_name(name, digit_doc, tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "aliases.py").write_text("from os import system\n")
    digit_doc["rewards"] = [{"name": name, "args": {"command": f"touch {marker}"}}]
    with pytest.raises(RecipeError) as info:
        recipe.validate(digit_doc, tmp_path / "r.yaml")
    (problem,) = info.value.problems
    assert problem.startswith(f"rewards[0].name: {name!r} comes from ") and "standard-library module" in problem
    assert "\n" not in problem and not marker.exists()


def _run_dir(tmp_path: Path, recorded: object) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    if recorded is not None:
        (run / "recipe.yaml").write_text(yaml.safe_dump({"model": {"name": "base", "dtype": "float32", **recorded}}))
    return run


@pytest.mark.parametrize(
    "caller,recorded,expected",
    [
        (False, {"trust_remote_code": True}, False),  # the run's recipe cannot turn remote code on
        (None, {"trust_remote_code": True}, False),  # nor where the caller's recipe leaves the key out (false)
        (True, {"trust_remote_code": True}, True),  # both trust it
        (True, {"trust_remote_code": False}, False),  # the run trained without it
        (True, None, True),  # no recorded recipe: the caller's word
        (False, {"trust_remote_code": "yes"}, False),  # a hand-edited value is not True
    ],
)
def test_run_directory_never_raises_trust_remote_code(caller, recorded, expected, tmp_path):
    trusts = recipe.SCHEMA["model"]["trust_remote_code"].default if caller is None else caller
    model = recipe.Model("caller", "auto", trusts, None, None, None, None)
    settings = models.run_settings(model, _run_dir(tmp_path, recorded))
    assert settings.trust_remote_code is expected
    assert settings.dtype == ("float32" if recorded is not None else "auto")  # the run's other settings apply
