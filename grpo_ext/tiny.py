"""``python -m grpo_ext.tiny OUT_DIR``: the command that builds the tiny local model; the work is in
``grpo_ext.testing.tiny``."""

import sys

from grpo_ext.testing.tiny import main

if __name__ == "__main__":
    sys.exit(main())
