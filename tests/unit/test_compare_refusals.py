"""``grpo-ext eval`` refusing a bad recipe before any model loads, and its table when a reward judged nothing."""

from grpo_ext import cli
from grpo_ext.results import report


def test_eval_bad_recipe_writes_nothing(digit_doc, write_recipe, tmp_path, capsys):
    digit_doc["rewards"] = ["digit_exat"]
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    assert cli.main(["eval", str(write_recipe(digit_doc)), "--model", "smollm2-135m-instruct"]) == 2
    assert "rewards[0].name: unknown reward 'digit_exat'; did you mean 'digit_exact'?" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_table_with_a_reward_that_judged_nothing():
    result = {
        "models": {
            "a": {"rewards": {"r": {"mean": 0.5, "pass_rate": 0.25}}, "mean_length": 3.0},
            "b": {"rewards": {"r": {"mean": None, "pass_rate": None}}, "mean_length": 1.0},
        }
    }
    rows = [line.split() for line in report.score_table(result["models"])]
    assert rows[2] == ["r", "0.500", "0.250", "-", "-"]
    assert rows[3] == ["mean", "length", "(tokens)", "3.0", "1.0"]
