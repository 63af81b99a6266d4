"""``python -m grpo_ext.train RECIPE [key=value ...] [--dry-run] [--quick] [--overwrite] [--resume] [--verbose]``.

The same command as ``grpo-ext train``, for ``python -m`` and ``accelerate launch -m grpo_ext.train``; the work is
done in ``grpo_ext.verbs.train``. This module is run, never imported: ``grpo_ext.train`` is the API function, and a
module imported as ``grpo_ext.train`` would take that name from it, so importing it is refused with the call to use.
"""

import sys

from grpo_ext.cli import main

if __name__ not in ("__main__", "__mp_main__"):  # __mp_main__: a process that multiprocessing spawns from a -m run
    raise ImportError(
        "grpo_ext.train is the command line (python -m grpo_ext.train RECIPE); from Python, import grpo_ext and call "
        "grpo_ext.train(RECIPE), the function"
    )

if __name__ == "__main__":
    raise SystemExit(main(["train", *sys.argv[1:]]))
