"""``python -m grpo_ext.tiny``: the folder and the shape of the tiny model it builds, from its command line (the build
itself is replaced: it needs torch; the tests that train build the model through ``tiny.build``)."""

import pytest

from grpo_ext.testing import tiny

COMMANDS = [
    # (the command line after python -m grpo_ext.tiny, what build is given)
    (["out"], ("out", False, 256)),  # the plumbing tests' model
    (["out", "--chatml"], ("out", True, 256)),  # ChatML, as SmolLM2: a recipe with tools gets grpo_ext's tool template
    (["out", "--context", "2048"], ("out", False, 2048)),  # room for a tool's schema in the prompt
    (["--chatml", "--context", "1024", "out"], ("out", True, 1024)),  # the options before the folder
]


@pytest.mark.parametrize(("argv", "built"), COMMANDS)
def test_the_command_line_shapes_the_model(argv, built, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(tiny, "build", lambda path, *, chatml, context: calls.append((path, chatml, context)) or path)
    assert tiny.main(argv) == 0
    assert calls == [built] and capsys.readouterr().out == "out\n"


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["--help"], 0),  # a question, never a folder to build in
        ([], 2),  # no folder
        (["out", "--context", "many"], 2),  # not a number
        (["a", "b"], 2),  # one folder
    ],
)
def test_help_and_bad_command_lines_build_nothing(argv, status, monkeypatch, capsys):
    monkeypatch.setattr(tiny, "build", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(SystemExit) as exited:
        tiny.main(argv)
    assert exited.value.code == status
    assert "usage: python -m grpo_ext.tiny [-h] [--chatml] [--context N] DIR" in capsys.readouterr()[status != 0]
