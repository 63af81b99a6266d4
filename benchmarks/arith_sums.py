"""What a model knows of the sums the arith recipe's problems ask, and how many held-out sums training shows.

    python benchmarks/arith_sums.py [--recipe recipes/arith.yaml] [--model smollm2-135m-instruct] [--model RUN_DIR ...]

The first lines count the distinct sums (``7 + 4``, ``11 - 2``) among the recipe's generated training and held-out
problems, and the held-out problems whose sum is also a training problem's. Then each distinct sum is asked bare, as
a chat question (``What is 7 + 4?``, no system prompt), through ``grpo-ext eval`` with ``math_accuracy``: one greedy
sample each, of at most 96 tokens, the model's own best answer. A trained run directory can be a ``--model`` too;
beside the base model its score says whether training taught the sums themselves. No timing: the numbers are pass
rates.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ext.recipe import load  # noqa: E402

MAX_NEW_TOKENS = 96  # room for the chatty replies of an instruct model before its number

SUM = re.compile(r"(\d+) ([+-]) (\d+) = (\d+)")
OPS = {"+": "additions", "-": "subtractions"}


def sums(rows: list[dict]) -> list[tuple[int, str, int, int]]:
    """The sum of each generated row, read from its worked answer (``Ava has 7 + 4 = 11 apples.``)."""
    found = [SUM.search(r["answer"]) for r in rows]
    return [(int(m[1]), m[2], int(m[3]), int(m[4])) for m in found]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="recipes/arith.yaml")
    p.add_argument("--model", action="append", help="catalog alias, path or run directory; repeatable (default: the recipe's)")
    args = p.parse_args()
    recipe = load(args.recipe)
    train_rows, held_rows = recipe.data.generated()
    train, held = sums(train_rows), sums(held_rows)
    trained = set(train)
    distinct = sorted(trained | set(held))
    print(
        f"{args.recipe}: {len(train)} training problems ({len(trained)} distinct sums), "
        f"{len(held)} held-out problems ({len(set(held))} distinct sums)"
    )
    print(f"held-out problems whose sum is also a training problem's: {sum(s in trained for s in held)} of {len(held)}")
    models = args.model or [recipe.model.name]
    with tempfile.TemporaryDirectory() as tmp:
        questions = Path(tmp, "sums.jsonl")
        questions.write_text(
            "".join(json.dumps({"prompt": f"What is {a} {op} {b}?", "answer": f"#### {c}"}) + "\n" for a, op, b, c in distinct),
            encoding="utf-8",
        )
        cmd = [sys.executable, "-m", "grpo_ext", "eval", str(Path(args.recipe).resolve()), f"--out={tmp}/eval"]
        cmd += [f"--model={m}" for m in models]
        cmd += [f"data.eval_file={questions}", "data.system_prompt=null", "rewards=[math_accuracy]"]
        cmd += ["eval.samples=1", "eval.temperature=0", f"eval.max_new_tokens={MAX_NEW_TOKENS}", "eval.pass_at=[1]"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
        result = json.loads(Path(tmp, "eval", "eval.json").read_text(encoding="utf-8"))
    print(f"{len(distinct)} distinct sums asked bare, one greedy answer each (math_accuracy):")
    for label, scored in result["models"].items():
        per_prompt = scored["rewards"]["math_accuracy"]["per_prompt"]
        passed = [scores[0] >= result["pass_threshold"] for scores in per_prompt]  # the eval's own rule
        shown = ", ".join(
            f"{sum(ok for ok, s in zip(passed, distinct, strict=True) if s[1] == op)}/{sum(s[1] == op for s in distinct)} {name}"
            for op, name in OPS.items()
        )
        print(f"  {label}: {sum(passed)}/{len(passed)} right ({shown}), replies {scored['mean_length']} tokens on average")


if __name__ == "__main__":
    main()
