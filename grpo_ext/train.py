"""``python -m grpo_ext.train RECIPE [key=value ...] [--dry-run] [--overwrite] [--resume] [--verbose]``.

The same command as ``grpo-ext train``; the work is done in ``grpo_ext.verbs.train``.
"""

import sys

from grpo_ext.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["train", *sys.argv[1:]]))
