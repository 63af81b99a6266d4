"""The run directory's records: curves.png panels, report.md, the before/after tables, the progress display."""

import io
import json
from types import SimpleNamespace

import pytest

from grpo_ext.results import plots, report
from grpo_ext.run import progress, rundir
from tests.helpers import TIMED

# Records shaped as TRL logs them (current names), three steps.
CURRENT = [
    {
        "step": s,
        "reward": 0.2 * s,
        "reward_std": 0.1,
        "rewards/digit_exact/mean": 0.1 * s,
        "rewards/digit_exact/std": 0.0,
        "rewards/digit_shaped/mean": 0.2 * s,
        "kl": 0.001 * s,
        "completions/mean_length": 8 - s,
        "completions/min_length": 1.0,
        "completions/max_length": 8.0,
        "entropy": 1.5 - 0.1 * s,
        "completions/clipped_ratio": 0.5,
        "clip_ratio/region_mean": 0.0,
    }
    for s in (1, 2, 3)
]
# Older TRL: per-reward means without /mean, completion_length, clip_ratio, no entropy.
OLDER = [
    {"step": s, "reward": 0.5, "rewards/digit_exact": 0.5, "completion_length": 4.0, "clip_ratio": 0.0, "kl": 0.01}
    for s in (1, 2)
]


def _panel(fig, title):
    return next(ax for ax in fig.axes if ax.get_title() == title)


@pytest.mark.parametrize(
    "records, beta, lines, missing",
    [
        # every panel drawn from current TRL names: reward; two functions; kl; length; entropy; two clip rates
        (
            CURRENT,
            0.04,
            {
                "reward (weighted sum)": 1,
                "each reward function (mean)": 2,
                "KL to the reference model": 1,
                "completion length (tokens)": 1,
                "policy entropy (nats per token)": 1,
                "clipped ratios": 2,
            },
            [],
        ),
        # older names are found; entropy absent says so
        (
            OLDER,
            0.04,
            {"each reward function (mean)": 1, "completion length (tokens)": 1, "clipped ratios": 1},
            ["policy entropy (nats per token)"],
        ),
        # beta 0: no KL logged, the panel says why
        (
            [{k: v for k, v in r.items() if k != "kl"} for r in CURRENT],
            0.0,
            {"reward (weighted sum)": 1},
            ["KL to the reference model"],
        ),
    ],
)
def test_curve_panels(records, beta, lines, missing):
    fig = plots.figure(records, "t", beta=beta)
    assert len(fig.axes) == 6
    for title, count in lines.items():
        assert len(_panel(fig, title).get_lines()) == count, title
    for title in missing:
        ax = _panel(fig, title)
        assert not ax.get_lines() and ax.texts, title
    if beta == 0.0:
        assert "beta is 0" in _panel(fig, "KL to the reference model").texts[0].get_text()


def test_curves_png_written(tmp_path):
    dest = plots.draw_curves(CURRENT, tmp_path / "curves.png", "run")
    assert dest.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and dest.stat().st_size > 20_000


