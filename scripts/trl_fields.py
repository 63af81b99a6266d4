"""Write grpo_ext/settings/trl_fields/<trl version>.json: every GRPOConfig field of the installed TRL, with its
accepted value kinds and its default.

The recipe validator reads these tables so it can check `training:` keys without importing TRL or torch;
it uses the table of the installed TRL version (or the nearest older one). `scripts/compat_matrix.py`
runs this in each TRL version's environment:

    python scripts/trl_fields.py [OUT.json]
"""

import dataclasses
import enum
import json
import sys
import types
import typing
from pathlib import Path

import transformers
import trl
from trl import GRPOConfig

SCALARS = {bool: "bool", int: "int", float: "float", str: "str", type(None): "null", list: "list", dict: "dict"}


def kinds(tp) -> list[str]:
    """Map a dataclass annotation to the YAML value kinds it accepts."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return sorted({k for arg in typing.get_args(tp) for k in kinds(arg)})
    if origin is typing.Literal:
        return sorted({SCALARS.get(type(a), "str") for a in typing.get_args(tp)})
    if origin in (list, tuple):
        return ["list"]
    if origin is dict:
        return ["dict"]
    if tp in SCALARS:
        return [SCALARS[tp]]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return ["str"]
    return ["any"]


def default(field: dataclasses.Field):
    value = field.default
    if value is dataclasses.MISSING:
        value = field.default_factory() if field.default_factory is not dataclasses.MISSING else None
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        json.dumps(value)
    except TypeError:
        value = repr(value)
    return value


def main() -> None:
    table = {f.name: {"kinds": kinds(f.type), "default": default(f)} for f in dataclasses.fields(GRPOConfig)}
    default_out = Path(__file__).resolve().parents[1] / "grpo_ext" / "settings" / "trl_fields" / f"{trl.__version__}.json"
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else default_out
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"trl": trl.__version__, "transformers": transformers.__version__, "fields": table}
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(table)} GRPOConfig fields of trl {trl.__version__} to {out}")


if __name__ == "__main__":
    main()
