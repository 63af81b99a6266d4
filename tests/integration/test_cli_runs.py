"""The catalog verbs end to end: the README's flow onto a tiny model, and the three front doors as commands."""

from grpo_ext import cli
from grpo_ext.core import catalog


def test_cp_then_edit_validate_train(tiny_model, tmp_path, monkeypatch, capsys, no_hub):
    """The README's flow: copy a shipped recipe, edit it, validate it, train it."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["cp", "digit", "my.yaml"]) == 0
    assert "grpo-ext validate my.yaml && python -m grpo_ext.train my.yaml" in capsys.readouterr().out
    shipped = catalog.shipped_recipes()["digit"].read_text()  # the same, with the schema line naming the shipped file
    assert (tmp_path / "my.yaml").read_text() == catalog.point_at_schema(shipped, catalog.schema_file().resolve().as_uri())
    assert cli.main(["cp", "digit", "my.yaml"]) == 2  # never overwrites by accident
    assert "my.yaml exists; pass --force" in capsys.readouterr().err

    text = (tmp_path / "my.yaml").read_text()  # edit as a user would in an editor: comments stay
    text = text.replace("name: smollm2-135m-instruct", f"name: {tiny_model}").replace("max_steps: 16", "max_steps: 1")
    text = text.replace("output_dir: runs/digit", "output_dir: runs/mine").replace("samples: 8 ", "samples: 1 ")
    (tmp_path / "my.yaml").write_text(text.replace("per_device_train_batch_size: 16", "per_device_train_batch_size: 8"))
    assert cli.main(["validate", "my.yaml"]) == 0
    assert capsys.readouterr().out == "my.yaml: ok\n"
    assert cli.main(["train", "my.yaml"]) == 0
    assert {"curves.png", "report.md", "summary.json"} <= {p.name for p in (tmp_path / "runs" / "mine").iterdir()}


def test_one_front_door():
    """`python -m grpo_ext.train`, `python -m grpo_ext train` (the grpo-ext script) and the API print the same."""
    import contextlib
    import io
    import subprocess
    import sys

    import grpo_ext

    commands = [[sys.executable, "-m", "grpo_ext.train", "digit"], [sys.executable, "-m", "grpo_ext", "train", "digit"]]
    outs = [subprocess.run([*c, "--dry-run", "seed=3"], capture_output=True, text=True, check=True).stdout for c in commands]
    api = io.StringIO()
    with contextlib.redirect_stdout(api):
        grpo_ext.dry_run(grpo_ext.load_recipe("digit", ["seed=3"]))
    assert outs[0] == outs[1] == api.getvalue() and "  seed                             3" in api.getvalue()
