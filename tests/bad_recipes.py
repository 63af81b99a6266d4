"""Generated bad recipes, for the tests that run them in-process (tests/unit/test_fuzz_recipes.py) and as a
user's command (tests/integration/test_fuzz_recipes_command.py).

Each strategy below breaks the shipped digit recipe in one way (or writes something that is no recipe at all) and
says which key path the error must name; ``check_refused`` says what every refusal looks like.
"""

import copy
import re
from pathlib import Path

import yaml
from hypothesis import strategies as st

from grpo_ext import recipe, rewards
from grpo_ext.core import yaml_io
from grpo_ext.settings import batch_rules, compat
from tests.helpers import ROOT

DIGIT = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
# libyaml's emitter where PyYAML has it: the pure-Python one took about 2 s of the in-process fuzz test's 13 s (CPU)
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


NAME = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=20)


VALUES = {
    "str": TEXT,
    "int": st.integers(-(10**6), 10**6),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "bool": st.booleans(),
    "null": st.none(),
    "list": st.lists(st.integers(), max_size=3),
    "dict": st.dictionaries(NAME, st.integers(), max_size=2),
}


def is_number_text(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def wrong_value(kinds) -> st.SearchStrategy:
    """A value of a YAML kind the key does not accept (an int is a float; so is a numeric string)."""
    bad = [k for k in VALUES if k not in kinds and not (k == "int" and "float" in kinds)]
    values = st.one_of(*(VALUES[k] for k in bad))
    return values.filter(lambda v: not ("float" in kinds and isinstance(v, str) and is_number_text(v)))


def changed(path: tuple, value) -> dict:
    doc = copy.deepcopy(DIGIT)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def where(path: tuple) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


@st.composite
def unknown_key(draw):
    """An unknown key at any level."""
    section = draw(st.sampled_from(["", "model", "data", "eval", "training", "rewards"]))
    known = {
        "": recipe.TOP_LEVEL,
        "model": recipe.SCHEMA["model"],
        "data": recipe.SCHEMA["data"],
        "eval": recipe.SCHEMA["eval"],
        "training": compat.known_keys() | set(compat.RETIRED) | {"output_dir", "seed"},
        "rewards": recipe.SCHEMA["reward"],
    }[section]
    key = draw(NAME.filter(lambda k: k not in known))
    if section == "":
        return changed((key,), 1), f"{key}: unknown key"
    if section == "rewards":
        return changed(("rewards", 1), {"name": "digit_shaped", key: 1}), f"rewards[1].{key}: unknown key"
    return changed((section, key), 1), f"{section}.{key}: unknown"


@st.composite
def wrong_type(draw):
    """A value of the wrong kind for a recipe key or a GRPOConfig key."""
    if draw(st.booleans()):
        section = draw(st.sampled_from(["model", "data", "eval"]))
        key = draw(st.sampled_from(sorted(recipe.SCHEMA[section])))
        kinds = recipe.SCHEMA[section][key].kinds
        path = (section, key)
    else:
        table = compat.fields()
        key = draw(
            st.sampled_from(sorted(k for k, f in table.items() if "any" not in f["kinds"] and k not in ("output_dir", "seed")))
        )
        kinds = table[key]["kinds"]
        path = ("training", key)
    value = wrong_value(kinds)
    if path[0] == "training" and key in batch_rules.STRATEGIES:
        value = value.filter(lambda v: v is not False)  # an unquoted YAML `no` reads as false: it means "no"
    if path[0] == "training":  # a value the shim translates into the installed TRL's vocabulary is not a wrong type
        value = value.filter(lambda v: compat.canonical(key, v) is v)  # (scale_rewards: TRL's older true/false)
    return changed(path, draw(value)), where(path)


@st.composite
def bad_reward(draw):
    """Unknown names, missing files, bad weights, args a reward does not take, bad policies, entries of the wrong kind."""
    i = draw(st.integers(0, 1))
    kind = draw(st.sampled_from(["name", "file", "weight", "args", "args_kind", "on_error", "timeout", "entry", "empty"]))
    if kind == "name":
        name = draw(NAME.filter(lambda n: n not in rewards.known_names()))
        return changed(("rewards", i), name), f"rewards[{i}].name: unknown reward"
    if kind == "file":
        return changed(("rewards", i), f"./missing_{draw(NAME)}.py:score"), f"rewards[{i}].name: reward file"
    if kind == "weight":
        return changed(("rewards", i), {"name": "digit_exact", "weight": draw(wrong_value(("float",)))}), f"rewards[{i}].weight"
    if kind == "args":
        return changed(("rewards", i), {"name": "digit_exact", "args": {draw(NAME): draw(VALUES["int"])}}), f"rewards[{i}].args"
    if kind == "args_kind":
        return changed(("rewards", i), {"name": "digit_exact", "args": draw(wrong_value(("dict",)))}), f"rewards[{i}].args"
    if kind == "on_error":
        return changed(
            ("rewards", i), {"name": "digit_exact", "on_error": draw(TEXT.filter(lambda t: t not in ("fail", "skip")))}
        ), f"rewards[{i}].on_error"
    if kind == "timeout":
        return changed(("rewards", i), {"name": "digit_exact", "timeout": draw(st.floats(-100, 0.09))}), f"rewards[{i}].timeout"
    if kind == "entry":
        return changed(("rewards", i), draw(st.one_of(VALUES["int"], VALUES["list"], VALUES["bool"]))), f"rewards[{i}]"
    return changed(("rewards",), []), "rewards: is empty"


@st.composite
def bad_prompts(draw):
    """Empty prompt lists, prompts that are not non-empty strings."""
    key = draw(st.sampled_from(["prompts", "eval_prompts"]))
    if draw(st.booleans()):
        return changed(("data", key), []), f"data.{key}: is empty"
    prompts = list(DIGIT["data"][key])
    i = draw(st.integers(0, len(prompts) - 1))
    prompts[i] = draw(st.one_of(st.just(""), st.just("   "), VALUES["int"], VALUES["null"], VALUES["list"]))
    return changed(("data", key), prompts), f"data.{key}[{i}]"


@st.composite
def bad_mixture(draw):
    """A mixture of sources broken in one way: no source, a weight that is not a positive number, weight and rows
    both or neither, one source's key beside the mixture, a source lacking the column a reward needs."""
    n = draw(st.integers(1, 3))
    i = draw(st.integers(0, n - 1))
    prompts = {"prompts": DIGIT["data"]["prompts"], "eval_prompts": DIGIT["data"]["eval_prompts"]}
    sources = [{**prompts, "name": f"s{j}", "weight": draw(st.floats(0.01, 100))} for j in range(n)]
    section = {"mixture": sources}
    doc = changed(("data",), section)
    kind = draw(st.sampled_from(["empty", "weight", "both", "neither", "beside", "column"]))
    if kind == "empty":
        section["mixture"] = []
        return doc, "data.mixture: is empty"
    if kind == "weight":
        sources[i]["weight"] = draw(st.one_of(st.integers(max_value=0), st.floats(max_value=0, allow_infinity=False)))
        return doc, f"data.mixture[{i}].weight: must be a positive number"
    if kind == "both":
        sources[i]["rows"] = draw(st.integers(1, 100))
        return doc, f"data.mixture[{i}]: gives weight and rows"
    if kind == "neither":
        del sources[i]["weight"]
        return doc, f"data.mixture[{i}]: give weight"
    if kind == "beside":
        key, value = draw(st.sampled_from([("prompts", ["2+3?"]), ("file", "train.jsonl"), ("source", "arith"), ("hub", "a/b")]))
        section[key] = value
        return doc, f"data.{key}: names one source, beside data.mixture"
    # every source but one is the arith generator, whose rows have the answer column math_accuracy reads
    for j in range(n):
        if j != i:
            sources[j] = {"source": "arith", "source_args": {"train": 8, "held_out": 2}, "name": f"s{j}", "weight": 1}
    doc["rewards"] = ["math_accuracy"]
    return doc, f"needs column 'answer', which the training rows (data.mixture[{i}].prompts) lack"


@st.composite
def bad_sizes(draw):
    """Zero or negative sizes, and groups that do not divide the batch."""
    kind = draw(st.sampled_from(["size", "eval", "divide"]))
    if kind == "size":
        key = draw(st.sampled_from(batch_rules.POSITIVE_INTS))
        return changed(("training", key), draw(st.integers(-1000, 0))), f"training.{key}: must be at least 1"
    if kind == "eval":
        key = draw(st.sampled_from(["samples", "batch_size", "max_new_tokens"]))
        return changed(("eval", key), draw(st.integers(-1000, 0))), f"eval.{key}: must be at least 1"
    g = draw(st.integers(2, 64))
    batch = draw(st.integers(1, 256).filter(lambda b: b % g))
    doc = changed(("training", "num_generations"), g)
    doc["training"]["per_device_train_batch_size"] = batch
    return doc, "training.per_device_train_batch_size"


@st.composite
def bad_override(draw):
    """A valid recipe with a bad `key=value` on the command line."""
    kind = draw(st.sampled_from(["unknown", "shape", "path"]))
    if kind == "unknown":
        key = draw(
            NAME.filter(lambda k: k not in compat.known_keys() and k not in compat.RETIRED and k not in ("output_dir", "seed"))
        )
        return copy.deepcopy(DIGIT), f"training.{key}: unknown", [f"training.{key}=1"]
    if kind == "shape":
        return copy.deepcopy(DIGIT), "training.num_generations", [f"training.num_generations={draw(st.integers(-5, 1))}"]
    return copy.deepcopy(DIGIT), "override", [f"rewards.{draw(st.integers(2, 99))}.weight=1"]


@st.composite
def not_a_recipe(draw):
    """YAML syntax errors, documents that are not mappings, random text, bytes that are not UTF-8, huge files."""
    kind = draw(st.sampled_from(["syntax", "scalar", "text", "bytes", "huge"]))
    if kind == "syntax":
        lines = yaml.safe_dump(DIGIT, sort_keys=False).splitlines()
        at = draw(st.integers(0, len(lines)))
        broken = draw(
            st.sampled_from(["key: [unclosed", "key: {a: 1", '"unterminated: x', "\tindented: with a tab", "- : - :", "&x *y"])
        )
        return "\n".join(lines[:at] + [broken] + lines[at:]).encode(), "YAML syntax error"
    if kind == "scalar":
        value = draw(st.one_of(VALUES["int"], VALUES["list"], VALUES["bool"], st.none(), NAME))
        return yaml.safe_dump(value).encode(), "a recipe is a mapping"
    if kind == "text":
        return draw(TEXT).encode(), None
    if kind == "bytes":
        return b"\xff" + draw(st.binary(max_size=40)), "not UTF-8"
    return b"# " + b"x" * draw(st.integers(recipe.MAX_RECIPE_BYTES, recipe.MAX_RECIPE_BYTES + 10_000)), "a recipe is at most"


SHIPPED_TEXT = (ROOT / "recipes" / "digit.yaml").read_text(encoding="utf-8")


@st.composite
def hand_edited(draw):
    """What editing the shipped file by hand produces: a key line copied (an old value left above a new one),
    YAML 1.1 values where another kind is meant, numbers that are not finite, very long or unicode keys and names."""
    lines = SHIPPED_TEXT.splitlines()
    kind = draw(st.sampled_from(["twice", "yaml11", "infinite", "long", "unicode_key"]))
    if kind == "twice":
        keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[A-Za-z_]+:", line)]
        i = draw(st.sampled_from(keyed))
        return "\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1 :]).encode(), f"given twice (lines {i + 1} and {i + 2})"
    if kind == "yaml11":  # YAML 1.1 reads yes/no/off as booleans and ~ as null; 0o17 stays a string
        line, value, fragment = draw(
            st.sampled_from(
                [
                    ("  name: smollm2-135m-instruct", "yes", "model.name: expected a string, got bool True"),
                    ("  name: smollm2-135m-instruct", "~", "model.name: expected a string, got no value"),
                    ("seed: 0", "0o17", "seed: expected an integer, got str '0o17'"),
                    ("output_dir: runs/digit", "off", "output_dir: expected a string, got bool False"),
                    ("  learning_rate: 3.0e-5", "no", "training.learning_rate: expected a finite number, got bool False"),
                ]
            )
        )
        key = line.split(":")[0]
        edited = [f"{key}: {value}" if ln.startswith(line) else ln for ln in lines]
        return "\n".join(edited).encode(), fragment
    if kind == "infinite":
        path = draw(st.sampled_from([("training", "learning_rate"), ("training", "temperature"), ("eval", "temperature")]))
        return changed(path, draw(st.sampled_from([float("inf"), float("-inf"), float("nan")]))), where(path)
    if kind == "long":
        name = draw(st.text("abcdefghij", min_size=5000, max_size=6000))
        return changed(("model", "name"), name), "model.name: "
    key = draw(st.text(st.characters(min_codepoint=0x370, max_codepoint=0x3FF), min_size=1, max_size=8))
    return changed(("training", key), 1), "unknown GRPOConfig key"


@st.composite
def past_a_bound(draw):
    """What no recipe needs and the loader must not build: YAML nested past its depth, aliases standing for more
    values than it keeps, integers longer than a recipe's numbers, seeds outside numpy's range."""
    kind = draw(st.sampled_from(["depth", "aliases", "integer", "seed"]))
    lines = SHIPPED_TEXT.splitlines()
    if kind == "seed":
        seed = draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32, max_value=10**300)))
        return changed(("seed",), seed), "seed: must be at"
    if kind == "integer":
        numbered = [i for i, line in enumerate(lines) if re.match(r"^\s*[a-z_]+: +\d+(\s|$)", line)]  # integers, not 3.0e-5
        i, digits = draw(st.sampled_from(numbered)), draw(st.integers(yaml_io.MAX_INT_DIGITS + 1, 20_000))
        lines[i] = re.sub(r"(: +)\d+", lambda m: m.group(1) + "7" * digits, lines[i], count=1)
        return "\n".join(lines).encode(), f"an integer of {digits} digits"
    if kind == "depth":
        depth = draw(st.integers(yaml_io.MAX_YAML_DEPTH + 1, 2000))
        value = draw(st.sampled_from(["[" * depth + "]" * depth, "{a: " * depth + "1" + "}" * depth]))
        fragment = f"nested more than {yaml_io.MAX_YAML_DEPTH} levels deep"
    else:  # each level a list of `fan` aliases of the one before, enough levels to pass the bound
        fan = draw(st.integers(2, 12))
        levels = draw(st.integers(1, 3)) + next(n for n in range(1, 64) if fan**n > yaml_io.MAX_YAML_VALUES)
        anchors = [f"&l0 [{', '.join(['lol'] * fan)}]"]
        anchors += [f"&l{n} [{', '.join([f'*l{n - 1}'] * fan)}]" for n in range(1, levels)]
        value, fragment = f"[{', '.join(anchors)}]", "its aliases expand to more than"
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[a-z_]+: +\S", line) and not line.strip().startswith("#")]
    i = draw(st.sampled_from(keyed))
    lines[i] = re.sub(r"(: +)\S.*$", lambda m: m.group(1) + value, lines[i], count=1)
    return "\n".join(lines).encode(), fragment


