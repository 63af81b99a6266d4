"""The loss pass alone, with a micro-batch's shared prompt encoded once (``groups.share_prompt``) and without, on the
real model and prompts of some hundreds of tokens; the two gradients compared.

    python benchmarks/shared_loss.py [--rounds 5] [--examples 24] [--completion-tokens 64]

SmolLM2-135M-Instruct in float32 (the default model, from its cache), a TRL trainer built as a run builds it
(``run.trainer``), one sampled micro-batch of 8 rows: two user questions, four completions each, under one system
message of ``--examples`` worked sums (24 give a prompt of about 400 tokens, a tool recipe's schema and worked
exchanges are about 480). Each round times TRL's ``compute_loss`` and its backward once each way, the two
alternating (shared first in odd rounds); prints every round, the medians, the ratio shared / whole, and the
largest difference between the two gradients relative to the largest gradient.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--examples", type=int, default=24, help="worked sums in the system message (its length)")
    p.add_argument("--completion-tokens", type=int, default=64)
    args = p.parse_args()

    import torch
    from datasets import Dataset

    from grpo_ext.recipe import load
    from grpo_ext.run import models, prefix_cache, trainer, trl_internals

    recipe = load(str(ROOT / "recipes" / "digit.yaml"), ["model.dtype=float32"])
    model, tokenizer, _ = models.load(recipe.model, recipe.base_dir, lambda *_: None)
    torch.manual_seed(0)
    system = " ".join(f"Example {i}: asked for {i} plus {i + 3}, the calculator says {2 * i + 3}." for i in range(args.examples))
    questions = ("What is 12 plus 30?", "Add 7 and 8, please.")
    prompts = [[{"role": "system", "content": system}, {"role": "user", "content": q}] for q in questions]
    with tempfile.TemporaryDirectory() as scratch:
        config = trainer.make_config(
            dict(
                output_dir=scratch,
                per_device_train_batch_size=8,
                num_generations=4,
                max_completion_length=args.completion_tokens,
                beta=0.0,
                use_cpu=True,
                report_to="none",
                seed=1,
                bf16=False,
                gradient_checkpointing=False,
            )
        )
        grpo = trainer.make_trainer(
            model=model,
            reward_funcs=[lambda completions, **_: [float(len(str(c)) % 3) for c in completions]],
            args=config,
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            tokenizer=tokenizer,
        )
        grpo.current_gradient_accumulation_steps = 1
        grpo.model.train()
        batch = trl_internals.sample_batch(grpo, [{"prompt": q} for q in prompts for _ in range(4)])
        rows = [ids[m.bool()].tolist() for ids, m in zip(batch["prompt_ids"], batch["prompt_mask"], strict=True)]
        shared = prefix_cache.shared_length(rows)
        widths = [len(r) for r in rows]
        print(
            f"micro-batch: 8 rows, prompts {min(widths)}-{max(widths)} tokens ({shared} shared), "
            f"completions up to {batch['completion_ids'].shape[1]} tokens",
            flush=True,
        )
        seconds: dict[bool, list[float]] = {True: [], False: []}
        grads: dict[bool, dict] = {}
        for i in range(args.rounds):
            for share in (True, False) if i % 2 == 0 else (False, True):
                grpo.share_prefix = share
                grpo.model.zero_grad(set_to_none=True)
                t0 = time.perf_counter()
                grpo.compute_loss(grpo.model, dict(batch)).backward()
                seconds[share].append(time.perf_counter() - t0)
                grads[share] = {n: q.grad.clone() for n, q in grpo.model.named_parameters() if q.grad is not None}
            print(f"round {i + 1}: shared {seconds[True][-1]:.2f} s, whole {seconds[False][-1]:.2f} s", flush=True)
    worst = max(float((grads[True][n] - grads[False][n]).abs().max()) for n in grads[False])
    largest = max(float(g.abs().max()) for g in grads[False].values())
    one, whole = statistics.median(seconds[True]), statistics.median(seconds[False])
    print(f"median loss pass (forward and backward): shared {one:.2f} s, whole {whole:.2f} s; shared/whole {one / whole:.2f}")
    print(f"gradients: largest difference {worst:.2e}, {worst / largest:.2e} of the largest gradient ({largest:.2e})")


if __name__ == "__main__":
    main()
