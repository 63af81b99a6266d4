"""What holding a shared prompt once in the generation cache (``run/shared_head.py``) costs against a copy in each row.

    python benchmarks/shared_head.py [--rounds 4] [--prefix 626] [--recipe recipes/guess.yaml]

On the recipe's model (SmolLM2 by default, from the local cache), side by side in one process, alternating:

- **one layer's attention** over a prefix of ``--prefix`` tokens and 250 of a row's own, bf16, one decoding step for 16
  and for 64 rows: ``shared_head.attend`` against transformers' ``sdpa`` attention over the copied cache (the
  fastest of ``--rounds`` rounds of 50 calls each);
- **a generate call** of 32 rows under bf16 autocast, 48 greedy tokens after 20 to 59 of their own, through
  ``prefix_cache.sharing`` with the prefix held once and with ``GRPO_EXT_PREFIX_ONCE=0`` (copied);
- **the logits** of 8 rows' first 4 greedy steps, in float32 and under bf16 autocast, against those of the copied
  cache in float32: the largest difference at the first step, where both saw the same tokens.
"""

import argparse
import functools
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def attention(prefix: int, rounds: int) -> None:
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from grpo_ext.run import shared_head

    class Layer:  # what sdpa's function reads of the attention module
        is_causal, num_key_value_groups, training = True, 3, False

    heads, groups, own, dim, bf16 = 9, 3, 250, 64, torch.bfloat16
    g = torch.Generator().manual_seed(0)
    for rows in (16, 64):

        def randn(*shape):
            return torch.randn(*shape, generator=g).to(bf16)

        query = randn(rows, heads, 1, dim)
        head_keys, head_values = randn(1, groups, prefix, dim), randn(1, groups, prefix, dim)
        keys, values = randn(rows, groups, own, dim), randn(rows, groups, own, dim)
        setattr(keys, shared_head.HEAD, (head_keys, head_values))
        additive = torch.zeros(rows, 1, 1, prefix + own)
        whole_keys = torch.cat([head_keys.expand(rows, -1, -1, -1), keys], 2)
        whole_values = torch.cat([head_values.expand(rows, -1, -1, -1), values], 2)
        keep = torch.ones(rows, 1, 1, prefix + own, dtype=torch.bool)
        contestants = {
            "held once": functools.partial(shared_head.attend, Layer(), query, keys, values, additive, scaling=dim**-0.5),
            "copied": functools.partial(
                sdpa_attention_forward, Layer(), query, whole_keys, whole_values, keep, scaling=dim**-0.5
            ),
        }
        best = {name: float("inf") for name in contestants}
        for r in range(rounds):
            for name, call in contestants.items() if r % 2 == 0 else reversed(contestants.items()):
                call()
                started = time.perf_counter()
                for _ in range(50):
                    call()
                best[name] = min(best[name], (time.perf_counter() - started) / 50 * 1000)
        print(
            f"attention, {rows} rows, one decoding step: held once {best['held once']:.2f} ms, copied "
            f"{best['copied']:.2f} ms a layer ({best['held once'] / best['copied']:.2f}x)"
        )


def generation(model, prefix: int, rounds: int) -> None:
    import torch
    from transformers import GenerationConfig

    from grpo_ext.run import prefix_cache, shared_head

    g = torch.Generator().manual_seed(0)
    head = torch.randint(3, 40000, (prefix,), generator=g).tolist()
    rows = [head + torch.randint(3, 40000, (20 + (i * 7) % 40,), generator=g).tolist() for i in range(32)]
    ids, mask = _left_padded(rows)
    config = GenerationConfig(max_new_tokens=48, min_new_tokens=48, do_sample=False, pad_token_id=0, disable_compile=True)
    seconds: dict[str, list[float]] = {"1": [], "0": []}
    for r in range(max(2, rounds // 2)):
        for once in ("1", "0") if r % 2 == 0 else ("0", "1"):
            os.environ[shared_head.OFF] = once
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), prefix_cache.sharing(model):
                started = time.perf_counter()
                model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
                seconds[once].append(time.perf_counter() - started)
    held, copied = min(seconds["1"]), min(seconds["0"])
    print(
        f"generate, 32 rows, 48 tokens after a {prefix}-token prefix: held once {held:.1f} s, copied {copied:.1f} s "
        f"({held / copied:.2f}x)"
    )


def logits(model, prefix: int) -> None:
    import torch
    from transformers import GenerationConfig

    from grpo_ext.run import prefix_cache, shared_head

    g = torch.Generator().manual_seed(1)
    head = torch.randint(3, 40000, (prefix,), generator=g).tolist()
    ids, mask = _left_padded([head + torch.randint(3, 40000, (n,), generator=g).tolist() for n in (3, 9, 1, 5, 12, 2, 7, 4)])
    config = GenerationConfig(
        max_new_tokens=4, do_sample=False, pad_token_id=0, disable_compile=True, output_scores=True, return_dict_in_generate=True
    )

    def first_step(once: str, bf16: bool):
        os.environ[shared_head.OFF] = once
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), prefix_cache.sharing(model):
            return model.generate(input_ids=ids, attention_mask=mask, generation_config=config).scores[0].float()

    reference = first_step("0", False)
    for bf16 in (False, True):
        held, copied = ((first_step(once, bf16) - reference).abs().max().item() for once in ("1", "0"))
        print(
            f"first-step logits {'under bf16 autocast' if bf16 else 'in float32'}, largest difference from the copied "
            f"cache in float32: held once {held:.4f}, copied {copied:.4f}"
        )


def _left_padded(rows: list[list[int]]):
    import torch

    width = max(map(len, rows))
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--prefix", type=int, default=626, help="tokens of the shared prefix (guess.yaml's: 626)")
    p.add_argument("--recipe", default="recipes/guess.yaml", help="the recipe whose model is loaded")
    args = p.parse_args()
    from grpo_ext.recipe import load
    from grpo_ext.verbs import evaluate

    recipe = load(args.recipe, [])
    model, _, _ = evaluate.load_model(recipe.model.name, recipe.model, lambda *_: None)
    model.eval()
    attention(args.prefix, args.rounds)
    generation(model, args.prefix, args.rounds)
    logits(model, args.prefix)


if __name__ == "__main__":
    main()
