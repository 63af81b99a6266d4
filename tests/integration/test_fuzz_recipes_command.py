"""Generated bad recipes (tests/bad_recipes.py) as a user's whole command, interpreter start included: each exits 2
with `error:` lines naming the key path, creating nothing, before anything heavy loads."""

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.bad_recipes import BAD_RECIPES, check_refused, write
from tests.helpers import ROOT, TIMED, run_command


@pytest.mark.parametrize("timed", TIMED)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(BAD_RECIPES)
def test_bad_recipes_exit_2_as_a_command_before_anything_heavy(timed, case):
    """The user's whole command (interpreter start included) refuses the recipe; timed, it answers in under a third
    of the time a bare ``import torch`` takes beside it."""
    doc, fragment, overrides = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(folder, doc)
        proc, ratio = run_command(
            [sys.executable, "-m", "grpo_ext.train", str(path), *overrides],
            timed,
            cwd=folder,
            env={**os.environ, "PYTHONPATH": str(ROOT), "GRPO_EXT_CACHE": str(folder / "cache")},
        )
        check_refused(proc.returncode, proc.stderr, fragment, folder)
        if timed:
            assert ratio < 1 / 3, f"{ratio:.2f} of a torch import"
