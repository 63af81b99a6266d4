"""GRPO variants by name: ``algorithm: dapo`` in a recipe expands into the GRPOConfig keys that define DAPO.

Each variant is one row of ``VARIANTS``: its paper, every setting with the reason for it, and what no TRL
version implements. A preset always sets ``loss_type``, ``scale_rewards`` and ``beta`` (TRL moved their
defaults between versions), so a variant means the same on every TRL that has it; other keys keep TRL's
defaults, which did not move (``epsilon`` 0.2, token-level importance ratios, no truncation mask).

A variant whose loss no TRL version has (TIC-GRPO's) is computed by grpo_ext in place of TRL's loss
(``grpo_ext/run/tic_grpo.py``); the TRL keys that loss does not read (``unread``) keep their neutral value, and a
recipe that sets one otherwise is refused rather than run with a setting that does nothing.

A key the recipe sets itself wins over the preset. The oldest TRL a variant needs is derived from
``compat``'s version rules for its keys and values; on an older TRL the recipe is refused before anything
loads, never run with an approximation.

    >>> training, origins, problems = expand("dr_grpo", {"beta": 0.01})
    >>> training["loss_type"], training["beta"], origins["beta"], problems
    ('dr_grpo', 0.01, 'recipe (algorithm: dr_grpo sets 0.0)', [])
"""

from dataclasses import dataclass, field

from packaging.version import Version

from grpo_ext.core.text import suggest
from grpo_ext.settings import compat


@dataclass(frozen=True)
class Variant:
    """A named GRPO variant: what it is, where it comes from, and the TRL settings that make it."""

    about: str  # one line
    paper: str
    settings: dict[str, tuple[object, str]]  # GRPOConfig key -> (value, why)
    missing: str = ""  # a piece of the paper that no TRL version implements (not approximated)
    notes: list[str] = field(default_factory=list)
    floor: tuple[str, str] | None = None  # (the oldest TRL, why) where grpo_ext's own code needs more than the keys do
    unread: dict[str, tuple[object, str]] = field(default_factory=dict)  # key -> (the value it must keep, why)


