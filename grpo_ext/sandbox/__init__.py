"""Layer 1, sandbox: where a program a model wrote runs (the ``code_tests`` reward's programs, the ``python`` tool's
calls), behind a small interface so that another sandbox can take the place of the one that ships.

``contract.py`` says what a provider takes, gives and does (``Limits``, ``Result``, ``Provider``: ``run`` and
``isolation``); ``local.py`` is the provider that ships, a process on this machine, in Linux namespaces where the
kernel allows them, started as the script ``harness.py`` with ``calls.py`` beside it. ``PROVIDERS`` names the
providers and ``provider()`` gives one, by default ``DEFAULT``. Another (a remote sandbox such as E2B, or ``bwrap``
on this machine) is a module of this folder and an entry in ``PROVIDERS``; nothing in a recipe chooses one yet.
Standard library only; imports nothing else of the package.
"""

from grpo_ext.sandbox import local
from grpo_ext.sandbox.contract import Limits, Provider, Result

# A provider is anything with ``run`` and ``isolation``: an object, or a module, as ``local`` is.
PROVIDERS: dict[str, Provider] = {"local": local}
DEFAULT = "local"


def provider(name: str | None = None) -> Provider:
    """The provider called ``name`` in ``PROVIDERS``, else the default one.

    >>> provider() is provider("local") is local, sorted(PROVIDERS)
    (True, ['local'])
    """
    chosen = name or DEFAULT
    if chosen not in PROVIDERS:
        raise ValueError(f"no sandbox provider {chosen!r}; the providers are {', '.join(sorted(PROVIDERS))}")
    return PROVIDERS[chosen]


__all__ = ["DEFAULT", "PROVIDERS", "Limits", "Provider", "Result", "local", "provider"]
