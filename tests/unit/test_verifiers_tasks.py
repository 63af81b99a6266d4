"""Tasksets of the verifiers library (``data.source: verifiers``): a taskset's tasks become the rows and its rewards
the recipe's, with their weights; each bad form is one line at its key, exit 2; without the extra, one line with the
install command. The scoring of a completion as verifiers' own Task.score scores it."""

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.data import verifiers_tasks
from grpo_ext.recipe import load
from tests.helpers import ROOT, write

pytest.importorskip("verifiers.v1", reason="needs the verifiers extra: pip install -e '.[verifiers]'")

TASKS = '''
import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str = ""


class SumTask(vf.Task[SumData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=2.0)
    def correct(self, task: SumData, trace: vf.Trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.5)
    async def short(self, trace: vf.Trace) -> float:
        return 1.0 if len(trace.last_reply) <= 3 else 0.0


class SumTaskset(vf.Taskset[SumTask, vf.TasksetConfig]):
    def __init__(self, config, n, split):
        super().__init__(config)
        self.n, self.split = n, split

    def load(self):
        start = 0 if self.split == "train" else 100
        for a in range(start, start + self.n):
            yield SumTask(SumData(prompt=f"What is {a} + 1?", answer=str(a + 1), system_prompt="Reply with the number."))


def make_taskset(n: int = 8, split: str = "train"):
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}")
    return SumTaskset(vf.TasksetConfig(), n, split)


class Calc(vf.Toolset):
    @vf.tool
    def add(self, a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @vf.tool
    async def negate(self, x: int) -> int:
        """Negate a number.

        Args:
            x: the number to negate
        """
        return -x


class CalcTaskset(SumTaskset):
    @classmethod
    def toolsets(cls, config):
        return [Calc(vf.ToolsetConfig())]


def make_tool_taskset(n: int = 8):
    return CalcTaskset(vf.TasksetConfig(), n, "train")


class ToolTask(SumTask):
    @classmethod
    def toolsets(cls, config):
        return [Calc(vf.ToolsetConfig())]


class BoxTask(SumTask):
    NEEDS_CONTAINER = True


class RuntimeTask(vf.Task[SumData, vf.State, vf.TaskConfig]):
    @vf.reward
    def passed(self, runtime) -> float:
        return 1.0


class Unscored(vf.Task[SumData, vf.State, vf.TaskConfig]):
    pass


class Of(vf.Taskset):
    def __init__(self, task):
        super().__init__(vf.TasksetConfig())
        self.task = task

    def load(self):
        yield self.task(SumData(prompt="1 + 1?", answer="2"))


class Endless(Of):
    INFINITE = True


class Judged(Of):
    def load(self):
        yield SumTask(SumData(prompt="1 + 1?", answer="2"), vf.TaskConfig(judges=[{"id": "reference"}]))


class Silent(Of):
    def load(self):
        yield SumTask(SumData(answer="2"))


def silent():
    return Silent(SumTask)


def judged():
    return Judged(SumTask)


def container():
    return Of(BoxTask)


def runtime():
    return Of(RuntimeTask)


def unscored():
    return Of(Unscored)


def endless():
    return Endless(SumTask)


def task_tools():
    return Of(ToolTask)


class Game(vf.SingleAgentEnv):
    pass


def not_a_taskset():
    return 42
'''


def recipe(tmp_path, **source_args) -> str:
    """The digit recipe on the taskset of TASKS (make_taskset: 8 training tasks, 2 eval tasks of its test split),
    ``source_args`` over it (None drops a key)."""
    (tmp_path / "tasks.py").write_text(TASKS)
    doc = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
    args = {"taskset": "tasks.py:make_taskset", "args": {"n": 8}, "eval_args": {"split": "test", "n": 2}} | source_args
    doc["data"] = {"source": "verifiers", "source_args": {k: v for k, v in args.items() if v is not None}}
    doc["rewards"] = []
    return str(write(tmp_path / "recipe.yaml", doc))


