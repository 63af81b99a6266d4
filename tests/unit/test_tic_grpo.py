"""TIC-GRPO's loss (run/tic_grpo.py) against values worked out by hand, without a model: the loss and its gradient
with respect to each token's log-probability on two groups of unequal lengths, one ratio above the clip; with ratio 1
it is REINFORCE with group advantages and no length normalisation. And the preset: what it sets, what it refuses."""

import doctest
import math

import pytest
import torch
from packaging.version import Version

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import validate
from grpo_ext.run import tic_grpo
from grpo_ext.settings import compat, variants
from tests.helpers import bare_digit

EPS_HIGH = 0.28  # the preset's: the ratio is clipped at 1.28
PAD = 5.0  # a log-ratio on padding, which must count for nothing

# Two groups of two completions, lengths 3, 1, 2 and 3 (width 3); each row's log-ratios sum to its trajectory's
# log-ratio: 0.5 (ratio 1.6487, above 1.28 with A > 0: clipped), -0.2 (0.8187), 0.1 (1.1052) and 0.3 (1.3499, above
# 1.28 but A < 0: min(rho*A, 1.28*A) is rho*A, so not clipped).
LOG_RATIOS = [[0.2, 0.2, 0.1], [-0.2, PAD, PAD], [0.05, 0.05, PAD], [0.1, 0.1, 0.1]]
MASK = [[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]]
ADVANTAGES = [1.0, -1.0, 0.5, -0.5]
RHO = [math.exp(0.5), math.exp(-0.2), math.exp(0.1), math.exp(0.3)]
# each row's -min(rho*A, min(rho, 1.28)*A), by hand
ROW_LOSS = [-1.28 * 1.0, RHO[1] * 1.0, -RHO[2] * 0.5, RHO[3] * 0.5]
# d loss / d log pi of each completion token: -(1/N) * A_i * rho_i where the ratio carries the gradient, 0 if clipped
TOKEN_GRAD = [0.0, -(1 / 4) * -1.0 * RHO[1], -(1 / 4) * 0.5 * RHO[2], -(1 / 4) * -0.5 * RHO[3]]


def _batch(log_ratios):
    logps = torch.full((4, 3), -1.0, dtype=torch.float64, requires_grad=True)
    old = logps.detach() - torch.tensor(log_ratios, dtype=torch.float64)
    return logps, old, torch.tensor(ADVANTAGES, dtype=torch.float64), torch.tensor(MASK, dtype=torch.float64)


def test_loss_and_gradient_worked_out_by_hand():
    logps, old, advantages, mask = _batch(LOG_RATIOS)
    loss, ratios, clipped = tic_grpo.trajectory_loss(logps, old, advantages, mask, EPS_HIGH)
    assert ratios.tolist() == pytest.approx(RHO, abs=1e-12)  # padding's log-ratio of 5 left out
    assert clipped.tolist() == [True, False, False, False]  # row 3 is above 1.28 too, but its advantage is negative
    assert loss.item() == pytest.approx(sum(ROW_LOSS) / 4, abs=1e-12)
    assert loss.item() == pytest.approx(-0.084731, abs=1e-6)  # (-1.28 + 0.818731 - 0.552585 + 0.674929) / 4
    loss.backward()
    expected = [[g * m for m in row] for g, row in zip(TOKEN_GRAD, MASK, strict=True)]
    assert logps.grad.tolist() == [pytest.approx(row, abs=1e-12) for row in expected]


@pytest.mark.parametrize(
    "epsilon_high,clipped",
    [
        (0.28, [True, False, False, False]),  # the preset: row 0 (1.65) clipped
        (0.7, [False, False, False, False]),  # a wider clip: nothing stopped
        (0.05, [True, False, True, False]),  # a narrow one: row 2 (1.105, A > 0) too; row 3 still not (A < 0)
    ],
)
def test_only_positive_advantages_above_the_clip_lose_their_gradient(epsilon_high, clipped):
    logps, old, advantages, mask = _batch(LOG_RATIOS)
    loss, _, stopped = tic_grpo.trajectory_loss(logps, old, advantages, mask, epsilon_high)
    loss.backward()
    assert stopped.tolist() == clipped
    assert [bool((logps.grad[i] == 0).all()) for i in range(4)] == clipped


