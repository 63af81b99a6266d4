"""What a training step of a tool recipe costs against a step of the same task without tools, and its peak memory.

    python benchmarks/tool_steps.py [--rounds 2] [--steps 4] [--candidate "LABEL: key=value ..."] [--set key=value ...]
        [--single recipes/arith.yaml] [--tools recipes/arith-tools.yaml] [--other DIR]

Contestants, each a ``python -m grpo_ext.train`` of its own in a fresh process, ``--steps`` steps with no eval and
no pre-flight (``eval.enabled=false health.preflight=off``), into a scratch output_dir: ``single`` runs
``--single`` (arith: 2 prompts x 8 single replies a step), ``tools`` runs ``--tools`` as shipped (the same 16
completions a step, each a conversation with the calculator), each candidate is ``tools`` with recipe overrides,
e.g. ``--candidate "whole: groups.share_prompt=false"`` (every prompt encoded whole, for each row and after each
tool result) or, with an environment variable, ``--candidate "copied: GRPO_EXT_PREFIX_ONCE=0"``. ``--other DIR``
adds ``other``: ``tools`` run by the grpo_ext of another checkout (e.g. a ``git worktree`` of an earlier commit),
started in it. ``--set`` adds overrides to every contestant. The contestants alternate (A B C,
then C B A).

Per contestant, the medians over rounds: the mean seconds of a training step (``train_seconds`` of metrics.jsonl,
the first step left out as warm-up), the process's wall seconds (imports and model load included) and its peak
RSS; the ratios are to ``single``.
"""

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runner import environment, measured  # noqa: E402
from seeds import candidate  # noqa: E402  benchmarks/seeds.py: 'LABEL: key=value ...'


def run(recipe: str, words: list[str], steps: int, tree: Path = ROOT) -> dict:
    """One training run by the grpo_ext of ``tree`` (started there, so that its package is the one imported); its mean
    step seconds, wall seconds and peak RSS (GiB, the process's own, from wait4)."""
    overrides, variables = environment(words)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        cmd = [sys.executable, "-m", "grpo_ext.train", recipe, f"training.max_steps={steps}", "eval.enabled=false"]
        cmd += ["health.preflight=off", f"output_dir={out}", "training.save_strategy=no", "save_final=false", *overrides]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **variables}
        wall, rss = measured(cmd, tree, f"{recipe} {' '.join(overrides)}", env)
        seconds = [
            r["train_seconds"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "train_seconds" in r
        ]
    timed = [b - a for a, b in zip(seconds, seconds[1:], strict=False)]
    return {"step": statistics.fmean(timed), "wall": wall, "rss": rss}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=4, help="training steps a run (the first is left out)")
    p.add_argument("--single", default="recipes/arith.yaml")
    p.add_argument("--tools", default="recipes/arith-tools.yaml")
    p.add_argument("--candidate", type=candidate, action="append", default=[], help="'LABEL: key=value ...' on --tools")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every contestant")
    p.add_argument("--other", type=Path, metavar="DIR", help="another checkout whose grpo_ext runs --tools as 'other'")
    args = p.parse_args()
    if args.other is not None and not (args.other / "grpo_ext" / "__init__.py").is_file():
        p.error(f"--other: {args.other} holds no grpo_ext package; give a checkout (git worktree add DIR COMMIT)")
    if args.steps < 2:
        p.error("--steps: at least 2 (the first step is left out as warm-up)")
    contestants = [("single", args.single, [], ROOT), ("tools", args.tools, [], ROOT)]
    contestants += [(label, args.tools, sets, ROOT) for label, sets in args.candidate]
    contestants += [("other", args.tools, [], args.other.resolve())] if args.other is not None else []
    found: dict[str, list[dict]] = {label: [] for label, _, _, _ in contestants}
    for r in range(args.rounds):
        for label, recipe, sets, tree in contestants if r % 2 == 0 else contestants[::-1]:
            result = run(recipe, [*sets, *args.set], args.steps, tree)
            found[label].append(result)
            print(
                f"round {r + 1} {label:<10} step {result['step']:.1f} s, wall {result['wall']:.1f} s, "
                f"peak RSS {result['rss']:.2f} GiB  [{shlex.join([recipe, *sets, *args.set])}]"
                + ("" if tree == ROOT else f" in {tree}"),
                flush=True,
            )
    medians = {
        label: {k: statistics.median(x[k] for x in runs) for k in ("step", "wall", "rss")} for label, runs in found.items()
    }
    labels = list(found)
    print(f"\n{args.steps} steps a run, the first left out; medians of {args.rounds} runs")
    print(f"{'':<16}" + "".join(f"{label:>12}" for label in labels) + "".join(f"{label + '/single':>18}" for label in labels[1:]))
    for key, name in (("step", "step s"), ("wall", "wall s"), ("rss", "peak RSS GiB")):
        base = medians["single"][key]
        cells = "".join(f"{medians[label][key]:>12.2f}" for label in labels)
        print(f"{name:<16}" + cells + "".join(f"{medians[label][key] / base:>18.2f}" for label in labels[1:]))


if __name__ == "__main__":
    main()