def test_read_metrics_skips_cut_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n" + '{"step": 2, "rew')  # interrupted mid-write
    assert rundir.read_metrics(path) == [{"step": 1, "reward": 0.5}]
    assert rundir.read_metrics(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize(
    "keys, expected",
    [
        (["rewards/a/mean", "rewards/a/std"], {"a": "rewards/a/mean"}),  # current TRL
        (["rewards/a", "reward", "reward_std"], {"a": "rewards/a"}),  # older TRL
        (["rewards/my.mod:fn/mean"], {"my.mod:fn": "rewards/my.mod:fn/mean"}),  # a name with dots and colons
    ],
)
def test_reward_function_keys(keys, expected):
    assert plots.reward_function_keys([dict.fromkeys(keys, 0.0)]) == expected


BEFORE = {
    "rewards": {"digit_exact": {"mean": 0.0, "pass_rate": 0.0}, "digit_shaped": {"mean": 0.07, "pass_rate": 0.0}},
    "mean_length": 7.9,
    "prompts": 8,
    "seconds": 4.9,
    "examples": [{"prompt": "One digit?", "completions": ["Sure | 7\nok", "5"]}],
}
AFTER = {
    "rewards": {"digit_exact": {"mean": 1.0, "pass_rate": 1.0}, "digit_shaped": {"mean": None, "pass_rate": None}},
    "mean_length": 2.0,
    "prompts": 8,
    "seconds": 4.4,
    "examples": [{"prompt": "One digit?", "completions": ["7", "3"]}],
}


@pytest.mark.parametrize(
    "before, after, expected",
    [
        # both evals: one row per reward, then lengths; a reward nobody judged shows "-"
        (BEFORE, AFTER, ["digit_exact 0.000 0.000 1.000 1.000", "digit_shaped 0.070 0.000 - -", "mean length (tokens) 7.9 2.0"]),
        # no eval before (eval.enabled false then re-run): before columns are "-"
        (None, AFTER, ["digit_exact - - 1.000 1.000"]),
        # no eval at all: no table
        (None, None, []),
    ],
)
def test_eval_table(before, after, expected):
    rows = [" ".join(line.split()) for line in report.score_table({"before": before, "after": after})[2:]]
    assert rows[: len(expected)] == expected


def test_eval_markdown_rows():
    lines = report.score_markdown({"before": BEFORE, "after": AFTER})
    assert lines[2] == "| digit_exact | 0.000 | 0.000 | 1.000 | 1.000 |"
    assert lines[-1] == "| mean completion length (tokens) | 7.9 | | 2.0 | |"


@pytest.mark.parametrize(
    "text, cell",
    [
        ("7", '`"7"`'),  # quoted, so whitespace would show
        (" 7\n", '`" 7\\n"`'),  # a newline stays visible and the cell stays on one line
        ("a|b", '`"a\\|b"`'),  # a pipe does not split the table cell
        ("`x`", "`\"'x'\"`"),  # a backtick does not end the code span
    ],
)
def test_md_text(text, cell):
    assert report.md_text(text) == cell


def test_report_markdown(tmp_path):
    (tmp_path / "curves.png").write_bytes(b"png")
    summary = {
        "recipe": "recipes/digit.yaml",
        "model": "catalog alias",
        "status": "completed",
        "steps": 16,
        "train_seconds": 160.0,
        "reward_first": 0.087,
        "reward_last": 2.0,
        "eval_before": BEFORE,
        "eval_after": AFTER,
        "versions": {"trl": "1.16.0"},
        "memory": {"peak_rss_mib": 1500},
    }
    run_recipe = {"rewards": [{"name": "digit_exact", "weight": 1.0}], "eval": {"samples": 8, "pass_threshold": 1.0}}
    text = report.report_markdown(tmp_path, summary, run_recipe, [{"step": 1, "step_time": 10.0}])
    for part in (
        "- **Status:** completed",
        "training time 160 s (10.0 s/step)",
        "0.087 at the first step, 2.000 at the last",
        "8 prompts x 8 samples",
        "| digit_exact | 0.000 | 0.000 | 1.000 | 1.000 |",
        "](curves.png)",
        '| `"Sure \\| 7\\nok"` | `"7"` |',
        "| eval before | 4.9 s |",
        "| peak memory (process RSS) | 1500 MiB |",
        "| trl | 1.16.0 |",
        "digit_exact (weight 1.0)",
    ):
        assert part in text, part


def test_report_of_failed_run_without_steps(tmp_path):
    summary = {
        "recipe": "r.yaml",
        "model": "m",
        "status": "failed",
        "error": "ValueError: boom",
        "steps": 0,
        "train_seconds": None,
        "eval_before": None,
        "eval_after": None,
        "versions": {},
    }
    text = report.report_markdown(tmp_path, summary, {}, [])
    assert "- **Status:** failed (ValueError: boom)" in text and "No curves" in text and "No eval ran" in text


def _drive(callback, steps=2, start=0):
    args = SimpleNamespace()
    state = SimpleNamespace(global_step=start, max_steps=steps)
    callback.on_train_begin(args, state, None)
    for step in range(start + 1, steps + 1):
        state.global_step = step
        callback.on_log(
            args,
            state,
            None,
            logs={"reward": 0.5 * step, "rewards/digit_exact/mean": 0.25, "kl": 0.002, "completions/mean_length": 3.0},
        )
    callback.on_train_end(args, state, None)


def test_progress_lines_when_not_a_terminal(tmp_path):
    lines = []
    _drive(progress.MetricsLog(tmp_path / "m.jsonl", True, lines.append, live=False))
    assert len(lines) == 2
    assert lines[1].startswith("step 2/2  reward 1.000  digit_exact 0.250  kl 0.0020  len 3.0  ")
    assert [json.loads(x)["step"] for x in (tmp_path / "m.jsonl").read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize(
    "trained_before, start, steps",
    [
        (0.0, 0, 2),  # a fresh run: the time since training began
        (96.0, 8, 12),  # resumed at step 8 after 96 s: s/step counts the 8 steps before, not only the time since
        (314.0, 3, 4),  # resumed near the end: the one step left is estimated from every step so far
    ],
)
@pytest.mark.parametrize("timed", TIMED)
def test_progress_and_metrics_count_the_steps_before_a_resume(timed, trained_before, start, steps, tmp_path):
    lines = []
    log = progress.MetricsLog(tmp_path / "m.jsonl", True, lines.append, live=False, trained_before=trained_before)
    _drive(log, steps=steps, start=start)
    records = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(start + 1, steps + 1))
    assert all(trained_before <= r["train_seconds"] for r in records)
    if timed:
        assert all(r["train_seconds"] < trained_before + 1 for r in records)  # this test's own steps: instant
    per_step = records[-1]["train_seconds"] / steps
    assert lines[-1].endswith(f"  {per_step:.1f} s/step, 0 s left")
    assert trained_before <= log.train_seconds()
    if timed:
        assert log.train_seconds() < trained_before + 1


def test_report_says_a_run_was_resumed(tmp_path):
    summary = {"status": "completed", "steps": 30, "train_seconds": 60.0, "resumed_at": [8, 20]}
    text = report.report_markdown(tmp_path, summary, {}, [])
    assert "- **Steps:** 30; training time 60 s (2.0 s/step)" in text
    assert "- **Resumed** from the checkpoint of step 8, step 20; the training time counts every step" in text


def test_progress_bar_on_a_terminal(tmp_path):
    from rich.console import Console

    out = io.StringIO()
    lines = []
    _drive(
        progress.MetricsLog(
            tmp_path / "m.jsonl", True, lines.append, live=True, console=Console(file=out, force_terminal=True, width=200)
        )
    )
    assert lines == []  # the bar replaces the per-step lines
    shown = out.getvalue()
    assert "2/2" in shown and "reward 1.000" in shown and "kl 0.0020" in shown


def test_other_processes_show_nothing(tmp_path):
    lines = []
    _drive(progress.MetricsLog(tmp_path / "m.jsonl", False, lines.append, live=False))
    assert lines == [] and not (tmp_path / "m.jsonl").exists()


def test_report_when_the_last_step_scored_nothing(tmp_path):
    """A step whose rewards all scored None logs a None reward; the report shows '-' for it."""
    summary = {"status": "completed", "steps": 2, "train_seconds": 4.0, "reward_first": 0.5, "reward_last": None}
    text = report.report_markdown(tmp_path, summary, {}, [])
    assert "- **Reward during training:** 0.500 at the first step, - at the last" in text


@pytest.mark.parametrize(
    "record,line",
    [
        # a metrics record (reward_none/NAME from the reward meter), the progress line
        ({"reward": 0.5, "rewards/math_accuracy/mean": 0.75, "reward_none/math_accuracy": 2}, "math_accuracy 0.750 (2 None)"),
        (
            {"reward": 0.5, "rewards/math_accuracy/mean": 0.75, "reward_none/math_accuracy": 0},
            "math_accuracy 0.750",
        ),  # all judged
        ({"reward": None, "rewards/judge/mean": None, "reward_none/judge": 8}, "judge - (8 None)"),  # none judged
        ({"reward": 0.5, "rewards/digit_exact/mean": 0.5}, "digit_exact 0.500"),  # a log from before the count
    ],
)
def test_progress_line_counts_samples_not_judged(record, line):
    assert progress.step_stats(record).split("  ", 1)[1] == line


def test_progress_line_says_the_share_of_rows_left_out():
    assert progress.step_stats({"reward": 0.5, "skipped_rows": 0.75}, each_reward=False) == "reward 0.500  skipped 75%"
    assert progress.step_stats({"reward": 0.5, "skipped_rows": 0.0}, each_reward=False) == "reward 0.500"  # nothing left out
