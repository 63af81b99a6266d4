"""``python -m grpo_ext.train RECIPE [key=value ...] [--dry-run] [--quick] [--overwrite] [--resume] [--verbose]``.

The same command as ``grpo-ext train``; the work is done in ``grpo_ext.verbs.train``.
"""

import sys
import types

from grpo_ext.cli import main
from grpo_ext.verbs.train import train


class _CallableModule(types.ModuleType):
    """Importing this module makes ``grpo_ext.train`` name it instead of the API function; calling it still trains."""

    def __call__(self, *args, **kwargs):
        return train(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    raise SystemExit(main(["train", *sys.argv[1:]]))
