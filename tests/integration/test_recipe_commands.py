"""A bad recipe and a dry run as a user's whole command (a fresh interpreter): nothing heavy is imported, and timed
beside a bare ``import torch``, each answers in a small part of its time."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, TIMED, mutate, run_command


@pytest.mark.parametrize("timed", TIMED)
def test_bad_recipe_is_fast_and_imports_no_torch(timed, digit_doc, write_recipe, tmp_path):
    """The error for a bad recipe comes before torch/trl are imported: the whole command, interpreter start
    included, takes under a third of the time a bare ``import torch`` takes beside it."""
    file = write_recipe(mutate(digit_doc, "training.learnin_rate", 1))
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(['train', sys.argv[1]]); "
        "assert 'torch' not in sys.modules and 'trl' not in sys.modules, 'heavy import'; sys.exit(rc)"
    )
    proc, ratio = run_command([sys.executable, "-c", code, str(file)], timed, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "learnin_rate" in proc.stderr
    if timed:
        assert ratio < 1 / 3, f"{ratio:.2f} of a torch import"


@pytest.mark.parametrize("timed", TIMED)
def test_dry_run_fast_no_weights(timed, tmp_path):
    code = (
        "import sys; from grpo_ext import cli; rc = cli.main(['train', 'digit', '--dry-run']); "
        "assert 'torch' not in sys.modules, 'dry run imported torch'; sys.exit(rc)"
    )
    proc, ratio = run_command(
        [sys.executable, "-c", code], timed, cwd=ROOT, env={"GRPO_EXT_CACHE": str(tmp_path), "PATH": "/usr/bin:/bin"}
    )
    assert proc.returncode == 0, proc.stderr
    if timed:
        assert ratio < 1 / 2, f"{ratio:.2f} of a torch import"
    out = proc.stdout
    assert "effective GRPOConfig" in out and "learning_rate" in out and "first run fetches and converts it" in out
    assert not any(tmp_path.iterdir())  # nothing fetched or converted


# What a refused recipe may load. Not the heavy libraries a run needs, nor the standard library's slow starters that
# only a run, a judge, a program or an entry point needs (asyncio: the judge; importlib.metadata: entry points;
# multiprocessing, socket, subprocess: math-verify's workers and the sandbox; fractions and decimal: a mixture's
# weights); each of these, imported at the top of a module that validation reads, cost every command's start
# (validate took 5.1 times a bare `python -c "import yaml"`).
NOT_LOADED = ("torch", "transformers", "trl", "datasets", "math_verify", "sympy", "peft", "openai")
NOT_LOADED += ("asyncio", "importlib.metadata", "multiprocessing", "socket", "subprocess", "secrets", "concurrent.futures")
NOT_LOADED += ("fractions", "decimal")
# logging: the command line's handler is installed when the first line is said (a third of a bare interpreter start)
NOT_LOADED += ("logging",)
# shutil: argparse's help formatter imports it (with bz2, lzma and zlib) for the terminal's width, 6 ms of a refusal;
# the typed recipe's classes, built only for a recipe that passed (their generated methods: 8 ms)
NOT_LOADED += ("shutil", "grpo_ext.recipe.checked")


@pytest.mark.parametrize("command", [["validate"], ["train", "--dry-run"]])
def test_a_bad_row_of_the_users_data_file_is_refused_by_validate_and_the_dry_run_alike(command, tmp_path):
    """A user's JSONL file whose second row's prompt is a number: ``validate`` and ``train --dry-run`` each print the
    same one line naming the file and the line, and exit 2 (the dry run said the recipe was valid)."""
    (tmp_path / "data.jsonl").write_text('{"prompt": "What is 2+2?", "answer": "4"}\n{"prompt": 5, "answer": "3"}\n')
    recipe = tmp_path / "my.yaml"
    recipe.write_text(
        "model: {name: smollm2-135m-instruct}\ndata: {file: data.jsonl}\nrewards: [math_accuracy]\n"
        "eval: {enabled: false}\noutput_dir: runs/mine\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "grpo_ext", command[0], str(recipe), *command[1:]], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (
        f"error: {recipe}: data.file: data.jsonl, line 2: prompt column 'prompt' holds int; "
        "a prompt is text or a list of chat messages ({role, content})\n"
    )
    assert "effective GRPOConfig" not in proc.stdout


# grpo_ext's modules loaded by a refused `validate` of the digit recipe: 42 (the front door, the validate verb, the
# layers below that a recipe's rules read, and of the built-in rewards the two it names), 43 while the typed recipe's
# module loaded before the rules had passed, 49 when the tools layer and the sandbox under it loaded for every recipe,
# 58 when every built-in reward loaded with the registry, 94 when every verb and the run layer loaded with the
# package; the bound leaves room for a few new modules of those layers
OWN_MODULES = 46
# What a refused recipe without tools does not read: the tools' modules (their package's names load on first use)
# and the sandbox they run in
NOT_OWN = ("grpo_ext.tools.", "grpo_ext.sandbox")
# A refused digit recipe's modules of rewards/: the registry's own, and the module of the rewards it names
DIGIT_REWARDS = ["grpo_ext.rewards.api", "grpo_ext.rewards.digit", "grpo_ext.rewards.guard", "grpo_ext.rewards.registry"]


@pytest.mark.parametrize("verb", ["validate", "train"])
@pytest.mark.parametrize("timed", TIMED)
def test_a_refused_recipe_loads_no_verb_it_does_not_run(timed, verb, digit_doc, write_recipe, tmp_path):
    """`grpo-ext validate` or `grpo-ext train` of a bad recipe, as a command: it imports the module of its own verb
    that checks the recipe (train's run phases load only once the recipe passed), the layers the recipe's rules read
    and the rewards it names, no other command's module, nothing heavy, none of what only a starting run needs; timed
    beside a bare `python -c "import yaml"`, both from compiled bytecode, it takes under 3.2 times as long (the best of
    five each: 2.89 to 2.92 beside a training run on 2 cores; 3.25 to 3.31 there when the typed recipe's classes and
    argparse's `shutil` loaded for a refusal, 3.2 to 3.3 when the tools layer loaded for every recipe, 3.5 to 3.7 when
    every built-in reward loaded, 5.1 to 6.0 when every command loaded every layer; a refused `train` 3.4 to 3.7 when it
    loaded the run's layers before it read the recipe)."""
    file = write_recipe(mutate(digit_doc, "training.learnin_rate", 1))
    listed = tmp_path / "modules.json"
    code = (
        f"import json, sys; from grpo_ext import cli; rc = cli.main([{verb!r}, sys.argv[1]]); "
        "open(sys.argv[2], 'w').write(json.dumps(sorted(sys.modules))); sys.exit(rc)"
    )
    argv = [sys.executable, "-c", code, str(file), str(listed)]
    if timed:
        # bytecode written and read, as an installed package's is: without it each run compiles every module it loads
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        seconds, reference = [], []
        for _ in range(6):  # in turn, the best of each: a moment when a neighbour held the CPU is left out
            t0 = time.monotonic()
            proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env)
            t1 = time.monotonic()
            subprocess.run([sys.executable, "-c", "import yaml"], check=True, cwd=ROOT, env=env)
            seconds.append(t1 - t0)
            reference.append(time.monotonic() - t1)
        seconds, reference = seconds[1:], reference[1:]  # the first pair writes the bytecode
        assert min(seconds) / min(reference) < 3.2, f"{min(seconds) / min(reference):.2f} times a bare import yaml"
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "training.learnin_rate: unknown GRPOConfig key" in proc.stderr, proc.stderr
    loaded = json.loads(listed.read_text())
    own = [m for m in loaded if m.split(".")[0] == "grpo_ext"]
    checker = {"validate": "grpo_ext.verbs.validate", "train": "grpo_ext.verbs.train_command"}[verb]
    assert [m for m in own if m.startswith("grpo_ext.verbs.")] == [checker]
    assert [m for m in own if m.startswith("grpo_ext.rewards.")] == DIGIT_REWARDS
    assert not [m for m in NOT_LOADED if m in loaded]
    assert not [m for m in ("hashlib", "zipfile", "tempfile", "platform", "statistics") if m in loaded]  # a run's
    assert not [m for m in own if m.startswith(NOT_OWN)]
    assert not [m for m in own if m.startswith("grpo_ext.run")]  # the data files' check is the recipe layer's
    assert len(own) <= OWN_MODULES, f"{len(own)} of grpo_ext's modules: {own}"