def test_ratio_one_is_reinforce_with_group_advantages_and_no_length_normalisation():
    """One optimizer step per generation: TRL gives no old log-probabilities and the ratio is 1; the gradient with
    respect to each token's log-probability is -A_i / N whatever the completion's length."""
    logps, _, advantages, mask = _batch(LOG_RATIOS)
    loss, ratios, clipped = tic_grpo.trajectory_loss(logps, logps.detach(), advantages, mask, EPS_HIGH)
    assert ratios.tolist() == [1.0] * 4 and not clipped.any()
    assert loss.item() == pytest.approx(-sum(ADVANTAGES) / 4, abs=1e-12)
    loss.backward()
    assert logps.grad.tolist() == [[-a / 4 * m for m in row] for a, row in zip(ADVANTAGES, MASK, strict=True)]


def test_a_huge_ratio_stays_finite():
    """A completion far more likely than when sampled: its log-ratio is capped at 20, so no inf or NaN."""
    logps, old, advantages, mask = _batch([[40.0, 40.0, 40.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [40.0, 40.0, 40.0]])
    loss, ratios, _ = tic_grpo.trajectory_loss(logps, old, advantages, mask, EPS_HIGH)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logps.grad).all()
    assert float(ratios[0]) == pytest.approx(math.exp(20))


def test_doctests():
    assert doctest.testmod(tic_grpo).failed == 0


@pytest.mark.parametrize(
    "trl,expected",
    [
        # TRL 0.19 has no _get_per_token_logps_and_entropies: refused, never approximated
        ("0.19.1", "algorithm: tic_grpo needs trl>=0.20 for TRL's per-token log-probabilities"),
        # from 0.20 the preset: grpo's normaliser, group advantages, no KL, the clip at 1.28
        ("0.20.0", {"loss_type": "grpo", "scale_rewards": True, "beta": 0.0, "epsilon_high": 0.28}),
        ("1.16.0", {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.0, "epsilon_high": 0.28}),
    ],
)
def test_preset(trl, expected, digit_doc):
    out, _, problems = variants.expand("tic_grpo", bare_digit(digit_doc)["training"], Version(trl))
    if isinstance(expected, str):
        assert len(problems) == 1 and expected in problems[0] and "(installed 0.19.1)" in problems[0]
        return
    kwargs, _, _ = compat.translate(out, Version(trl))
    assert problems == [] and {k: kwargs[k] for k in expected} == expected


@pytest.mark.parametrize(
    "training,refused",
    [
        # the shipped digit recipe's token-level loss_type would do nothing: the loss is TIC-GRPO's
        ({"loss_type": "dapo"}, "training.loss_type: 'dapo' does nothing with algorithm: tic_grpo (TRL's loss_type is"),
        # a KL weight: the loss has no KL term
        ({"beta": 0.04}, "training.beta: 0.04 does nothing with algorithm: tic_grpo (the loss has no KL term)"),
        # GSPO's sequence level: the trajectory ratio replaces it
        ({"importance_sampling_level": "sequence"}, "training.importance_sampling_level: 'sequence' does nothing"),
        # a lower clip: there is none
        ({"epsilon": 0.1}, "training.epsilon: 0.1 does nothing with algorithm: tic_grpo (there is no lower clip"),
        # the neutral values themselves, and the clip the loss reads, are the recipe's to set
        ({"loss_type": "grpo", "beta": 0.0, "epsilon": 0.2, "epsilon_high": 0.4}, None),
    ],
)
def test_keys_the_loss_does_not_read_are_refused(training, refused, digit_doc):
    doc = bare_digit(digit_doc, algorithm="tic_grpo")
    doc["training"].update(training)
    if refused is None:
        origins = validate(doc).origins
        assert origins["epsilon_high"] == "recipe (algorithm: tic_grpo sets 0.28)"
        assert origins["loss_type"] == "recipe (the same as algorithm: tic_grpo)"
        return
    with pytest.raises(RecipeError) as err:
        validate(doc)
    assert any(refused in line for line in err.value.lines()), err.value.lines()
    assert "remove it or set it to" in str(err.value)


def test_algorithms_command_names_the_source_and_what_is_unverified(capsys):
    assert cli.main(["algorithms", "tic_grpo"]) == 0
    out = capsys.readouterr().out
    assert "paper: Pang, Luo, Jin 2025, TIC-GRPO (arXiv 2508.02833); the loss as a third-party implementation" in out
    assert "not implemented: the paper's own clip bound, normalisation and KL term are unverified" in out
    assert "  beta = 0.0: the loss has no KL term" in out
