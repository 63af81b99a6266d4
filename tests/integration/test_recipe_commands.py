"""A bad recipe and a dry run as a user's whole command (a fresh interpreter): nothing heavy is imported, and timed
beside a bare ``import torch``, each answers in a small part of its time."""

import sys

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
