"""What one training process holds of a GPU it shares: vLLM's part in colocate mode, and its share of the
weights, gradients and optimizer state when DeepSpeed ZeRO or FSDP shards them over ``gpus`` processes.

vLLM (``training.use_vllm``):

- ``colocate``: each process starts its own vLLM engine on its GPU, which takes
  ``vllm_gpu_memory_utilization`` of the whole GPU at start-up (weights, activations, and the key/value
  cache in what is left). To generate a step's completions at once it needs the model's weights in bf16,
  the key/value cache of the process's generation batch (``per_device_train_batch_size`` x
  ``steps_per_generation`` sequences of prompt + completion tokens) and ``VLLM_RUNTIME``; with
  ``vllm_tensor_parallel_size`` > 1 the weights and cache are split over that many GPUs.
- ``server``: ``trl vllm-serve`` runs on other GPUs; nothing is counted on the training GPU.

With ``vllm_enable_sleep_mode`` (TRL 0.23+) vLLM hands its weights and cache back while the trainer computes
its loss and gradients (level 2 in TRL 1.16) and keeps only its runtime, so vLLM's share and the training step's
activations are not held at once: the plan counts the share beyond the activations, and at least the runtime.

Sharding (``--gpus N --sharding``):

- ``ddp``: every process holds everything.
- ``zero2``: gradients and optimizer state split N ways. DeepSpeed keeps, per trainable parameter, an fp32
  master copy, an fp32 gradient and two fp32 moments beside the bf16 gradient (all split).
- ``zero3``: as ZeRO-2, and the weights (and the reference model's) split too; each process gathers the layers
  it computes: two decoder layers (one prefetched) and the embedding.
- ``fsdp``: FSDP2 per decoder layer, as ``configs/fsdp.yaml``: weights split; accelerate upcasts trainable
  parameters to fp32 under mixed precision, so their gradients and moments are fp32; gathered layers as ZeRO-3.
"""

from dataclasses import dataclass

GIB = 1024**3
# CUDA graphs, the profiling forward pass and the sampler of one vLLM engine: an allowance, not a measurement
# (vLLM's documentation puts CUDA graphs alone at a few hundred MiB); scripts/gpu_check.sh measures the rest.
VLLM_RUNTIME = 1 * GIB
SHARDINGS = ("ddp", "zero2", "zero3", "fsdp")


@dataclass(frozen=True)
class Launch:
    """How the run is launched: processes (one per GPU), how state is sharded, and one GPU's memory."""

    gpus: int = 1
    sharding: str = "ddp"
    gpu_memory: int | None = None

    def splits_state(self) -> bool:
        return self.sharding != "ddp"

    def splits_weights(self) -> bool:
        return self.sharding in ("zero3", "fsdp")

    def label(self) -> str:
        return {"zero2": "ZeRO-2", "zero3": "ZeRO-3", "fsdp": "FSDP"}.get(self.sharding, "DDP")


def optimizer_bytes(trainable: int, tb: int, state: int, launch: Launch) -> tuple[int, str]:
    """(bytes, how) of the gradients and AdamW state for ``trainable`` parameters of ``tb`` bytes each."""
    if not launch.splits_state():
        return trainable * (tb + 2 * state), "grads + 2 moments"
    if launch.sharding == "fsdp":
        per = (4 - tb) + 4 + 8  # upcast to fp32, fp32 gradient, two fp32 moments
        how = "fp32 params, grads, 2 moments"
    else:
        per = tb + (8 if tb < 4 else 0) + 8  # gradient; fp32 master and fp32 gradient when tb < 4; two fp32 moments
        how = "grads, fp32 master + grads, 2 moments" if tb < 4 else "grads + 2 moments"
    return trainable * per // launch.gpus, f"{how}, split over {launch.gpus} ({launch.label()})"


def gathered_bytes(params: int, linear_params: int, layers: int, hidden: int, vocab: int, b: int) -> int:
    """Weights a ZeRO-3 or FSDP process gathers at once: two decoder layers and the embedding."""
    return (2 * (linear_params // layers) + vocab * hidden) * b


def vllm_need(params: int, kv_bytes: int, tp: int) -> int:
    """The least memory one colocated vLLM engine needs: bf16 weights and the generation batch's cache, split
    over ``tp`` GPUs, plus its runtime."""
    return (params * 2 + kv_bytes) // tp + VLLM_RUNTIME


ASLEEP = "sleep mode: handed back during the training step, counted beyond the activations only"


def asleep(share: int, activations: int) -> int:
    """What a sleeping vLLM engine adds to the peak: its share where that exceeds the training step's activations,
    and at least its runtime, which stays.

    >>> asleep(10 * GIB, 4 * GIB) // GIB, asleep(2 * GIB, 4 * GIB) // GIB
    (6, 1)
    """
    return max(VLLM_RUNTIME, share - activations)


def utilization_advice(budget: int, trainer: int, need: int) -> tuple[float | None, str]:
    """(a ``vllm_gpu_memory_utilization`` that leaves the trainer ``trainer`` bytes, or None, and why).

    The suggestion is the largest multiple of 0.05 (else of 0.01) that leaves the trainer enough and still
    gives vLLM what it needs; more cache lets vLLM schedule more sequences at once.

    >>> utilization_advice(80 * GIB, 40 * GIB, 20 * GIB)[0]
    0.5
    >>> utilization_advice(8 * GIB, 6 * GIB, 4 * GIB)[0] is None
    True
    """
    room = (budget - trainer) / budget
    least = need / budget
    if room < least:
        return None, (
            f"vLLM needs at least {least:.2f} of the GPU ({need / GIB:.2f} GiB) and the trainer {trainer / GIB:.2f} GiB: "
            f"together over {budget / GIB:.2f} GiB; use vllm_mode=server on another GPU, or lower the trainer's share"
        )
    for step in (20, 100):
        value = int(room * step) / step
        if value >= least:
            return round(value, 2), (
                f"{value:.2f} leaves the trainer {(budget - value * budget) / GIB:.2f} GiB of the "
                f"{trainer / GIB:.2f} GiB it needs; vLLM needs at least {least:.2f}"
            )
    return int(room * 1000) / 1000, f"{room:.3f} leaves the trainer just enough; vLLM needs at least {least:.3f}"
