"""Generated bad recipes (tests/bad_recipes.py): every one exits 2 with `error:` lines naming the key path, creating
nothing. The bulk runs `grpo-ext train` and `grpo-ext validate` in-process (they must refuse alike); a sample runs
as a user's whole command, timed beside a bare torch import, in tests/integration/test_fuzz_recipes_command.py.
"""

import contextlib
import io
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from grpo_ext import cli
from tests.bad_recipes import BAD_RECIPES, check_refused, write


# no deadline: a bound in seconds would measure the machine; how fast a refusal is, is timed beside a torch
# import in tests/integration/test_fuzz_recipes_command.py and beside a good recipe in tests/unit/test_bounded_inputs.py
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(BAD_RECIPES)
def test_bad_recipes_exit_2_in_process(case):
    doc, fragment, overrides = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = write(folder, doc)
        cwd = os.getcwd()
        err = io.StringIO()
        try:
            os.chdir(folder)  # a relative path created by mistake would land here and be seen
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                rc = cli.main(["train", str(path), *overrides])
            checked = io.StringIO()
            with contextlib.redirect_stderr(checked), contextlib.redirect_stdout(io.StringIO()):
                validated = cli.main(["validate", str(path), *overrides])
        finally:
            os.chdir(cwd)
        check_refused(rc, err.getvalue(), fragment, folder)
        assert (validated, checked.getvalue()) == (rc, err.getvalue()), "grpo-ext validate and training disagree"
