"""Every recipe command's output, in one file, to diff before and after a change that must not change any of them.

    python scripts/recipe_outputs.py /tmp/before.txt            # on the tree this script is in
    python scripts/recipe_outputs.py /tmp/after.txt && diff /tmp/before.txt /tmp/after.txt

For each shipped recipe (recipes/*.yaml): ``grpo-ext validate``, ``train --dry-run``, ``train --dry-run --quick`` and
``plan``; then ``train`` and ``validate`` of the bad recipes of ``tests/bad_recipes.py`` (a fixed, derandomized draw of
``--cases`` of them) and of a table of mixtures broken in a source; each command's exit status, stdout and stderr.
The commands run in-process, through ``grpo_ext.cli.main``, with the package of the tree this script is in; paths of
the scratch folder are written as ``<tmp>``, of the tree as ``<root>``.
"""

import argparse
import contextlib
import copy
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this tree's grpo_ext and tests, whichever is installed

import yaml  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from grpo_ext import cli  # noqa: E402
from tests.bad_recipes import BAD_RECIPES, DIGIT, write  # noqa: E402

PROMPTS = {"prompts": DIGIT["data"]["prompts"], "eval_prompts": DIGIT["data"]["eval_prompts"]}
ARITH = {"source": "arith", "source_args": {"train": 8, "held_out": 2}}

# (name, data: section) of a mixture broken in one of its sources, or in what it holds out for the whole mixture
MIXTURES = [
    ("a missing file", {"mixture": [{"file": "missing.jsonl", "weight": 1}, {**ARITH, "weight": 1}]}),
    ("a file without the prompt column", {"mixture": [{"file": "rows.jsonl", "weight": 1}, {**ARITH, "weight": 1}]}),
    (
        "a template naming a column the file lacks",
        {"mixture": [{"file": "rows.jsonl", "prompt_template": "{q} {nope}", "weight": 1}, {**ARITH, "weight": 1}]},
    ),
    ("a bad row", {"mixture": [{"file": "bad.jsonl", "prompt_column": "q", "weight": 1}, {**ARITH, "weight": 1}]}),
    ("an empty prompt list", {"mixture": [{"prompts": [], "weight": 1}, {**ARITH, "weight": 1}]}),
    ("a bad eval prompt", {"mixture": [{"prompts": ["a"], "eval_prompts": [3], "weight": 1}, {**ARITH, "weight": 1}]}),
    ("two sources of rows", {"mixture": [{**PROMPTS, "source": "arith", "weight": 1}, {**ARITH, "weight": 1}]}),
    ("a bad generator", {"mixture": [{"source": "nope", "weight": 1}, {"source": "arith", "source_args": {"x": 1}, "rows": 3}]}),
    ("eval_split of no hub", {"mixture": [{"file": "rows.jsonl", "prompt_column": "q", "eval_split": "test", "weight": 1}]}),
    ("the rows a reward needs", {"mixture": [{"file": "rows.jsonl", "prompt_column": "q", "weight": 1}, {**PROMPTS, "rows": 2}]}),
    ("a source column", {"mixture": [{"file": "source.jsonl", "prompt_column": "q", "weight": 1}, {**ARITH, "weight": 1}]}),
    ("the whole mixture's eval file", {"eval_file": "source.jsonl", "mixture": [{**ARITH, "weight": 1}]}),
    ("a bad examples turn", {"mixture": [{**PROMPTS, "examples": [{"role": "user"}], "weight": 1}, {**ARITH, "weight": 1}]}),
    ("a bad key in a source", {"mixture": [{**PROMPTS, "prompt_column": 3, "weight": "x"}, {**ARITH, "chat": True}]}),
    ("held out and eval_size", {"mixture": [{"file": "rows.jsonl", "prompt_column": "q", "eval_fraction": 2, "weight": 1}]}),
]
FILES = {  # the data files the mixtures above read, beside the recipe
    "rows.jsonl": '{"q": "2+2?", "answer": "4"}\n{"q": "3+3?", "answer": "6"}\n',
    "bad.jsonl": '{"q": "2+2?"}\n{"q": \n',
    "source.jsonl": '{"q": "2+2?", "prompt": "x", "source": "a"}\n',
}


def run(argv: list[str], tmp: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(tmp)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:
                rc = exc.code
    finally:
        os.chdir(cwd)
    text = f"$ grpo-ext {' '.join(argv)}\nexit {rc}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"
    return text.replace(str(tmp), "<tmp>").replace(str(ROOT), "<root>")


def fresh(tmp: Path) -> None:
    for child in tmp.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()


def bad_cases(n: int) -> list:
    cases = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(BAD_RECIPES)
    def collect(case):
        cases.append(case)

    collect()
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--cases", type=int, default=300, help="bad recipes drawn from tests/bad_recipes.py")
    args = ap.parse_args()
    parts = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name).resolve()
        for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
            for argv in (
                ["validate", str(recipe)],
                ["train", str(recipe), "--dry-run"],
                ["train", str(recipe), "--dry-run", "--quick"],
            ):
                parts.append(run(argv, tmp))
            parts.append(run(["plan", str(recipe), "--gpu-memory", "24GiB"], tmp))
        for i, (doc, _fragment, overrides) in enumerate(bad_cases(args.cases)):
            fresh(tmp)
            path = write(tmp, doc)
            parts.append(f"### bad recipe {i}\n" + run(["train", str(path), *overrides], tmp))
            fresh(tmp)
            path = write(tmp, doc)
            parts.append(run(["validate", str(path), *overrides], tmp))
        for what, section in MIXTURES:
            fresh(tmp)
            for file, text in FILES.items():
                (tmp / file).write_text(text, encoding="utf-8")
            doc = copy.deepcopy(DIGIT)
            doc["data"] = section
            doc["rewards"] = ["digit_exact", "math_accuracy"]
            path = tmp / "recipe.yaml"
            path.write_text(yaml.safe_dump({**doc, "output_dir": str(tmp / "run")}), encoding="utf-8")
            parts.append(f"### mixture: {what}\n" + run(["validate", str(path)], tmp))
            parts.append(run(["train", str(path), "--dry-run"], tmp))
    args.out.write_text("\n".join(parts), encoding="utf-8")
    print(f"{len(parts)} commands' output in {args.out}")


if __name__ == "__main__":
    main()
