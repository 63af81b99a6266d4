"""The shape and value rules of tests/unit/test_batch_rules.py against the installed TRL: where TRL's own GRPOConfig
decides, it refuses exactly what the rules refuse (the last column of its CASES). Each case builds a GRPOConfig,
whose first import loads transformers' trainer, torch and peft (about 9 s on 2 cores)."""

import pytest

from grpo_ext.run import trainer
from grpo_ext.settings import compat
from tests.unit.test_batch_rules import BASE, CASES


@pytest.mark.parametrize(
    "settings,expected,trl_refuses",
    [c for c in CASES if c[2] or c[1] is None],
    ids=[str(c[0])[:50] for c in CASES if c[2] or c[1] is None],
)
def test_trl_agrees(settings, expected, trl_refuses, tmp_path):
    """Where TRL's own GRPOConfig decides, it refuses exactly what the rules refuse (one process, CPU)."""
    kwargs, _, _ = compat.translate({**BASE, **settings})
    kwargs.update(output_dir=str(tmp_path), use_cpu=True)
    if trl_refuses:
        with pytest.raises((ValueError, TypeError)):
            trainer.make_config(kwargs)
    else:
        trainer.make_config(kwargs)
