"""Does it matter whether GRPOConfig is built before or after the model loads? Step time, side by side.

Each contestant is a fresh process that builds the digit recipe's GRPOConfig and model in one order, then trains
``--steps`` steps (no eval, no checkpoints); the rounds alternate the two orders. Prints the median seconds per
step of each and the ratio model-first / config-first (grpo_ext builds the config first).

    python benchmarks/step_order.py --rounds 2 --steps 6
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDERS = ("config-first", "model-first")


def contestant(order: str, steps: int) -> None:
    """One run in this process: print the seconds per training step as JSON."""
    sys.path.insert(0, str(ROOT))
    from datasets import Dataset

    from grpo_ext.core import console
    from grpo_ext.recipe import load
    from grpo_ext.run import data, hardware, models, trainer
    from grpo_ext.verbs.train import behaviours

    console.quiet_third_parties(verbose=False)
    overrides = [f"training.max_steps={steps}", "training.save_strategy='no'", "output_dir=/tmp/grpo_ext_step_order"]
    recipe = load("digit", overrides)
    kwargs, _, _ = trainer.config_kwargs(recipe, trainer.config_fields())
    hardware.device_defaults(kwargs, recipe.model.quantization is not None)
    quiet = lambda _m: None  # noqa: E731
    if order == "config-first":
        args = trainer.make_config(kwargs)
        model, tokenizer, _ = models.load(recipe.model, recipe.base_dir, quiet)
    else:
        model, tokenizer, _ = models.load(recipe.model, recipe.base_dir, quiet)
        args = trainer.make_config(kwargs)
    chat = data.use_chat(recipe.data, tokenizer)
    rows = data.formatted(data.train_rows(recipe.data, recipe.base_dir), recipe.data, chat)
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=recipe.reward_funcs,
        args=args,
        train_dataset=Dataset.from_list(rows),
        tokenizer=tokenizer,
        behaviours=behaviours(recipe),
    )
    t0 = time.monotonic()
    grpo.train()
    print(json.dumps({"seconds_per_step": (time.monotonic() - t0) / steps}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--order", choices=ORDERS, help=argparse.SUPPRESS)  # one contestant, in a child process
    args = p.parse_args()
    if args.order:
        contestant(args.order, args.steps)
        return 0
    per_step = {order: [] for order in ORDERS}
    for i in range(args.rounds):
        for order in ORDERS if i % 2 == 0 else reversed(ORDERS):
            cmd = [sys.executable, __file__, "--order", order, "--steps", str(args.steps)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            per_step[order].append(json.loads(out)["seconds_per_step"])
            print(f"round {i + 1} {order:<13} {per_step[order][-1]:.2f} s/step", flush=True)
    medians = {order: statistics.median(v) for order, v in per_step.items()}
    print(f"median s/step: config-first {medians['config-first']:.2f}, model-first {medians['model-first']:.2f}")
    print(f"ratio model-first / config-first: {medians['model-first'] / medians['config-first']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