VARIANTS: dict[str, Variant] = {
    "grpo": Variant(
        "the original: sequence-mean loss, std-normalised group advantage, KL to the reference model",
        "Shao et al. 2024, DeepSeekMath (arXiv 2402.03300)",
        {
            "loss_type": ("grpo", "average each completion's token losses, then average over completions"),
            "scale_rewards": ("group", "advantage = (reward - group mean) / group std"),
            "beta": (0.04, "KL penalty to the reference policy, the paper's value (loads a reference model)"),
        },
    ),
    "dr_grpo": Variant(
        "GRPO done right: no std normalisation, no length bias (token losses over a constant)",
        "Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv 2503.20783)",
        {
            "loss_type": ("dr_grpo", "sum token losses and divide by max_completion_length: no per-length weighting"),
            "scale_rewards": ("none", "dividing by the group std favours too easy and too hard prompts"),
            "beta": (0.0, "the paper drops the KL term for rule-based rewards"),
        },
    ),
    "dapo": Variant(
        "decoupled clip-higher, token-level loss, truncated completions masked out",
        "Yu et al. 2025, DAPO (arXiv 2503.14476)",
        {
            "loss_type": ("dapo", "token-level loss: every token of the batch weighs the same"),
            "scale_rewards": ("group", "group-normalised advantage, as in GRPO"),
            "beta": (0.0, "DAPO removes the KL penalty"),
            "epsilon": (0.2, "lower clip bound, the paper's epsilon_low"),
            "epsilon_high": (0.28, "clip-higher: a wider upper bound keeps low-probability tokens rising (entropy)"),
            "mask_truncated_completions": (True, "overlong filtering: completions cut at max_completion_length get no loss"),
        },
        missing="overlong reward shaping is a reward, not a setting: add the overlong_penalty reward",
        notes=[
            "dynamic sampling (groups whose rewards have zero spread replaced by new prompts' groups) is in no TRL "
            "version; grpo_ext does it, on with this preset (groups.dynamic_sampling, groups.max_extra_rounds)"
        ],
    ),
    "gspo": Variant(
        "sequence-level importance ratio (length-normalised), clipped at the sequence level",
        "Zheng et al. 2025, Group Sequence Policy Optimization (arXiv 2507.18071)",
        {
            "importance_sampling_level": ("sequence", "one importance ratio per completion: the mean of its token log-ratios"),
            "loss_type": ("grpo", "sequence-level objective, averaged over completions"),
            "scale_rewards": ("group", "group-normalised advantage, as in GRPO"),
            "beta": (0.0, "the paper trains without a KL term"),
            "epsilon": (3e-4, "sequence ratios stay close to 1: the paper's clip range is tiny"),
            "epsilon_high": (4e-4, "the paper's upper clip bound"),
        },
        notes=["with one optimizer step per generation the ratio is 1 and clipping never acts (steps_per_generation > 1)"],
    ),
    "bnpo": Variant(
        "token-level loss normalised over the local batch (TRL's bnpo; the paper's Beta normalisation is not in TRL)",
        "BNPO: Beta Normalization Policy Optimization, 2025 (arXiv 2506.02864)",
        {
            "loss_type": ("bnpo", "sum token losses, divide by the active tokens of the micro-batch"),
            "scale_rewards": ("group", "group-normalised advantage"),
            "beta": (0.0, "no KL term"),
        },
        missing="the paper's adaptive Beta-distribution reward normalisation is in no TRL version",
    ),
    "cispo": Variant(
        "clips the importance weight itself (stop-gradient), so every token keeps a gradient",
        "MiniMax 2025, MiniMax-M1 (arXiv 2506.13585)",
        {
            "loss_type": ("cispo", "REINFORCE with clipped, detached importance weights; token-level normalisation"),
            "scale_rewards": ("group", "group-normalised advantage"),
            "beta": (0.0, "no KL term"),
            "epsilon_high": (5.0, "the weight's upper clip (epsilon_max); TRL's documented recommendation"),
        },
    ),
    "sapo": Variant(
        "soft, temperature-controlled gate instead of the hard clip",
        "Soft Adaptive Policy Optimization, 2025 (arXiv 2511.20347)",
        {
            "loss_type": ("sapo", "sigmoid gate on the importance ratio replaces clipping"),
            "scale_rewards": ("group", "group-normalised advantage"),
            "beta": (0.0, "no KL term"),
            "sapo_temperature_pos": (1.0, "gate temperature for positive advantages (paper)"),
            "sapo_temperature_neg": (1.05, "a slightly sharper gate for negative advantages (paper)"),
        },
    ),
    "gdpo": Variant(
        "each reward normalised within its group before the weighted sum (several rewards)",
        "GDPO: Group reward-Decoupled Normalization Policy Optimization, 2026 (arXiv 2601.05242)",
        {
            "multi_objective_aggregation": ("normalize_then_sum", "normalise each reward in its group, then sum"),
            "loss_type": ("dapo", "token-level loss"),
            "scale_rewards": ("group", "group normalisation of each reward"),
            "beta": (0.0, "no KL term"),
        },
        notes=["with a single reward it is the same as its base (dapo loss, group scaling)"],
    ),
    "luspo": Variant(
        "GSPO's sequence-level ratio with each sequence's loss scaled by its length",
        "Length-Unbiased Sequence Policy Optimization, 2026 (arXiv 2602.05261)",
        {
            "loss_type": ("luspo", "sequence-level loss scaled by completion length: no bias towards short answers"),
            "importance_sampling_level": ("sequence", "TRL requires the sequence-level ratio for luspo"),
            "scale_rewards": ("group", "group-normalised advantage"),
            "beta": (0.0, "no KL term"),
        },
    ),
    "vespo": Variant(
        "smooth asymmetric Gamma weighting of sequence-level importance weights instead of clipping",
        "Variational Sequence-Level Soft Policy Optimization, 2026 (arXiv 2602.10693)",
        {
            "loss_type": ("vespo", "Gamma-shaped weights on the importance ratio replace the hard clip"),
            "importance_sampling_level": ("token", "TRL requires token-level log-ratios for vespo"),
            "scale_rewards": ("group", "group-normalised advantage"),
            "beta": (0.0, "no KL term"),
        },
        notes=["its shape parameters (vespo_k_pos, vespo_lambda_pos, ...) keep TRL's defaults"],
    ),
    # TIC-GRPO: the paper's method section was not read (only its abstracts, v2 and v5); the loss follows a third-party
    # implementation (grpo-composer's TrajectoryLevelClippingMechanism) and the abstracts, see docs/variants.md.
    "tic_grpo": Variant(
        "one importance ratio per completion, the product of its token ratios, clipped from above (grpo_ext's loss)",
        "Pang, Luo, Jin 2025, TIC-GRPO (arXiv 2508.02833); the loss as a third-party implementation reads it",
        {
            "loss_type": (
                "grpo",
                "the loss is a mean over completions, the normaliser of TRL's grpo (row skipping scales by it)",
            ),
            "scale_rewards": ("group", "group-normalised advantage, as in GRPO"),
            "beta": (0.0, "no KL term (none in the sources read)"),
            "epsilon_high": (
                0.28,
                "the trajectory ratio is clipped at 1 + 0.28, the third-party default (DAPO's); not the paper's",
            ),
        },
        missing="the paper's own clip bound, normalisation and KL term are unverified (its method section was not read)",
        notes=[
            "loss = mean over completions of -min(rho*A, min(rho, 1 + epsilon_high)*A), rho = exp(sum of the completion's "
            "token log-ratios to the sampling policy): no length normalisation, no lower clip",
            "with one optimizer step per generation rho is 1 and the gradient is A * grad(sum of log-probs) averaged over "
            "completions: REINFORCE with group advantages (TRL's luspo at ratio 1); num_iterations > 1 or "
            "steps_per_generation > gradient_accumulation_steps makes rho differ from 1",
        ],
        floor=("0.20", "TRL's per-token log-probabilities (_get_per_token_logps_and_entropies), which its loss reads"),
        unread={
            "loss_type": ("grpo", "TRL's loss_type is not used; the loss averages over completions"),
            "beta": (0.0, "the loss has no KL term"),
            "importance_sampling_level": ("token", "the trajectory ratio replaces TRL's"),
            "epsilon": (0.2, "there is no lower clip (epsilon_high sets the upper one)"),
            "delta": (None, "TRL's two-sided clip is not applied"),
            "top_entropy_quantile": (1.0, "TRL's entropy mask is not applied"),
            "entropy_coef": (0.0, "TRL's entropy bonus is not applied"),
            "use_adaptive_entropy": (False, "TRL's entropy bonus is not applied"),
            "use_liger_kernel": (False, "Liger's fused loss is TRL's, not this one"),
            "use_liger_loss": (False, "Liger's fused loss is TRL's, not this one"),
            "use_vllm": (False, "TRL's vLLM importance-sampling correction is not applied"),
            "off_policy_mask_threshold": (None, "TRL's off-policy sequence mask is not applied"),
        },
    ),
}

