"""TRL's private internals behind one fence (grpo_ext/run/trl_internals.py): no other file names one, the fence's table
lists each it uses, and what the fence reads of a trainer without a model.

A private name of TRL's is one that TRL's trainers or transformers' Trainer (GRPOTrainer's parents) define, read from
the installed source without importing it, and each name the fence's table lists (older TRL's among them). Any use of
such a name counts wherever it is, whatever object it is read on: an attribute, a string that is the name (given to
getattr or monkeypatch.setattr, or kept to be given later), a keyword (a stand-in trainer built with it) or a method
defined in a class (an override). A private name of grpo_ext's own is never one of TRL's, so it neither counts nor hides one;
a private name of ours that TRL's trainers also define counts, and is renamed (a subclass would shadow TRL's).
"""

import ast
import collections
import importlib.util
import re
import types
from pathlib import Path

import pytest

from grpo_ext.run import trl_internals
from grpo_ext.run.trl_internals import Behaviour, Step
from tests.helpers import ROOT

FENCE = ROOT / "grpo_ext" / "run" / "trl_internals.py"
SCANNED = ("grpo_ext", "tests", "benchmarks", "scripts")


def table() -> dict[str, str]:
    """The fence's table: private name -> what grpo_ext uses it for."""
    rows = re.findall(r"^\| `(_\w+)` \| (.*?) \|", trl_internals.__doc__, re.M)
    return dict(rows)


def trl_private_names() -> frozenset[str]:
    """Every private name defined by the installed TRL's trainer modules and transformers' trainer.py, and the
    fence's table's."""
    sources = sorted((Path(importlib.util.find_spec("trl").origin).parent / "trainer").glob("*.py"))
    sources.append(Path(importlib.util.find_spec("transformers").origin).parent / "trainer.py")
    names = set(table())
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(item.name)
                    elif isinstance(item, ast.Assign):
                        names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
    return frozenset(n for n in names if n.startswith("_") and not n.endswith("__"))


PRIVATE = trl_private_names()


def uses(source: str) -> list[tuple[int, str]]:
    """(line, name) for each use of a private name of TRL's in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PRIVATE:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.keyword) and node.arg in PRIVATE:
            found.append((node.value.lineno, node.arg))
        elif isinstance(node, ast.ClassDef):
            methods = (ast.FunctionDef, ast.AsyncFunctionDef)
            found += [(f.lineno, f.name) for f in node.body if isinstance(f, methods) and f.name in PRIVATE]
    return sorted(set(found))


CASES = [
    # (source, the private names of TRL's it uses)
    ('trainer._metrics["train"].clear()', ["_metrics"]),  # an attribute of TRL's trainer
    ("scores = super()._calculate_rewards(inputs, prompts, completions, ids)", ["_calculate_rewards"]),  # a parent's
    ('logs = getattr(trainer, "_logs", None)', ["_logs"]),  # by name, through getattr
    ('logs = getattr(trainer, "_textual_logs", None)', ["_textual_logs"]),  # TRL 0.19's, which TRL 1.x lacks: the table's
    ('monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", policy)', ["_generate_single_turn"]),  # a test's stand-in
    ('for name in ("_logs", "x"):\n    getattr(trainer, name)', ["_logs"]),  # a name kept, to be given to getattr later
    ("fake = SimpleNamespace(_metrics={})", ["_metrics"]),  # a stand-in trainer that has it
    ("class T(GRPOTrainer):\n    def _generate_and_score_completions(self, inputs): ...", ["_generate_and_score_completions"]),
    ("trainer._grpo_ext_learned = True", []),  # a private name of our own, on TRL's object: not TRL's
    ('hasattr(trainer, "_grpo_ext_draws")', []),  # the same, by name
    ("self._board()", []),  # a private method of a class of ours
    ("os._exit(0)", []),  # another library's private name
    ("model_cache._fetch_gguf(alias, into)", []),  # a private function of a module of ours
    ('text = "trainer._metrics"', []),  # words in a string are not a use
]


@pytest.mark.parametrize(("source", "expected"), CASES)
def test_what_counts_as_a_use_of_a_private_name_of_trls(source, expected):
    assert [name for _, name in uses(source)] == expected


def test_the_installed_trl_is_read():
    # a handful the fence relies on: were the source not found, every scan below would pass unread
    assert {"_calculate_rewards", "_generate_and_score_completions", "_metrics", "_compute_loss"} <= PRIVATE


def test_no_file_outside_the_fence_names_a_private_attribute_of_trls():
    here = Path(__file__).resolve()
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.resolve() in (FENCE.resolve(), here):
                continue
            found += [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in uses(path.read_text(encoding="utf-8"))]
    assert not found, "use grpo_ext/run/trl_internals.py (and add the name to its table) instead of:\n" + "\n".join(found)


def test_the_fence_table_lists_every_private_name_it_uses():
    source = FENCE.read_text(encoding="utf-8")
    used = {name for _, name in uses(source)}
    listed = table()
    assert used <= set(listed), f"used by the fence and missing from its table: {sorted(used - set(listed))}"
    unused = {name for name, use in listed.items() if name not in used and not use.startswith("not called")}
    assert not unused, f"in the fence's table and not used there: {sorted(unused)}"


class Trainer:
    """A stand-in holding only what a GRPOTrainer keeps of its last batch, under the attribute its TRL uses."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


