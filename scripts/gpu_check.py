"""Train one recipe for a few steps and print its step time and peak memory next to `grpo-ext plan`'s estimate.

    python scripts/gpu_check.py recipes/digit-lora.yaml --steps 5 --out /tmp/check/digit-lora [--device cpu]

On CUDA the recipe runs in bf16 and the peak is torch's max allocated / reserved GPU memory; with
``--device cpu`` it runs in float32 and the peak is the process's maximum resident set size. The numbers, the
plan's rows and the ratio plan / measured go to OUT/memory.json as well, so that a first GPU run calibrates
the planner.
"""

import argparse
import json
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GIB = 1024**3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--out", required=True, help="run directory (must not hold a run)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = p.parse_args()

    import torch

    import grpo_ext
    from grpo_ext.run import memory

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"{args.recipe}: no CUDA device; pass --device cpu to check the script on a CPU", file=sys.stderr)
        return 2
    overrides = [
        f"training.max_steps={args.steps}",
        "training.save_strategy='no'",
        "eval.enabled=false",
        f"output_dir={args.out}",
    ]
    if args.device == "cuda":
        overrides += ["model.dtype=bfloat16", "training.bf16=true"]
    try:
        recipe = grpo_ext.load_recipe(args.recipe, overrides)
        folder = memory.config_source(recipe.model, recipe.base_dir)
        longest, shared, _ = memory.prompt_tokens(recipe, folder)  # as grpo-ext plan counts them
        rows = memory.estimate(recipe, memory.model_shape(folder), longest, args.device, shared=shared)
        estimate = memory.total(rows)
        grpo_ext.train(recipe)
    except grpo_ext.RecipeError as exc:
        print("\n".join(exc.lines()), file=sys.stderr)
        return 2
    except grpo_ext.RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    lines = [json.loads(line) for line in (Path(args.out) / "metrics.jsonl").read_text().splitlines()]
    times = [line["step_time"] for line in lines[1:] if "step_time" in line] or [lines[0].get("step_time", float("nan"))]
    if args.device == "cuda":
        allocated, reserved = torch.cuda.max_memory_allocated() / GIB, torch.cuda.max_memory_reserved() / GIB
        measured = {"max_memory_allocated_gib": round(allocated, 3), "max_memory_reserved_gib": round(reserved, 3)}
        peak, against = f"peak {allocated:.2f} GiB allocated, {reserved:.2f} GiB reserved", reserved
    else:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
        measured = {"peak_rss_gib": round(rss, 3)}
        peak, against = f"peak RSS {rss:.2f} GiB", rss
    name = Path(args.recipe).stem
    ratio = estimate / GIB / against
    record = {"recipe": args.recipe, "device": args.device, "steps": len(lines), **measured, "plan_gib": round(estimate / GIB, 3)}
    record |= {"plan_over_measured": round(ratio, 3), "plan_rows_gib": {row: round(n / GIB, 3) for row, n, _ in rows}}
    (Path(args.out) / "memory.json").write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"{name:<12} {args.device}: {len(lines)} steps, {statistics.median(times):.2f} s/step (median after the first), "
        f"{peak}; plan {estimate / GIB:.2f} GiB ({ratio:.2f} x {'reserved' if args.device == 'cuda' else 'RSS'})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
