"""What every sandbox provider takes, gives and does: the ``Limits`` of one run, the ``Result`` it ends with, and
the ``Provider`` protocol, ``run`` and ``isolation``. Standard library only."""

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Limits:
    """What one run may use. ``wall_seconds`` ends it whatever it does; the rest are the kernel's limits."""

    wall_seconds: float = 10.0
    cpu_seconds: int = 10
    memory_mb: int = 1024
    file_mb: int = 10
    processes: int = 64
    open_files: int = 64
    disk_mb: int = 64  # all the program's files together, where the kernel allows a tmpfs (in namespaces)


DEFAULT_LIMITS = Limits()  # what a run may use where its caller names no limits


@dataclass(frozen=True)
class Result:
    """How a run ended: ``passed`` (it reached the end of its script), ``failed`` (it exited early or with an
    error), ``timeout`` (killed at the wall limit), ``killed`` (stopped by a kernel limit) or ``error`` (the machine
    refused the sandbox a namespace or limit, so the program never ran)."""

    status: str
    stdout: str
    stderr: str
    seconds: float


@runtime_checkable
class Provider(Protocol):
    """A place where a program a model wrote runs, within limits, apart from the training process.

    ``run`` runs ``program`` (Python source) with ``stdin`` as its input, then, when ``tests`` holds any, those tests
    against the names the program defined, where nothing the program does can write the verdict: ``passed`` only when
    the program and every test ran to their end. A status of ``error`` means that the program never ran (the sandbox
    could not be set up), so there is nothing to judge. ``isolation`` says what a run is kept from beyond its limits,
    in words a person reads (the local provider: ``("net", "pid", "mount", "user")`` where the kernel allows it).
    """

    def run(self, program: str, tests: str = "", stdin: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Result: ...

    def isolation(self) -> tuple[str, ...]: ...
