"""Wrap a reward so that TRL logs it under a unique name and its faults name the reward."""

import math
import numbers

from grpo_ext import compat
from grpo_ext.errors import RunError


class Guarded:
    """A picklable reward wrapper: checks the scores a reward returns and names it in every error.

    A reward without ``**kwargs`` gets only the keywords it names, whatever this TRL version passes.
    """

    def __init__(self, fn, name: str):
        self.fn = fn
        self.__name__ = name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.accepts = compat.reward_params(fn)

    def __call__(self, completions, **kwargs) -> list[float | None]:
        try:
            scores = self.fn(completions=completions, **compat.reward_kwargs(self.accepts, kwargs))
        except Exception as exc:
            start = repr(str(completions[0])[:40]) if completions else "''"
            raise RunError(f"reward {self.__name__!r} raised {type(exc).__name__}: {exc} (first completion {start})") from exc
        if not isinstance(scores, (list, tuple)) or len(scores) != len(completions):
            got = f"{len(scores)} scores" if isinstance(scores, (list, tuple)) else type(scores).__name__
            raise RunError(f"reward {self.__name__!r} returned {got} for {len(completions)} completions; return one score per completion")
        out = []
        for i, s in enumerate(scores):
            if s is None:
                out.append(None)
                continue
            if isinstance(s, bool) or not isinstance(s, numbers.Real) or not math.isfinite(s):
                raise RunError(f"reward {self.__name__!r} gave {s!r} for sample {i}; a score is a finite number or None")
            out.append(float(s))
        return out