# Variants that readers meet and no TRL version implements: name -> what is missing.
NOT_IN_TRL: dict[str, str] = {
    "flow_grpo": "Flow-GRPO trains image flow models, not language models",
}

# Every GRPOConfig key some preset sets.
PRESET_KEYS: tuple[str, ...] = tuple(dict.fromkeys(k for v in VARIANTS.values() for k in v.settings))


def needs(name: str) -> str:
    """The oldest TRL that has every key and value the variant sets (from compat's version rules), and what grpo_ext's
    own loss for it reads of TRL (``floor``)."""
    variant = VARIANTS[name]
    firsts = [Version(compat.first_supporting(k, value)) for k, (value, _) in variant.settings.items()]
    return str(max(firsts + ([Version(variant.floor[0])] if variant.floor else [])))


def unread_problems(name: str, training: dict) -> list[str]:
    """The recipe's ``training:`` keys that the variant's own loss does not read, set to anything but their neutral
    value: each a line naming the key and the fix."""
    return [
        f"training.{key}: {training[key]!r} does nothing with algorithm: {name} ({why}); remove it or set it to {value!r}"
        for key, (value, why) in VARIANTS[name].unread.items()
        if key in training and compat.canonical(key, training[key]) != value
    ]


def origin(name: str) -> str:
    return f"algorithm: {name}"


