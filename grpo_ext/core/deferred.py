"""Optional libraries that another library imports at its own import, loaded when first used instead.

peft imports bitsandbytes whenever it is installed (``peft/helpers.py``), and bitsandbytes' import loads torch's
compiler, sympy and the Hub's client and looks for a kernel on the Hub (a warning that ``--verbose`` shows): about 2 s
of every run's start on a CPU, for a library that only a 4-bit model or an 8-bit optimizer calls. A library named here
is registered without being run: ``import bitsandbytes`` returns at once, and the first attribute read of it runs its
import, so a run that quantizes loads it as before (at its model load rather than at peft's import).
"""

import importlib.util
import sys

DEFERRED = ("bitsandbytes",)


def defer(name: str) -> bool:
    """Register ``name`` to run its import on the first read of an attribute it has not yet set; False where it is not
    installed or already imported. The module's own names (``__file__``, ``__spec__``) are set at once,
    so that a walk over every loaded module (``inspect.getmodule``, which torch's import runs) does not start it.
    (``importlib.util.LazyLoader`` starts on any attribute, ``__file__`` too, and so ran bitsandbytes' import in the
    middle of torch's, where it failed half way.)"""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return False
    loader, module = spec.loader, importlib.util.module_from_spec(spec)
    # an import of one of a package's submodules reads the package's __path__ first: left unset until the package's
    # import runs, that read runs it, so that no submodule runs before the package's own setup (bitsandbytes registers
    # its kernels there)
    path = vars(module).pop("__path__", None)

    def load(attr: str) -> object:
        vars(module).pop("__getattr__")  # the module's own, once its import has run
        if path is not None:
            module.__path__ = path
        try:
            loader.exec_module(module)
        except BaseException:
            del sys.modules[name]  # as a failed import leaves it: the next import tries again
            raise
        return getattr(module, attr)

    vars(module).update(__getattr__=load)  # PEP 562: read only for a name the module lacks
    sys.modules[name] = module
    return True


def defer_optional_libraries() -> None:
    for name in DEFERRED:
        defer(name)
