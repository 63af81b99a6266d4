"""Hyper-parameter advice: a recipe far outside the usual GRPO ranges gets one line per value, never an error.

The ranges are the common advice for GRPO on language models: a group of 4 to 8 completions per prompt (8
for maths, 4 for general alignment), a KL weight beta of 0.02 to 0.1 when a KL term is used, a clip range
epsilon of 0.15 to 0.25, and a learning rate of 2e-7 to 1e-6 for a 7B model (smaller models take larger
steps: the shipped 135M recipes use 3e-5). "Far outside" is below two thirds of the lower bound or above
twice the upper one, so a value near the range says nothing. A value a variant preset sets (``algorithm: gspo`` sets a tiny
epsilon on purpose) is not second-guessed, and beta = 0 (no KL term, no reference model) is a choice, not a
slip.

    >>> check({"num_generations": 32, "beta": 0.0, "epsilon": 0.2, "learning_rate": 1e-6}.get)[0][:60]
    'training.num_generations=32 is far above the usual 4-8 compl'
    >>> check({"num_generations": 8, "beta": 0.04, "epsilon": 0.2, "learning_rate": 3e-5}.get, params=135_000_000)
    []
"""

from collections.abc import Callable

# key -> (low, high, what the range is, what happens far below, far above)
RANGES: dict[str, tuple[float, float, str, str, str]] = {
    "num_generations": (
        4,
        8,
        "completions per group",
        "the group mean and std are noisy estimates of the advantage",
        "each step costs more and a group of 8 already estimates the advantage well",
    ),
    "beta": (
        0.02,
        0.1,
        "KL weight",
        "the KL term barely holds the policy; set beta: 0.0 to drop it and the reference model",
        "the policy is held close to the reference and learns slowly; lower beta if rewards stall",
    ),
    "epsilon": (
        0.15,
        0.25,
        "clip range",
        "most updates are clipped away (entropy collapse is the usual sign)",
        "large policy steps go unclipped; a KL blow-up or NaN loss is the usual sign",
    ),
}
LR_7B = (2e-7, 1e-6)  # the learning-rate advice is for 7B models
BIG_MODEL = 3_000_000_000  # parameters from which the 7B learning-rate range is a fair guide
# LoRA for GRPO: rank 1 to 32 on every linear layer matched full fine-tuning at about 10x its learning rate
LORA_SOURCE = "LoRA Without Regret, Schulman et al. 2025, reproduced for GRPO in TRL's lora_without_regret guide"
LORA_LR_FACTOR = 10
LORA_RL_RANKS = (1, 32)


def _far(value: float, low: float, high: float) -> str | None:
    if value < low / 1.5:
        return "below"
    if value > high * 2:
        return "above"
    return None


def check(
    get: Callable[[str], object],
    params: int | None = None,
    preset: frozenset[str] | set[str] = frozenset(),
    lora: bool = False,
) -> list[str]:
    """One line per effective value far outside its usual range. ``get(key)`` gives a training value, ``params``
    the model's parameter count where known, ``preset`` the keys an ``algorithm:`` preset set, ``lora`` whether
    only adapters train (their learning rate is ``LORA_LR_FACTOR`` times full fine-tuning's)."""
    lines = []
    for key, (low, high, what, below, above) in RANGES.items():
        value = get(key)
        if key in preset or not isinstance(value, (int, float)) or (key == "beta" and value == 0):
            continue
        side = _far(value, low, high)
        if side:
            why = below if side == "below" else above
            lines.append(f"training.{key}={value:g} is far {side} the usual {low:g}-{high:g} {what}; {why}")
    lr = get("learning_rate")
    if isinstance(lr, (int, float)):
        low, high = (x * LORA_LR_FACTOR for x in LR_7B) if lora else LR_7B
        side = _far(lr, low, high)
        if side == "below" or (side == "above" and params is not None and params >= BIG_MODEL):
            what = f"for LoRA on a 7B model ({LORA_LR_FACTOR}x full fine-tuning's: {LORA_SOURCE})" if lora else "for a 7B model"
            lines.append(
                f"training.learning_rate={lr:g} is far {side} the usual {low:g}-{high:g} {what}; "
                + ("tune it first: too small and nothing moves" if side == "below" else "lower it if the KL or the loss blows up")
            )
    return lines


def lora(rank: int, targeted: int | None = None, linear: int | None = None) -> list[str]:
    """One line per LoRA setting that the GRPO evidence advises against: adapters on only ``targeted`` of the
    model's ``linear`` layers (where the model's shape is known), or a rank above ``LORA_RL_RANKS``.

    >>> lora(16, 7 * 30, 7 * 30)
    []
    >>> lora(64, 60, 210)[0][:62]
    'model.lora.target_modules wraps 60 of the 210 linear layers; L'
    """
    lines = []
    if targeted is not None and linear is not None and targeted < linear:
        lines.append(
            f"model.lora.target_modules wraps {targeted} of the {linear} linear layers; LoRA on all of them "
            f"(target_modules: all-linear) learns more than attention-only LoRA at any rank ({LORA_SOURCE})"
        )
    if rank > LORA_RL_RANKS[1]:
        lines.append(
            f"model.lora.r={rank}: GRPO needs little adapter capacity; ranks {LORA_RL_RANKS[0]}-{LORA_RL_RANKS[1]} "
            f"matched full fine-tuning, rank 1 on all linear layers at {LORA_LR_FACTOR}x its learning rate ({LORA_SOURCE})"
        )
    return lines