BATCH = {"prompt": ["p", "p"], "completion": ["1", "x"], "rewards": {"digit_exact": [1.0, 0.0]}, "advantages": [0.7, -0.7]}
SAMPLED_CASES = [
    # TRL 0.20 and later
    (Trainer(_logs={**BATCH, "images": [], "extra": {}}), BATCH),
    # TRL 0.19
    (Trainer(_textual_logs=BATCH), BATCH),
    # a TRL that keeps no batch: no log, and the run goes on
    (Trainer(), None),
    # a shape moved again: a reward's scores that do not line up with the completions are not guessed at
    (Trainer(_logs={**BATCH, "rewards": {"digit_exact": [1.0]}}), None),
    (Trainer(_logs={"prompt": ["p"], "completion": ["1"]}), None),
]


@pytest.mark.parametrize(("trainer", "expected"), SAMPLED_CASES)
def test_sampled_reads_the_batch_where_trl_keeps_it(trainer, expected):
    assert trl_internals.sampled(trainer) == expected


STEP_CASES = [
    # (training, calls of (method, name, value), the metrics after)
    (True, [("log", "skipped_rows", 0.5), ("log", "skipped_rows", 0.25)], {"train": {"skipped_rows": [0.5, 0.25]}}),
    # a count over the step: one entry, summed into
    (True, [("tally", "dropped", 2), ("tally", "dropped", 1)], {"train": {"dropped": [3]}}),
    (False, [("log", "tools/dropped_frequency", 1.0)], {"eval": {"tools/dropped_frequency": [1.0]}}),  # sampling for an eval
]


@pytest.mark.parametrize(("training", "calls", "expected"), STEP_CASES)
def test_a_step_logs_into_the_mode_the_trainer_is_in(training, calls, expected):
    metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}
    step = Step(types.SimpleNamespace(model=types.SimpleNamespace(training=training)), metrics)
    for method, name, value in calls:
        getattr(step, method)(name, value)
    assert {mode: dict(entries) for mode, entries in metrics.items() if entries} == expected


def test_a_behaviour_passes_through_the_hooks_it_does_not_override():
    class Quiet(Behaviour):
        pass

    step, batch = Step(None, {}), {"advantages": [0.0]}
    assert Quiet().on_rewards(step, [], [], None) is None
    assert Quiet().on_batch(step, batch) is batch
    assert Quiet().on_loss(step, None, batch, lambda inputs: ("loss of", inputs)) == ("loss of", batch)
