"""The catalog verbs as a new user meets them: ls, cp, validate, and the shipped recipes' headers (run in-process;
the README's flow onto a tiny model and the front doors as commands: tests/integration/test_cli_runs.py)."""

import argparse
import importlib
import re
import sys

import pytest
import yaml

import grpo_ext
from grpo_ext import cli
from grpo_ext.core import catalog
from grpo_ext.verbs import sweep
from grpo_ext.verbs import train as train_verb


def test_ls_lists_recipes_rewards_and_models(capsys):
    assert cli.main(["ls"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  digit +Digit task: ", out, re.MULTILINE)
    assert "model smollm2-135m-instruct; rewards digit_exact, digit_shaped; output runs/digit" in out
    assert re.search(r"^  digit_shaped +Partial credit", out, re.MULTILINE)
    assert re.search(r"^  smollm2-135m-instruct +SmolLM2", out, re.MULTILINE)


def run_cli(argv: list[str]) -> int:
    """cli.main's exit status, whether it returns it or argparse exits with it."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["cp", "digt", "x.yaml"], 2, "error: no shipped recipe named 'digt'; did you mean 'digit'?"),  # typo in the name
        ([], 2, "usage: grpo-ext"),  # no verb: the help, not a bare error
        (["ls", "extra"], 2, "unrecognized arguments: extra"),  # a verb that takes no overrides
        (["eval", "digit", "--model", "m", "--modle", "x"], 2, "unrecognized arguments: --modle x"),  # a misspelt option
        (["validate", "missing.yaml"], 2, "error: recipe file 'missing.yaml' does not exist"),
    ],
)
def test_cli_errors(argv, code, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_cli(argv) == code
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_cp_into_a_new_folder_and_force(tmp_path, capsys):
    dest = tmp_path / "new" / "sub" / "my.yaml"
    assert cli.main(["cp", "digit", str(dest)]) == 0
    dest.write_text("edited")
    assert cli.main(["cp", "digit", str(dest), "--force"]) == 0
    assert dest.read_text().startswith("# Digit task")
    assert cli.main(["cp", "digit", str(tmp_path)]) == 0  # a folder: keeps the shipped file name
    assert (tmp_path / "digit.yaml").exists()


def test_validate_reports_each_file(write_recipe, digit_doc, capsys):
    good = write_recipe(digit_doc, "good.yaml")
    digit_doc["training"]["learnin_rate"] = 1e-5
    bad = write_recipe(digit_doc, "bad.yaml")
    assert cli.main(["validate", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert f"{good}: ok" in out
    assert "training.learnin_rate: unknown GRPOConfig key; did you mean 'learning_rate'?" in err


@pytest.mark.parametrize("name", list(catalog.shipped_recipes()))
def test_shipped_recipe_header(name):
    """Every shipped recipe opens with a comment: what it does, hardware, time, and the launch command."""
    path = catalog.shipped_recipes()[name]
    header = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    text = "\n".join(header)
    assert len(header) >= 4 and catalog.recipe_summary(path)
    for label in ("Hardware:", "Time:", "Launch:"):
        assert f"# {label}" in text, f"{name}: header lacks {label}"
    assert re.search(rf"Launch: .*grpo_ext\.train .*{re.escape(path.name)}", text)
    assert yaml.safe_load(path.read_text())["output_dir"]


@pytest.mark.parametrize(
    "argv",
    [
        ["digit", "seed=1", "--overwrite", "training.max_steps=2"],
        ["digit", "--overwrite", "seed=1", "training.max_steps=2"],
        ["--overwrite", "digit", "seed=1", "training.max_steps=2"],
    ],
)
def test_train_overrides_before_and_after_flags(argv):
    opts = cli.parse_args(["train", *argv])
    assert (opts.recipe, opts.overrides, opts.overwrite) == ("digit", ["seed=1", "training.max_steps=2"], True)


def test_train_dry_run_with_override_after_flag(capsys):
    assert cli.main(["train", "digit", "--dry-run", "training.max_steps=3"]) == 0
    assert re.search(r"^  max_steps +3 +recipe", capsys.readouterr().out, re.MULTILINE)


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_command_parses_alone_as_in_the_whole_parser(name):
    """A command line is parsed by a parser that holds only its command's module (cli.COMMANDS): that command's help,
    and so its parsing, is the one `grpo-ext --help` lists."""

    def help_of(p, command: str) -> str:
        (sub,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        return sub.choices[command].format_help()

    alone = cli.parser([name])
    assert help_of(alone, name) == help_of(cli.parser(), name)
    assert {c for c in cli.COMMANDS if cli.COMMANDS[c] == cli.COMMANDS[name]} == set(
        next(a for a in alone._actions if isinstance(a, argparse._SubParsersAction)).choices
    )  # the commands of that one module, no other


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ls", "extra"], "usage: grpo-ext [-h]\n                {train,validate,ls,cp,"),  # the usage names every command
        (["bogus"], "invalid choice: 'bogus' (choose from 'train', 'validate', 'ls', 'cp', 'rewards', 'tools', 'schema',"),
    ],
)
def test_a_bad_command_line_is_answered_with_every_command(argv, message, capsys):
    assert run_cli(argv) == 2
    assert message in capsys.readouterr().err


def test_the_api_is_the_package_s_names():
    """``grpo_ext.NAME`` for each name of ``__all__`` is the function or class it documents, imported on first use;
    ``grpo_ext.train`` is the train function, and the ``python -m grpo_ext.train`` shim refuses to be imported in its
    place (its one line names the call to use)."""
    for name in grpo_ext.__all__:
        assert getattr(grpo_ext, name) is not None and name in dir(grpo_ext)
    assert grpo_ext.train is train_verb.train and grpo_ext.evaluate_checkpoints is sweep.sweep
    with pytest.raises(ImportError, match=r"^grpo_ext.train is the command line \(python -m grpo_ext.train RECIPE\); from"):
        importlib.import_module("grpo_ext.train")
    assert grpo_ext.train is train_verb.train and "grpo_ext.train" not in sys.modules
    with pytest.raises(AttributeError, match="has no attribute 'trian'"):
        _ = grpo_ext.trian
