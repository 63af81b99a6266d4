"""One optimizer step over SmolLM2-135M's weight shapes: torch's fused AdamW (what a recipe's default ``optim``
runs on a CPU) against bitsandbytes' 8-bit AdamW (``training.optim: adamw_bnb_8bit``, a quarter of the moments'
memory), alternating, on random weights and gradients (no model is loaded).

    python benchmarks/optimizer_step.py [--rounds 3] [--steps 3]

Prints each round's seconds a step for both, then the median of each and the ratio, and the moments' bytes.
"""

import argparse
import statistics
import time


def shapes() -> list[tuple[int, ...]]:
    """SmolLM2-135M: a 49,152 x 576 embedding (tied to the head), 30 layers of attention (9 query heads and 3
    key-value heads of 64) and an MLP of 1,536, and their norms."""
    layer = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536), (576,), (576,)]
    return [(49152, 576), *layer * 30, (576,)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3, help="timed steps a round, after one untimed")
    args = p.parse_args()
    import bitsandbytes as bnb
    import torch

    torch.manual_seed(0)
    weights = [torch.nn.Parameter(torch.randn(s) * 0.02) for s in shapes()]
    for w in weights:
        w.grad = torch.randn_like(w) * 1e-3
    print(f"{sum(w.numel() for w in weights) / 1e6:.1f}M weights")
    contestants = {
        "fused AdamW": torch.optim.AdamW(weights, lr=1e-5, fused=True),
        "8-bit AdamW": bnb.optim.AdamW8bit(weights, lr=1e-5),
    }
    seconds: dict[str, list[float]] = {name: [] for name in contestants}
    for r in range(args.rounds):
        order = list(contestants) if r % 2 == 0 else list(contestants)[::-1]
        for name in order:
            opt = contestants[name]
            opt.step()  # the first step allocates the moments
            t0 = time.perf_counter()
            for _ in range(args.steps):
                opt.step()
            seconds[name].append((time.perf_counter() - t0) / args.steps)
            print(f"round {r + 1} {name:<12} {seconds[name][-1]:.3f} s a step", flush=True)
    for name, opt in contestants.items():
        held = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
        print(f"{name:<12} median {statistics.median(seconds[name]):.3f} s a step, moments {held / 2**30:.2f} GiB")
    ratio = statistics.median(seconds["8-bit AdamW"]) / statistics.median(seconds["fused AdamW"])
    print(f"8-bit / fused: {ratio:.1f}x the time a step")


if __name__ == "__main__":
    main()
