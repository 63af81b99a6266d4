"""TIC-GRPO's loss (``algorithm: tic_grpo``), which no TRL version has: one importance ratio per completion.

GRPO weighs each token by its own ratio to the policy that sampled it; TIC-GRPO (Pang, Luo, Jin, arXiv 2508.02833)
replaces those with "a single trajectory-level probability ratio", the probability of the whole completion under
the current policy over its probability under the sampling one, so that the update estimates the gradient at the
current policy. For a completion i of length T_i with advantage A_i:

    rho_i = prod_t pi(o_it) / pi_old(o_it) = exp(sum_t log-ratio_it)       no length normalisation (GSPO takes the mean)
    loss  = 1/N sum_i -min(rho_i A_i, min(rho_i, 1 + epsilon_high) A_i)    clipped from above only

The form is a third-party implementation's (grpo-composer's ``TrajectoryLevelClippingMechanism``: the sum of the
log-ratios, an upper clip at 1.28 "from DAPO", no lower one, a mean over completions); the paper's method section was
not read, so its clip bound, any normalisation and any KL term are unverified (docs/variants.md says so).

With one optimizer step per generation TRL gives no old log-probabilities (the sampling policy is the current one):
rho is 1 with the gradient of ``sum_t log pi``, and the loss's gradient is REINFORCE with group advantages, each
completion's log-probability summed over its tokens, averaged over completions (TRL's ``luspo`` at ratio 1).

The log-ratio is capped at 20 (TRL's own cap for VESPO's sequence weight) so that exp never overflows: a completion
that far above its sampling probability is clipped anyway when its advantage is positive, and gets a finite weight
when it is negative. ``TrajectoryCorrected`` computes the loss at the trainer's loss hook, as the last behaviour, so
that row skipping wraps it as it wraps TRL's (its ``grpo`` normaliser counts rows, as this loss does).
"""

from grpo_ext.run import trl_internals
from grpo_ext.run.trl_internals import Behaviour, Step

LOG_RATIO_CAP = 20.0  # TRL's clamp of the sequence log-ratio in its VESPO weights (trl/trainer/grpo_trainer.py)


def trajectory_loss(logps, old_logps, advantages, mask, epsilon_high: float):
    """TIC-GRPO's loss over a micro-batch: ``(loss, ratios, clipped)``. ``logps`` and ``old_logps`` are rows x tokens
    (the current and the sampling policy's log-probability of each completion token), ``mask`` the completion tokens
    (1) and padding (0), ``advantages`` one per row; ``ratios`` are the trajectory ratios (detached) and ``clipped``
    the rows whose upper clip took their gradient away (ratio above 1 + epsilon_high, advantage above 0).

    >>> import torch
    >>> logps = torch.tensor([[-1.0, -2.0], [-0.5, -9.0]], requires_grad=True)
    >>> loss, ratios, clipped = trajectory_loss(logps, logps.detach(), torch.tensor([1.0, -1.0]),
    ...                                         torch.tensor([[1, 1], [1, 0]]), 0.28)
    >>> loss.item(), ratios.tolist(), clipped.tolist()
    (0.0, [1.0, 1.0], [False, False])
    >>> loss.backward()
    >>> logps.grad.tolist()  # -A_i / N on each completion token, nothing on padding: REINFORCE at ratio 1
    [[-0.5, -0.5], [0.5, 0.0]]
    """
    import torch

    log_ratio = ((logps - old_logps) * mask).sum(-1).clamp(max=LOG_RATIO_CAP)
    ratio = torch.exp(log_ratio)
    capped = torch.clamp(ratio, max=1 + epsilon_high)
    per_row = -torch.min(ratio * advantages, capped * advantages)
    clipped = (ratio > 1 + epsilon_high) & (advantages > 0)
    return per_row.mean(), ratio.detach(), clipped


class TrajectoryCorrected(Behaviour):
    """``algorithm: tic_grpo``: a training micro-batch's loss is TIC-GRPO's, in place of TRL's (which is not called),
    divided for gradient accumulation as TRL divides its own sequence-mean loss. It logs the entropy as TRL does,
    ``clip_ratio/high_mean`` and ``clip_ratio/region_mean`` (the share of completions whose ratio the clip stopped) and
    ``tic_grpo/ratio`` (the mean trajectory ratio: 1 on a run with one optimizer step per generation)."""

    def on_loss(self, step: Step, model, inputs: dict, loss):
        trainer = step.trainer
        logps, entropies = trl_internals.token_logps(trainer, model, inputs)
        mask = inputs["completion_mask"] if inputs.get("tool_mask") is None else inputs["completion_mask"] * inputs["tool_mask"]
        old = inputs.get("old_per_token_logps")
        advantages = inputs["advantages"]
        value, ratios, clipped = trajectory_loss(
            logps, logps.detach() if old is None else old, advantages, mask, trainer.epsilon_high
        )
        tokens = mask.sum().clamp(min=1.0)
        step.log("entropy", float((entropies.detach() * mask).sum() / tokens))
        step.log("clip_ratio/high_mean", float(clipped.float().mean()))
        step.log("clip_ratio/region_mean", float(clipped.float().mean()))
        step.log("tic_grpo/ratio", float(ratios.mean()))
        return value / trl_internals.accumulation_divisor(trainer)
