"""TIC-GRPO's loss through the trainer's loss hook on the tiny model: at ratio 1 its gradient is TRL's own LUSPO and
Dr.GRPO gradients (REINFORCE with group advantages, no length normalisation); off-policy it is the trajectory-ratio
gradient worked out from the model's log-probabilities, with row skipping wrapping it; and a run with
``algorithm: tic_grpo`` and two optimizer steps per generation trains and logs its ratio."""

import json

import pytest
import torch

from grpo_ext.recipe import validate
from grpo_ext.run import skipping, tic_grpo, trainer, trl_internals
from grpo_ext.settings import compat
from tests.helpers import bare_digit, tiny_doc

WIDTH = 6  # max_completion_length
LENGTHS = [6, 2, 4, 1, 5, 3]  # unequal completion lengths
# two groups with spread and a flat one (left out by row skipping; it adds nothing to the loss)
ADVANTAGES = [1.0, -1.0, 0.5, -0.5, 0.0, 0.0]


def _trainer(tiny_model, tmp_path, behaviours):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    kwargs = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=6,
        num_generations=2,
        max_completion_length=WIDTH,
        beta=0.0,
        loss_type="grpo",
        epsilon_high=0.28,
        use_cpu=True,
        bf16=False,  # float32 throughout: the gradients compared differ by a scale, which bf16 rounds (0.1%)
        report_to="none",
    )
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=trainer.make_config(kwargs),
        train_dataset=Dataset.from_dict({"prompt": ["a", "b", "c"]}),
        tokenizer=AutoTokenizer.from_pretrained(tiny_model),
        behaviours=behaviours,
    )
    grpo.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this test does not run
    grpo.model.train()
    return grpo


def _inputs(vocab: int) -> dict:
    g = torch.Generator().manual_seed(1)
    rows, prompt = len(ADVANTAGES), 4
    prompt_mask = torch.ones(rows, prompt, dtype=torch.long)
    prompt_mask[1, :2] = 0  # left padding
    completion_mask = torch.tensor([[1] * n + [0] * (WIDTH - n) for n in LENGTHS])
    return {
        "prompt_ids": torch.randint(0, vocab, (rows, prompt), generator=g),
        "prompt_mask": prompt_mask,
        "completion_ids": torch.randint(0, vocab, (rows, WIDTH), generator=g),
        "completion_mask": completion_mask,
        "advantages": torch.tensor(ADVANTAGES),
        "num_items_in_batch": completion_mask.sum().float(),
    }


def _loss_and_grads(compute, grpo, inputs):
    grpo.model.zero_grad(set_to_none=True)
    loss = compute(grpo.model, dict(inputs))
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in grpo.model.named_parameters() if p.grad is not None}


def _worst(ours: dict, theirs: dict, scale: float = 1.0) -> float:
    assert set(ours) == set(theirs)
    return max(float((ours[n] - scale * theirs[n]).abs().max()) for n in theirs)


@pytest.mark.parametrize("skip", [True, False])  # row skipping wraps the loss as it wraps TRL's, or is off
def test_at_ratio_one_the_gradient_is_trls_sequence_sum_reinforce(tiny_model, tmp_path, skip):
    """No old log-probabilities (one optimizer step per generation): the gradient is -1/N sum_i A_i grad sum_t log pi,
    TRL's luspo at ratio 1 exactly, and its dr_grpo times max_completion_length (every TRL has dr_grpo)."""
    from trl import GRPOTrainer

    grpo = _trainer(tiny_model, tmp_path, [skipping.SkipZeroAdvantage()] * skip + [tic_grpo.TrajectoryCorrected()])
    inputs = _inputs(grpo.model.config.vocab_size)
    ours, our_grads = _loss_and_grads(grpo.compute_loss, grpo, inputs)
    assert float(ours) == pytest.approx(-sum(ADVANTAGES) / len(ADVANTAGES), abs=1e-6)  # rho = 1: -mean(A)
    assert trl_internals.logged(grpo, "tic_grpo/ratio")[-1] == pytest.approx(1.0)
    assert max(float(g.abs().max()) for g in our_grads.values()) > 1e-4  # a test that can fail

    grpo.loss_type = "dr_grpo"  # token-level, summed, over rows x max_completion_length: the same direction
    _, dr_grads = _loss_and_grads(lambda m, i: GRPOTrainer.compute_loss(grpo, m, i), grpo, inputs)
    assert _worst(our_grads, dr_grads, scale=WIDTH) <= 1e-6
    if compat.trl_at_least("0.28"):  # LUSPO: the sequence ratio with each sequence's loss scaled by its length
        grpo.loss_type, grpo.importance_sampling_level = "luspo", "sequence"
        _, luspo_grads = _loss_and_grads(lambda m, i: GRPOTrainer.compute_loss(grpo, m, i), grpo, inputs)
        assert _worst(our_grads, luspo_grads) <= 1e-6


