"""`grpo-ext plan` beside published GPU memory measurements: the plan, the figure, and their ratio.

Each setting is a recipe in benchmarks/plan_check/ (its header names the source); it is planned with no hub
access (the shapes come from grpo_ext/settings/shapes.py) for its number of GPUs and sharding.
No published GRPO measurement states every setting, so these are the nearest measured training settings:
LoRA, QLoRA and full fine-tuning (SFT), single GPU and sharded. Rows the measured run has no counterpart of
are left out of the plan, and the table says which.

    python benchmarks/plan_check.py
"""

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks" / "plan_check"
GIB = 1024**3
PEFT_RESULTS = "huggingface/peft@51c2ff66 method_comparison/MetaMathQA/results/"
PEFT_DOCS = "huggingface/peft@781cac46 docs/source/accelerate/"


@dataclass(frozen=True)
class Check:
    recipe: str  # file in benchmarks/plan_check/
    gpus: int
    sharding: str
    published_gib: float
    measured: str  # what the figure is
    source: str
    left_out: tuple[str, ...] = ()  # plan rows the measured run has no counterpart of


# torch's peak reserved minus its reserved at start: no CUDA context
RESERVED = "max_memory_reserved - start (bytes in the results file)"
CHECKS = [
    Check("peft-llama3.2-3b-full.yaml", 1, "ddp", 38868615168 / GIB, RESERVED,
          PEFT_RESULTS + "full-finetuning--llama-3.2-3B-lr_0.00001.json", ("CUDA context",)),
    Check("peft-llama3.2-3b-lora-r32.yaml", 1, "ddp", 22292725760 / GIB, RESERVED,
          PEFT_RESULTS + "lora--llama-3.2-3B-rank32.json", ("CUDA context",)),
    Check("peft-llama3.2-3b-lora-r64.yaml", 1, "ddp", 22552772608 / GIB, RESERVED,
          PEFT_RESULTS + "lora--llama-3.2-3B-rank64.json", ("CUDA context",)),
    Check("peft-llama2-70b-lora-zero3.yaml", 8, "zero3", 64.0, "'64 GB (80%)' per GPU, nvidia-smi",
          PEFT_DOCS + "deepspeed.md"),
    Check("peft-llama2-70b-qlora-zero3.yaml", 2, "zero3", 36.6, "'36.6 GB' per GPU",
          PEFT_DOCS + "deepspeed.md"),
    Check("peft-llama2-70b-lora-fsdp.yaml", 8, "fsdp", 76.0, "'72-80 GB (90-98%)' per GPU, nvidia-smi; the middle",
          PEFT_DOCS + "fsdp.md"),
    Check("peft-llama2-70b-qlora-fsdp.yaml", 2, "fsdp", 35.6, "'35.6 GB/ GPU' without CPU offloading",
          PEFT_DOCS + "fsdp.md"),
]  # fmt: skip


def planned(check: Check) -> float:
    """The plan's peak per process, in GiB, without the rows the measured run has no counterpart of."""
    from grpo_ext.recipe import load
    from grpo_ext.run import memory
    from grpo_ext.run.gpu_share import Launch
    from grpo_ext.settings import shapes

    recipe = load(str(HERE / check.recipe))
    where = shapes.config_fields(recipe.model.name)  # the table, even where a hub cache holds the config
    shape = memory.model_shape(where)
    prompt = memory.prompt_tokens(recipe, where)[0]
    # SFT's loss takes the logits of every token at once, as GRPO's did before TRL 1.15 (see logits_bytes)
    rows = memory.estimate(recipe, shape, prompt, "cuda", Launch(check.gpus, check.sharding), logprobs="full")
    return memory.total(r for r in rows if r[0] not in check.left_out) / GIB


def ratios() -> list[tuple[Check, float, float]]:
    """(check, plan GiB, plan / published) for every check."""
    return [(check, gib, gib / check.published_gib) for check in CHECKS for gib in [planned(check)]]


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from grpo_ext.core import console

    console.quiet_third_parties(verbose=False)
    results = ratios()
    print(f"{'recipe':<34} {'launch':<9} {'plan GiB':>8} {'published':>9} {'ratio':>6}  left out of the plan")
    for check, gib, ratio in results:
        launch = f"{check.gpus}x {check.sharding}"
        print(
            f"{check.recipe:<34} {launch:<9} {gib:>8.2f} {check.published_gib:>9.2f} {ratio:>6.2f}  {', '.join(check.left_out)}"
        )
    errors = [abs(r - 1) for _, _, r in results]
    print(f"median absolute error {statistics.median(errors):.1%}, largest {max(errors):.1%} ({len(results)} measurements)")


if __name__ == "__main__":
    main()