def test_a_taskset_gives_the_rows_and_the_rewards(tmp_path):
    r = load(recipe(tmp_path))
    assert r.reward_names == ["correct", "short"] and r.weights == [2.0, 0.5]  # its @vf.reward methods, their weights
    train, held = r.data.generated()
    assert len(train) == 8 and len(held) == 2  # eval rows: the factory called with eval_args (its test split)
    assert train[0] == {
        "prompt": [{"role": "system", "content": "Reply with the number."}, {"role": "user", "content": "What is 0 + 1?"}],
        "vf_task": 0,
        "vf_split": "train",
    }
    assert held[1]["prompt"][1]["content"] == "What is 101 + 1?"
    # the taskset file is read from the recipe's folder, and recorded so, wherever the recipe is read from after
    assert r.data.source_args["taskset"] == f"{tmp_path / 'tasks.py'}:make_taskset"
    again = load(str(write(tmp_path / "recorded.yaml", r.portable())))
    assert again.reward_names == ["correct", "short"] and again.weights == [2.0, 0.5]  # the recorded rewards, not twice


def test_the_toolsets_tools_become_the_models(tmp_path):
    r = load(recipe(tmp_path, taskset="tasks.py:make_tool_taskset", eval_args=None, held_out=2))
    add, negate = r.tool_functions
    assert [add.__name__, negate.__name__] == ["calc_add", "calc_negate"]  # verifiers' names: <server>_<tool>
    assert add(a=2, b=3) == 5 and negate(x=4) == -4  # a coroutine tool is run to its result
    assert add.__doc__ == "Add two whole numbers.\n\nArgs:\n    a: a\n    b: b"  # an Args: line for each argument
    assert negate.__doc__ == "Negate a number.\n\nArgs:\n    x: the number to negate"  # its own, as written
    again = load(str(write(tmp_path / "recorded.yaml", r.portable())))
    assert [f.__name__ for f in again.tool_functions] == ["calc_add", "calc_negate"]  # the recorded tools, not twice


def test_held_out_tasks_come_from_the_end(tmp_path):
    train, held = load(recipe(tmp_path, eval_args=None, held_out=3)).data.generated()
    assert [len(train), len(held)] == [5, 3] and held[0]["prompt"][1]["content"] == "What is 5 + 1?"


@pytest.mark.parametrize(
    ("completion", "split", "scores"),
    [
        ("1", "train", [1.0, 1.0]),  # task 0 of the training tasks: 0 + 1
        ("2", "train", [0.0, 1.0]),  # wrong, and short
        ("1001", "eval", [0.0, 0.0]),  # task 0 of the eval tasks is 100 + 1: wrong, and too long
        ("101", "eval", [1.0, 1.0]),
        ([{"role": "assistant", "content": "1"}], "train", [1.0, 1.0]),  # a chat completion: its last reply
    ],
)
def test_each_reward_scores_as_verifiers_does(tmp_path, completion, split, scores):
    funcs = load(recipe(tmp_path)).reward_funcs
    assert [f([completion], vf_task=[0], vf_split=[split])[0] for f in funcs] == scores