def preset_keys(origins: dict[str, str]) -> set[str]:
    """The training keys whose value a preset decided (``origins`` from :func:`expand`)."""
    return {key for key, came in origins.items() if came.startswith("algorithm:")}


def expand(name: str, training: dict, installed: Version | None = None) -> tuple[dict, dict[str, str], list[str]]:
    """The ``training:`` section with the variant's settings filled in where the recipe does not set them.

    Returns (training, origins, problems): ``origins`` maps each preset key to ``algorithm: NAME``, or, where
    the recipe sets it, to what the preset would have set. An unknown name, or a TRL older than the variant
    needs, is a problem.
    """
    if name not in VARIANTS:
        if name in NOT_IN_TRL:
            return training, {}, [f"algorithm: {name!r} cannot be run: {NOT_IN_TRL[name]}; choose one of {', '.join(VARIANTS)}"]
        choose = f"; choose one of {', '.join(VARIANTS)}"
        return training, {}, [f"algorithm: unknown variant {name!r}{suggest(name, VARIANTS, choose)}"]
    v = installed or compat.trl_version()
    oldest = needs(name)
    if v < Version(oldest):
        settings, floor = VARIANTS[name].settings.items(), VARIANTS[name].floor
        lacking = [f"{k}={value!r}" for k, (value, _) in settings if v < Version(compat.first_supporting(k, value))]
        if floor and v < Version(floor[0]):
            lacking.append(floor[1])
        return (
            training,
            {},
            [
                f"algorithm: {name} needs trl>={oldest} for {', '.join(lacking)} (installed {v}); "
                f"run: pip install -U 'trl>={oldest}', or choose another algorithm (grpo-ext algorithms)"
            ],
        )
    if unread := unread_problems(name, training):
        return training, {}, unread
    out, origins = dict(training), {}
    for key, (value, _) in VARIANTS[name].settings.items():
        if key in training:
            same = training[key] == value
            origins[key] = f"recipe (the same as {origin(name)})" if same else f"recipe ({origin(name)} sets {value!r})"
        else:
            out[key] = value
            origins[key] = origin(name)
    return out, origins, []


def listing(installed: Version | None = None) -> list[str]:
    """Two lines per variant for ``grpo-ext algorithms``: what it is, then what it sets on the installed TRL."""
    v = installed or compat.trl_version()
    lines = [f"GRPO variants (recipe: algorithm: NAME; keys the recipe sets win); installed trl {v}:"]
    for name, variant in VARIANTS.items():
        sets = ", ".join(f"{k}={value!r}" for k, (value, _) in variant.settings.items())
        usable = f"sets {sets}" if v >= Version(needs(name)) else f"needs trl>={needs(name)} (installed {v}); would set {sets}"
        lines += [f"  {name:<9} {variant.about}", f"  {'':<9} {usable}"]
    lines.append("not in any TRL version:")
    lines += [f"  {name:<9} {why}" for name, why in NOT_IN_TRL.items()]
    return lines


def details(name: str) -> list[str]:
    """``grpo-ext algorithms NAME``: the paper, each setting and why, what is missing, the oldest TRL."""
    variant = VARIANTS[name]
    lines = [f"{name}: {variant.about}", f"paper: {variant.paper}"]
    lines.append(f"needs trl>={needs(name)} (installed {compat.trl_version()})")
    lines += [f"  {k} = {value!r}: {why}" for k, (value, why) in variant.settings.items()]
    lines += [f"not implemented: {variant.missing}"] * bool(variant.missing)
    lines += [f"note: {note}" for note in variant.notes]
    lines += ["the loss is grpo_ext's (no TRL version has it); these keys keep their value:"] * bool(variant.unread)
    lines += [f"  {k} = {value!r}: {why}" for k, (value, why) in variant.unread.items()]
    return lines
