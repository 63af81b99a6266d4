"""What a decoding step of the default model costs in each arithmetic a run on a CPU can decode in.

    python benchmarks/decoding.py [--rows 16] [--prompt 80] [--tokens 32] [--rounds 2]

Contestants, alternating (A B C, then C B A), each one ``generate()`` of ``--rows`` rows of ``--prompt`` random
tokens, exactly ``--tokens`` new tokens sampled at temperature 0.7, in one process on the same weights:

- ``float32``: the float32 weights, no autocast;
- ``per token``: bf16 autocast without its cache, as a prepared model's forward runs in training on a CPU
  (accelerate's block around each forward, ``heap.uncached_casts``): every weight cast again at each token;
- ``cast once``: ``run.decoding.bf16_decoding``, what training's ``generate()`` and the eval use on a CPU with bf16:
  one cached autocast for the call, each weight cast once.

Prints each round's milliseconds a token, then the medians and their ratios to ``float32``.
"""

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--prompt", type=int, default=80, help="prompt tokens a row")
    p.add_argument("--tokens", type=int, default=32, help="new tokens a row")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_ext.run import decoding, model_cache
    from grpo_ext.settings import model_names

    where = model_cache.materialize(model_names.resolve("smollm2-135m-instruct", ROOT))
    tokenizer = AutoTokenizer.from_pretrained(where)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32).eval()
    ids = torch.randint(100, 20000, (args.rows, args.prompt), generator=torch.Generator().manual_seed(0))
    modes = {
        "float32": contextlib.nullcontext,
        "per token": lambda: torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False),
        "cast once": lambda: decoding.bf16_decoding(model, "cpu"),
    }

    def run(mode: str) -> float:
        torch.manual_seed(0)
        with torch.no_grad(), modes[mode]():
            start = time.perf_counter()
            model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                do_sample=True, temperature=0.7, top_k=0, pad_token_id=tokenizer.eos_token_id,
            )  # fmt: skip
            return (time.perf_counter() - start) / args.tokens * 1000

    run("float32")  # warm-up: the kernels' first calls
    found: dict[str, list[float]] = {mode: [] for mode in modes}
    for r in range(args.rounds):
        for mode in list(modes) if r % 2 == 0 else list(modes)[::-1]:
            found[mode].append(run(mode))
            print(f"round {r + 1} {mode:<10} {found[mode][-1]:.0f} ms a token", flush=True)
    base = statistics.median(found["float32"])
    print(f"\n{args.rows} rows, {args.prompt} prompt tokens, {args.tokens} new tokens; medians of {args.rounds} rounds")
    for mode, times in found.items():
        print(f"{mode:<10} {statistics.median(times):>6.0f} ms a token  {statistics.median(times) / base:>5.2f}x float32")


if __name__ == "__main__":
    main()