def as_case(doc_or_bytes, fragment, overrides=()):
    return doc_or_bytes, fragment, list(overrides)


BAD_RECIPES = st.one_of(
    unknown_key().map(lambda c: as_case(*c)),
    wrong_type().map(lambda c: as_case(*c)),
    bad_reward().map(lambda c: as_case(*c)),
    bad_prompts().map(lambda c: as_case(*c)),
    bad_mixture().map(lambda c: as_case(*c)),
    bad_sizes().map(lambda c: as_case(*c)),
    bad_override().map(lambda c: as_case(*c)),
    not_a_recipe().map(lambda c: as_case(*c)),
    hand_edited().map(lambda c: as_case(*c)),
    past_a_bound().map(lambda c: as_case(*c)),
)


def write(folder: Path, doc) -> Path:
    path = folder / "recipe.yaml"
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        text = yaml.dump({**doc, "output_dir": str(folder / "run")}, Dumper=DUMPER, allow_unicode=True)
        path.write_text(text, encoding="utf-8")
    return path


def check_refused(rc: int, err: str, fragment: str | None, folder: Path) -> None:
    assert rc == 2, err
    lines = err.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), err
    assert all(len(line) <= 500 for line in lines), "an error line too long to read"
    if fragment is not None:
        assert fragment in err, (fragment, err)
    assert sorted(p.name for p in folder.rglob("*")) == ["recipe.yaml"], "something was created"
