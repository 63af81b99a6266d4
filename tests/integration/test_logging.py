"""grpo_ext speaks through the ``grpo_ext`` logger tree: the command line writes its records as ``grpo_ext: ...``
lines on stderr, and a program that calls the Python API chooses where they go (nothing is written until it does)."""

import subprocess
import sys

import pytest
import yaml

from tests.helpers import ROOT, tiny_doc

SAY = "from grpo_ext.core import console; console.say('loading the model'); "
WARN = "console.logger('grpo_ext.rewards.judge').warning('warning: llm_judge: 1 of 4 requests failed'); "

# (what the program does, what it writes on stderr)
CASES = [
    # the Python API alone: a library writes nothing its caller did not ask for
    ("import grpo_ext; " + SAY + WARN.replace("warning(", "info("), ""),
    # the caller's own handler gets every record, under the module's name
    (
        "import logging; logging.basicConfig(level=logging.INFO, format='%(name)s|%(message)s'); " + SAY + WARN,
        "grpo_ext|loading the model\ngrpo_ext.rewards.judge|warning: llm_judge: 1 of 4 requests failed\n",
    ),
    # the command line's handler: one grpo_ext: line each, not twice where a library put a handler on the root logger
    (
        "import logging; logging.basicConfig(level=logging.INFO); from grpo_ext.core import console; console.show(); "
        + SAY
        + WARN,
        "grpo_ext: loading the model\ngrpo_ext: warning: llm_judge: 1 of 4 requests failed\n",
    ),
    # show() before logging is imported: the handler is in place for the first record, a module's logger included
    (
        "from grpo_ext.core import console; console.show(); " + WARN + SAY,
        "grpo_ext: warning: llm_judge: 1 of 4 requests failed\ngrpo_ext: loading the model\n",
    ),
    # show() after a module took its logger, and twice: still one line a record
    (
        "from grpo_ext.core import console; log = console.logger('grpo_ext.run'); console.show(); console.show(); "
        "log.info('step 1/2')",
        "grpo_ext: step 1/2\n",
    ),
    # show(WARNING): the progress lines go, the warnings stay
    (
        "from grpo_ext.core import console; console.show(30); " + SAY + WARN,
        "grpo_ext: warning: llm_judge: 1 of 4 requests failed\n",
    ),
    # a quiet run: the libraries underneath say nothing below an error, huggingface_hub too (its import had set its
    # logger back to warnings, with a handler of its own: a retry's warning reached the terminal)
    (
        "from grpo_ext.core import console; console.quiet_third_parties(False); from huggingface_hub.utils import logging; "
        "logging.get_logger('huggingface_hub.file_download').warning('Retrying in 1s [Retry 1/5].')",
        "",
    ),
]


@pytest.mark.parametrize("code,stderr", CASES)
def test_who_writes_grpo_exts_lines(code, stderr):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (proc.stderr, proc.stdout) == (stderr, "")


def test_a_command_writes_its_lines_and_the_api_leaves_them_to_its_caller(tmp_path, digit_doc, tiny_model):
    """`train --quick` says what --quick changed before it finds that output_dir holds a user's files: the command
    line writes those lines as grpo_ext: lines; grpo_ext.train, called from a program, raises the same refusal and
    writes nothing."""
    out = tmp_path / "project-quick"  # --quick's run directory: output_dir's name with -quick
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(tiny_doc(digit_doc, tiny_model, tmp_path / "project")))
    cli = subprocess.run(
        [sys.executable, "-m", "grpo_ext.cli", "train", str(recipe), "--quick"], capture_output=True, text=True, cwd=ROOT
    )
    said = [line for line in cli.stderr.splitlines() if line.startswith("grpo_ext: quick: ")]
    assert cli.returncode == 2 and said, cli.stderr
    code = (
        "import sys, grpo_ext\ntry:\n    grpo_ext.train(sys.argv[1], quick=True)\n"
        "except grpo_ext.RecipeError as exc:\n    print(exc.lines()[-1])"
    )
    api = subprocess.run([sys.executable, "-c", code, str(recipe)], capture_output=True, text=True, cwd=ROOT)
    assert api.returncode == 0 and api.stderr == "", api.stderr
    assert api.stdout.strip() == cli.stderr.splitlines()[-1]
    assert (out / "notes.txt").read_text() == "mine\n"
