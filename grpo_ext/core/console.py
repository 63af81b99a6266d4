"""What a person sees: grpo_ext's own lines on stderr, and third-party chatter turned down.

grpo_ext speaks through one logger tree, ``grpo_ext`` (each module that speaks for itself logs under its own name,
e.g. ``grpo_ext.rewards.judge``). The command line installs the handler that writes each record as a ``grpo_ext: ...``
line on stderr (``show``); a program that calls the Python API decides where the records go, as with any library:
none of them is written until it installs a handler (``logging.basicConfig(level=logging.INFO)``, or
``grpo_ext.core.console.show()`` for the command line's lines).
"""

import contextlib
import io
import os
import sys
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

NOISY = ("transformers", "trl", "accelerate", "datasets", "peft", "bitsandbytes", "kernels", "huggingface_hub", "torch")


INFO = 20  # logging.INFO, without importing logging: see show()
_wanted: int | None = None  # the level show() asked for, until the handler is installed
_installed = False


def logger(name: str = "grpo_ext") -> "logging.Logger":
    """The logger of ``name`` (a module's ``__name__``, under ``grpo_ext``), with the command line's handler in place
    if ``show`` asked for it."""
    import logging

    if _wanted is not None and not _installed:
        _install(_wanted)
    return logging.getLogger(name)


def say(message: str) -> None:
    """One line of what grpo_ext is doing: an INFO record of the ``grpo_ext`` logger."""
    logger().info(message)


def show(level: int = INFO) -> None:
    """Write the ``grpo_ext`` logger's records from ``level`` up as ``grpo_ext: ...`` lines on stderr: what the command
    line does. The handler is installed when the first record is asked for (``logger``): importing logging is a third
    of a bare interpreter start, and a recipe refused before anything is said never needs it."""
    global _wanted
    _wanted = level
    if "logging" in sys.modules:  # a module already holds a logger: install now, so that its records are written too
        _install(level)


def _install(level: int) -> None:
    """The handler, once; the records stop at it, so that a handler a library put on the root logger does not write
    each line twice."""
    import logging

    global _installed

    class Stderr(logging.Handler):
        """Each record as one ``grpo_ext: ...`` line on ``sys.stderr`` as it is when the line is written (a redirect or a
        capture set up after the handler was installed still gets it), flushed at once so that it interleaves with
        what the libraries underneath print."""

        def emit(self, record: logging.LogRecord) -> None:
            try:
                sys.stderr.write(f"grpo_ext: {self.format(record)}\n")
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - logging's rule: a line that cannot be written never stops the run
                self.handleError(record)

    root = logging.getLogger("grpo_ext")
    if not any(type(h).__name__ == "Stderr" and h.__module__ == __name__ for h in root.handlers):
        root.addHandler(Stderr())
    root.setLevel(level)
    root.propagate = False
    _installed = True


def quiet_third_parties(verbose: bool) -> None:
    """Silence the warnings, logs and progress bars of the libraries underneath, unless ``verbose``."""
    if verbose:
        return
    import logging

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.ERROR)
    with contextlib.suppress(ImportError):
        import datasets

        datasets.disable_progress_bars()
    with contextlib.suppress(ImportError):
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    with contextlib.suppress(ImportError):  # its import set its logger's level back to warnings, with a handler of its own
        import huggingface_hub

        huggingface_hub.utils.logging.set_verbosity_error()


def bars_hushed() -> contextlib.AbstractContextManager[object]:
    """A context in which bars that a library draws with tqdm directly, past its own switch (transformers' GGUF
    conversion), say nothing, when quiet_third_parties has turned the bars down; errors still raise."""
    import transformers

    if transformers.utils.logging.is_progress_bar_enabled():
        return contextlib.nullcontext()
    return contextlib.redirect_stderr(io.StringIO())  # tqdm writes to sys.stderr as it is when the bar starts
