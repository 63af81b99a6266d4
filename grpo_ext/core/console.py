"""What a person sees: grpo_ext's own lines on stderr, and third-party chatter turned down."""

import contextlib
import io
import logging
import os
import sys
import warnings

NOISY = ("transformers", "trl", "accelerate", "datasets", "peft", "bitsandbytes", "kernels", "huggingface_hub", "torch")


def say(message: str) -> None:
    """One ``grpo_ext: ...`` line on stderr."""
    print(f"grpo_ext: {message}", file=sys.stderr, flush=True)


def quiet_third_parties(verbose: bool) -> None:
    """Silence the warnings, logs and progress bars of the libraries underneath, unless ``verbose``."""
    if verbose:
        return
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


def bars_hushed() -> contextlib.AbstractContextManager[object]:
    """A context in which bars that a library draws with tqdm directly, past its own switch (transformers' GGUF
    conversion), say nothing, when quiet_third_parties has turned the bars down; errors still raise."""
    import transformers

    if transformers.utils.logging.is_progress_bar_enabled():
        return contextlib.nullcontext()
    return contextlib.redirect_stderr(io.StringIO())  # tqdm writes to sys.stderr as it is when the bar starts