def test_off_policy_the_gradient_is_the_trajectory_ratios(tiny_model, tmp_path):
    """Old log-probabilities that put the rows' trajectory log-ratios at 0.5, -0.2, 0.1, 0.3 (and 0 for the flat
    group): the row with ratio 1.65 and A > 0 is clipped at 1.28 and gives no gradient; the others are weighted by
    A_i * rho_i. The expectation is built from the model's own log-probabilities, row by row."""
    grpo = _trainer(tiny_model, tmp_path, [skipping.SkipZeroAdvantage(), tic_grpo.TrajectoryCorrected()])
    inputs = _inputs(grpo.model.config.vocab_size)
    mask = inputs["completion_mask"].float()
    with torch.no_grad():
        current, _ = trl_internals.token_logps(grpo, grpo.model, inputs)
    shift = torch.tensor([0.5, -0.2, 0.1, 0.3, 0.0, 0.0])
    inputs["old_per_token_logps"] = current - (shift / mask.sum(-1)).unsqueeze(1) * mask  # spread over each row's tokens
    ours, our_grads = _loss_and_grads(grpo.compute_loss, grpo, inputs)

    rho = torch.exp(shift)
    advantages = torch.tensor(ADVANTAGES)
    weight = torch.where((rho > 1.28) & (advantages > 0), torch.zeros(6), advantages * rho)
    grpo.model.zero_grad(set_to_none=True)
    logps, _ = trl_internals.token_logps(grpo, grpo.model, inputs)
    expected_loss = -(weight * (logps * mask).sum(-1)).sum() / 6
    expected_loss.backward()
    expected = {n: p.grad.clone() for n, p in grpo.model.named_parameters() if p.grad is not None}
    assert _worst(our_grads, expected) <= 1e-6
    clip = torch.clamp(rho, max=1.28)
    assert float(ours) == pytest.approx(float(-torch.min(rho * advantages, clip * advantages).mean()), abs=1e-5)
    assert trl_internals.logged(grpo, "clip_ratio/high_mean")[-1] == pytest.approx(1 / 4)  # 1 of the 4 kept rows
    assert trl_internals.logged(grpo, "skipped_rows")[-1] == pytest.approx(2 / 6)


def test_a_run_with_two_steps_per_generation_trains_and_logs_its_ratio(tiny_model, digit_doc, tmp_path, no_hub):
    import grpo_ext

    (tmp_path / "length.py").write_text(  # spread in every group, so that no row is left out of the loss
        "def length(completions, **kwargs):\n    return [float(len(str(c))) for c in completions]\n"
    )
    doc = tiny_doc(bare_digit(digit_doc, algorithm="tic_grpo"), tiny_model, tmp_path / "run")
    doc["training"].update(num_iterations=2, max_steps=4, learning_rate=1e-3, max_completion_length=8)
    doc["rewards"] = [str(tmp_path / "length.py") + ":length"]
    doc["eval"]["enabled"] = False
    summary = grpo_ext.train(validate(doc), overwrite=True)
    assert summary["status"] == "completed"
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    ratios = [m["tic_grpo/ratio"] for m in metrics if "tic_grpo/ratio" in m]
    # metrics.jsonl keeps the steps that sampled (1 and 3); the off-policy steps' ratios are the test above's
    assert [m["step"] for m in metrics] == [1, 3] and len(ratios) == 2
    assert all("entropy" in m and "clip_ratio/region_mean" in m for m in metrics if "tic_grpo/ratio" in m)
