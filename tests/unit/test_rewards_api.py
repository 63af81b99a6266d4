"""The reward protocol (grpo_ext/rewards/api.py): what each built-in reward declares, the defaults a plain function
gets, the guard's ``info``, and that no module but api.py reads a reward's attributes."""

import ast
import pickle
import typing
from pathlib import Path

import pytest

from grpo_ext.results import preflight
from grpo_ext.rewards import Guarded, build, unscored
from grpo_ext.rewards.api import DECLARED, Declared, Reward, RewardInfo, describe
from tests.helpers import ROOT

UNIT = (0.0, 1.0)
JUDGE = {"base_url": "http://localhost:8000/v1", "model": "judge", "rubric": "Is {completion} {answer}? 0 to 10"}

BUILT_IN = [
    # (name, args, what it declares beyond the defaults, the methods it has)
    ("digit_exact", {}, {"score_range": UNIT, "partial_credit": "digit_shaped"}, set()),  # its partial credit, by name
    ("digit_shaped", {}, {"score_range": UNIT}, set()),  # is the partial credit: names none
    (
        "math_accuracy",
        {},
        {"columns": ("answer",), "score_range": UNIT, "partial_credit": "math_closeness"},
        {"answer_of", "why_none"},
    ),
    ("math_closeness", {"answer_column": "gold"}, {"columns": ("gold",), "score_range": UNIT}, {"answer_of", "why_none"}),
    ("cosine_accuracy", {"max_length": 8}, {"score_range": (-1.0, 1.0)}, {"why_none"}),  # None where math_accuracy's is
    ("answer_match", {}, {"columns": ("answer",), "score_range": UNIT}, {"answer_of", "why_none"}),
    ("code_tests", {}, {"columns": ("tests",), "score_range": UNIT}, {"why_none"}),
    ("llm_judge", JUDGE, {"columns": ("answer",)}, {"preflight", "why_none", "said"}),  # a service, and a judge
    ("overlong_penalty", {"max_length": 10, "soft_margin": 4}, {"pass_threshold": 0.0, "score_range": (-1.0, 0.0)}, set()),
    ("repetition_penalty", {}, {"pass_threshold": 0.0, "score_range": (-1.0, 0.0)}, set()),
    ("reward_model", {"model": "my-org/rm"}, {}, {"preflight"}),  # loads its model before the policy does
    ("think_answer_format", {}, {"score_range": UNIT}, set()),
    ("regex_match", {"pattern": "x"}, {"score_range": UNIT}, set()),
    ("tag_count", {}, {"score_range": UNIT}, set()),
    ("tool_success", {}, {"score_range": UNIT}, set()),
]
METHODS = {"answer_of", "preflight", "why_none", "said"}


@pytest.mark.parametrize(("name", "args", "declared", "methods"), BUILT_IN)
def test_what_each_built_in_reward_declares(name, args, declared, methods, tmp_path):
    info = describe(build(name, args, tmp_path, "rewards[0]"))
    values = {f: getattr(info, f) for f in ("columns", "pass_threshold", "score_range", "partial_credit")}
    assert values == {"columns": (), "pass_threshold": None, "score_range": None, "partial_credit": None} | declared
    assert {m for m in METHODS if getattr(info, m) is not None} == methods


def test_a_plain_function_gets_the_defaults():
    def graded(completions, answer, unit="", **kwargs):
        return [1.0] * len(completions)

    assert isinstance(graded, Reward)
    assert describe(graded) == RewardInfo(name="graded", columns=("answer",))  # the columns its signature requires
    assert describe(None) == RewardInfo()  # a reward only a name stands for (an environment's get_reward)


def test_a_declared_range_in_another_form_is_none():
    def own(completions, **kwargs):
        return [0.0] * len(completions)

    for declared, expected in [((0, 1), UNIT), ((1, 0), None), ([0, 1], None), ((0, float("nan")), None), ("0-1", None)]:
        own.score_range = declared
        assert describe(own).score_range == expected, declared


class Explained:
    """A reward of a user's that says why it scored None, for some rows."""

    __name__ = "explained"

    def __call__(self, completions, **kwargs):
        return [None] * len(completions)

    def why_none(self, row: dict, index: int = 0) -> str | None:
        return f"row {index} has no {row['topic']!r} notes" if "topic" in row else None


@pytest.mark.parametrize(
    ("fn", "row", "expected"),
    [
        (Explained(), {"topic": "cats"}, "row 0 has no 'cats' notes"),  # the reward's own reason
        (Explained(), {}, unscored.NO_REASON),  # it gives none for this row: the fallback
        (lambda completions, **kwargs: [None], {}, unscored.NO_REASON),  # a plain function declares none
    ],
)
def test_unscored_asks_the_reward_then_falls_back(fn, row, expected):
    assert unscored.reason(fn, row) == expected


@pytest.mark.parametrize(
    ("recipe_threshold", "expected"),
    [
        (None, 0.0),  # the reward's own (a penalty passes at 0)
        (-0.5, -0.5),  # the recipe's rewards[i].pass_threshold wins
    ],
)
def test_the_guard_holds_what_the_reward_declares(recipe_threshold, expected, tmp_path):
    fn = build("overlong_penalty", {"max_length": 10, "soft_margin": 4}, tmp_path, "rewards[0]")
    guarded = Guarded(fn, "overlong_penalty_2", pass_threshold=recipe_threshold)
    assert guarded.info.name == "overlong_penalty_2"  # the metric name
    assert guarded.info.pass_threshold == expected
    assert guarded.info.score_range == (-1.0, 0.0)
    assert describe(guarded) is guarded.info


def test_the_guard_info_survives_a_copy(tmp_path):
    """A run hands its guarded rewards to other processes by pickle: the declared methods stay bound to the copy."""
    copy = pickle.loads(pickle.dumps(Guarded(build("math_accuracy", {}, tmp_path, "rewards[0]"), "math_accuracy")))
    assert copy.info.why_none({"answer": ""}) == "the 'answer' column holds no reference answer ('')"
    assert copy.info.answer_of.__self__ is copy.fn


def test_the_pre_flight_marks_come_from_the_rewards(tmp_path):
    funcs = [Guarded(build(n, a, tmp_path, "rewards[0]"), n) for n, a in [("digit_exact", {}), ("llm_judge", JUDGE)]]
    assert preflight.marks(funcs) == (frozenset({"llm_judge"}), {"digit_exact": "digit_shaped"})


def test_reward_info_mirrors_the_protocol():
    """Each attribute the protocol declares is a field of RewardInfo, and the other way round."""
    declared = set(typing.get_type_hints(Declared)) | {m for m in METHODS if callable(getattr(Declared, m, None))}
    assert set(DECLARED) == declared - {"__name__"}


def _reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, attribute) of each getattr or hasattr that names a declared attribute, the guard's ``fn`` or ``info``."""
    names = {*DECLARED, "fn", "info"}
    return [
        (node.lineno, node.args[1].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in names
    ]


def test_only_the_api_reads_what_a_reward_declares():
    """A layer that needs what a reward declares asks ``describe`` or a guarded reward's ``info``; it never probes."""
    found = []
    for path in sorted((ROOT / "grpo_ext").rglob("*.py")):
        if path == ROOT / "grpo_ext" / "rewards" / "api.py":
            continue
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{line} reads {name!r}" for line, name in _reads(tree)]
    assert not found, "; ".join(found)
