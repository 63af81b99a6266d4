"""grpo_ext's tables against the installed TRL's own classes: the field table against GRPOConfig, a key this TRL
lacks, and a GRPOTrainer without a method the hooks are called from. Each imports TRL (the first import loads
transformers' trainer, torch and peft: about 9 s on 2 cores), so they live here rather than beside the tables in
tests/unit (test_compat.py, test_trl_internals.py); scripts/compat_matrix.py runs them on each TRL of its matrix.
"""

import dataclasses

import pytest

from grpo_ext.core.errors import RunError
from grpo_ext.run import heap, trainer, trl_internals
from grpo_ext.run.trl_internals import Behaviour
from grpo_ext.settings import compat


def test_field_table_matches_installed_trl():
    """The installed TRL's table (written by scripts/trl_fields.py) matches its GRPOConfig exactly."""
    from trl import GRPOConfig

    table = compat.table_for()
    if table["trl"] != str(compat.trl_version()):
        pytest.skip(f"no table for trl {compat.trl_version()}; the nearest is {table['trl']}")
    assert {f.name for f in dataclasses.fields(GRPOConfig)} == set(table["fields"])


def test_make_config_refuses_a_key_this_trl_lacks():
    with pytest.raises(RunError, match="has no such GRPOConfig key; remove it"):
        trainer.make_config({"output_dir": "/tmp/grpo_ext_x", "no_such_key_anywhere": 1})


@pytest.mark.parametrize("name", trl_internals.HOOKED)
def test_a_trl_without_a_hooked_method_refuses_the_behaviours(name, monkeypatch):
    """A TRL that renamed a method the hooks are called from would leave the behaviours uncalled: refused instead."""
    from trl import GRPOTrainer

    monkeypatch.delattr(GRPOTrainer, name)

    class Quiet(Behaviour):
        pass

    with pytest.raises(RunError, match=rf"GRPOTrainer has no {name}, where grpo_ext calls Quiet; install a tested TRL: pip"):
        trl_internals.make({}, [Quiet()])
    # an optional behaviour (one that changes no result) is left out instead: the trainer is built, here from nothing
    with pytest.raises(TypeError, match="model"):
        trl_internals.make({}, [heap.ReleaseFreed()])