BAD = [
    # (source_args over recipe()'s, the one line validate writes after "error: recipe.yaml: ")
    ({"taskset": "tasks.py:nope"}, "data.source_args.taskset: '{dir}/tasks.py' has no attribute 'nope'"),
    (  # a module that is not installed
        {"taskset": "no_such_tasks:load"},
        "data.source_args.taskset: importing module 'no_such_tasks' failed: ModuleNotFoundError: No module named 'no_such_tasks'",
    ),
    (
        {"taskset": "make_taskset"},
        "data.source_args.taskset: give the taskset as module:function or file.py:function, got 'make_taskset'",
    ),
    (  # the factory refuses its args: its own words
        {"args": {"size": 8}},
        "data.source_args.args: {dir}/tasks.py:make_taskset refused them: TypeError: make_taskset() got an unexpected "
        "keyword argument 'size'",
    ),
    (  # a split the factory does not have
        {"eval_args": {"split": "dev"}},
        "data.source_args.eval_args: {dir}/tasks.py:make_taskset refused them: ValueError: unknown split 'dev'",
    ),
    ({"eval_args": None, "held_out": 8}, "data.source_args.held_out: holds out 8 of 8 tasks; leave some to train on"),
    ({"held_out": 1}, "data.source_args.held_out: and eval_args are both given; keep one source of eval tasks"),
    ({"split": "test"}, "data.source_args.split: unknown key; a verifiers source takes taskset, args, eval_args, held_out"),
    (
        {"taskset": "tasks.py:not_a_taskset", "args": {}, "eval_args": None},
        "data.source_args.taskset: {dir}/tasks.py:not_a_taskset returned a int, not a vf.Taskset",
    ),
    # what training cannot run, each refused at the taskset
    (
        {"taskset": "tasks.py:Game"},
        "data.source_args.taskset: names a vf.Env, which a harness plays; name the function that returns its vf.Taskset",
    ),
    ({"taskset": "tasks.py:container", "args": {}, "eval_args": None}, verifiers_tasks._refused["container"]),
    ({"taskset": "tasks.py:runtime", "args": {}, "eval_args": None}, verifiers_tasks._refused["runtime"].format(name="passed")),
    ({"taskset": "tasks.py:unscored", "args": {}, "eval_args": None}, verifiers_tasks._refused["no_rewards"]),
    ({"taskset": "tasks.py:judged", "args": {}, "eval_args": None}, verifiers_tasks._refused["judges"]),  # a hosted model
    ({"taskset": "tasks.py:silent", "args": {}, "eval_args": None}, verifiers_tasks._refused["no_prompt"]),  # the user opens
    ({"taskset": "tasks.py:endless", "args": {}, "eval_args": None}, verifiers_tasks._refused["infinite"]),
    ({"taskset": "tasks.py:task_tools", "args": {}, "eval_args": None}, verifiers_tasks._refused["toolsets_task"]),
]


@pytest.mark.parametrize(("source_args", "line"), BAD)
def test_a_bad_taskset_is_one_line_at_its_key(tmp_path, capsys, source_args, line):
    assert cli.main(["validate", recipe(tmp_path, **source_args)]) == 2
    err = capsys.readouterr().err.splitlines()
    expected = line.format(dir=tmp_path)
    expected = expected if expected.startswith("data.") else f"data.source_args.taskset: {expected}"
    assert err == [f"error: {tmp_path / 'recipe.yaml'}: {expected}"]


EVAL = [
    # (source_args over recipe()'s, data keys beside them, the one line validate writes after "error: recipe.yaml: ")
    (  # nothing to evaluate on while eval.enabled (the recipe's default)
        {"eval_args": None},
        {},
        "data.source_args: the taskset gives no eval tasks; give eval_args (its eval split, e.g. {split: test}) or "
        "held_out: N, or set eval.enabled: false",
    ),
    (  # rows without a task: the taskset's rewards could not score them
        {"eval_args": None},
        {"eval_prompts": ["What is 5 + 1?"]},
        "data.eval_prompts: holds rows the taskset's rewards cannot score (they score its own tasks); give its eval split "
        "with source_args.eval_args, or source_args.held_out: N",
    ),
]


@pytest.mark.parametrize(("source_args", "data", "line"), EVAL)
def test_the_eval_rows_are_the_tasksets(tmp_path, capsys, source_args, data, line):
    doc = yaml.safe_load(open(recipe(tmp_path, **source_args)).read())
    doc["data"].update(data)
    assert cli.main(["validate", str(write(tmp_path / "recipe.yaml", doc))]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {tmp_path / 'recipe.yaml'}: {line}"]


def test_a_mixture_source_is_refused(tmp_path, capsys):
    doc = yaml.safe_load(open(recipe(tmp_path)).read())
    source = {**doc["data"], "weight": 1}
    doc["data"] = {"mixture": [source, {"prompts": ["a", "b"], "weight": 1}], "eval_prompts": ["c"]}
    assert cli.main(["validate", str(write(tmp_path / "recipe.yaml", doc))]) == 2
    assert "data.mixture[0].source: a verifiers taskset trains alone (its rewards score every row); give it as data.source" in (
        capsys.readouterr().err
    )


def test_without_the_extra_one_line_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(verifiers_tasks, "installed", lambda: False)
    assert cli.main(["validate", recipe(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'recipe.yaml'}: data.source: names a verifiers taskset, and verifiers is not installed; "
        "pip install -e '.[verifiers]'"
    ]
