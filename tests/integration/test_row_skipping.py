"""Zero-advantage rows left out of the loss (run/skipping.py): on the tiny model, the loss and every gradient equal
TRL's own on the whole micro-batch, for each loss_type the installed TRL has, with beta 0 (rows skipped) and beta > 0
(nothing skipped); and two training steps end in the same weights with skipping on and off."""

import json

import pytest
import torch
import yaml

from grpo_ext import cli
from grpo_ext.run import skipping, trainer, trl_internals
from grpo_ext.settings import compat
from tests.helpers import resumable_doc

LOSS_TYPES = ["grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo"]
INSTALLED = [t for t in LOSS_TYPES if compat.trl_at_least(compat.VALUES_ADDED.get(("loss_type", t), "0"))]


def _trainer(tiny_model, tmp_path, loss_type, beta):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    kwargs = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=6,
        num_generations=2,
        max_completion_length=12,
        beta=beta,
        loss_type=loss_type,
        use_cpu=True,
        report_to="none",
        epsilon=0.1,
    )
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=trainer.make_config(kwargs),
        train_dataset=Dataset.from_dict({"prompt": ["a", "b", "c"]}),
        tokenizer=AutoTokenizer.from_pretrained(tiny_model),
        behaviours=[skipping.SkipZeroAdvantage()],
    )
    grpo.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this test does not run
    grpo.model.train()
    return grpo


def _inputs(vocab: int, advantages: list[float], beta: float) -> dict:
    g = torch.Generator().manual_seed(1)
    rows, prompt, width = len(advantages), 5, 10
    lengths = [10, 3, 8, 6, 1, 4]  # the longest completions belong to zero-advantage rows: the cut-off is exercised
    prompt_mask = torch.ones(rows, prompt, dtype=torch.long)
    prompt_mask[1, :2] = 0  # left padding
    completion_mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths[:rows]])
    inputs = {
        "prompt_ids": torch.randint(0, vocab, (rows, prompt), generator=g),
        "prompt_mask": prompt_mask,
        "completion_ids": torch.randint(0, vocab, (rows, width), generator=g),
        "completion_mask": completion_mask,
        "advantages": torch.tensor(advantages),
        # ratios of about 1 +- 0.3 against a tiny model's logps (about -log(vocab)): some are clipped at epsilon 0.1
        "old_per_token_logps": -torch.log(torch.tensor(float(vocab))) + 0.3 * torch.randn(rows, width, generator=g),
        "num_items_in_batch": completion_mask.sum().float(),
    }
    if beta:
        inputs["ref_per_token_logps"] = inputs["old_per_token_logps"] + 0.1 * torch.randn(rows, width, generator=g)
    return inputs


def _loss_and_grads(compute, grpo, inputs):
    grpo.model.zero_grad(set_to_none=True)
    loss = compute(grpo.model, dict(inputs))
    loss.backward()
    grads = {n: p.grad.clone() for n, p in grpo.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.parametrize("beta", [0.0, 0.05])
@pytest.mark.parametrize("loss_type", INSTALLED)
def test_gradient_equals_trls_for_every_loss_type(tiny_model, tmp_path, loss_type, beta):
    from trl import GRPOTrainer

    grpo = _trainer(tiny_model, tmp_path, loss_type, beta)
    vocab = grpo.model.config.vocab_size
    for advantages in ([0.0, 1.5, 0.0, -0.7, 0.0, -0.8], [0.0] * 6):
        inputs = _inputs(vocab, advantages, beta)
        theirs, their_grads = _loss_and_grads(lambda m, i: GRPOTrainer.compute_loss(grpo, m, i), grpo, inputs)
        ours, our_grads = _loss_and_grads(grpo.compute_loss, grpo, inputs)
        skipped = trl_internals.logged(grpo, "skipped_rows")[-1]
        assert skipped == (0.0 if beta else advantages.count(0.0) / 6), (loss_type, beta, skipped)
        assert torch.allclose(ours, theirs, atol=1e-6, rtol=0), (loss_type, beta, advantages, float(ours), float(theirs))
        assert set(our_grads) == set(their_grads)  # a skipped step still gives every weight a (zero) gradient
        worst = max(float((our_grads[n] - their_grads[n]).abs().max()) for n in their_grads)
        assert worst <= 1e-6, (loss_type, beta, advantages, worst)
        if any(advantages):
            assert max(float(g.abs().max()) for g in their_grads.values()) > 1e-4  # a test that can fail


def test_what_couples_rows_keeps_them_all(tiny_model, tmp_path):
    grpo = _trainer(tiny_model, tmp_path, "grpo", 0.0)
    assert skipping.blocker(grpo) is None
    grpo.beta = 0.04
    assert "beta" in skipping.blocker(grpo)
    grpo.beta, grpo.loss_type = 0.0, "some_new_loss"
    assert "loss_type" in skipping.blocker(grpo)


def test_kept_rows_and_subset():
    inputs = {
        "completion_ids": torch.arange(12).view(3, 4),
        "completion_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]),
        "advantages": torch.tensor([0.0, 2.0, -1.0]),
        "old_per_token_logps": None,
        "num_items_in_batch": torch.tensor(7.0),
    }
    keep = skipping.kept_rows(inputs)
    assert keep.tolist() == [False, True, True]
    cut = skipping.subset(inputs, keep)
    assert cut["completion_ids"].tolist() == [[4, 5], [8, 9]]  # the columns only the skipped row used are cut off
    assert cut["num_items_in_batch"] == 7 and cut["old_per_token_logps"] is None
    assert skipping.scale("grpo", inputs, keep) == 2 / 3
    assert skipping.scale("bnpo", inputs, keep) == 3 / 7
    assert skipping.scale("dapo", inputs, keep) == 1.0
    inputs["advantages"] = torch.zeros(3)
    assert not skipping.kept_rows(inputs).any()
    inputs["advantages"] = torch.ones(3)
    assert skipping.kept_rows(inputs) is None  # nothing to leave out: TRL's own path


def test_two_steps_end_in_the_same_weights_with_skipping_on_and_off(tiny_model, digit_doc, tmp_path, no_hub):
    from safetensors.torch import load_file

    start = load_file(tiny_model / "model.safetensors")
    (tmp_path / "half.py").write_text(  # a flat group for one prompt, spread for the other: half the rows skipped
        "def half(completions, prompts, **kwargs):\n"
        "    return [1.0 if 'flat' in str(p) else float(len(str(c))) for p, c in zip(prompts, completions)]\n"
    )
    weights = {}
    for skip in (True, False):
        doc = resumable_doc(digit_doc, tiny_model, tmp_path / f"run-{skip}", max_steps=2, num_generations=4)
        doc["training"].update(save_strategy="no", per_device_train_batch_size=8, max_completion_length=8, learning_rate=1e-3)
        doc["data"] = {"prompts": ["a flat prompt", "a lively prompt"]}
        doc["rewards"] = ["./half.py:half"]
        doc["groups"] = {"skip_zero_advantage": skip}
        doc["health"] = {"preflight": False}
        doc["eval"] = {"enabled": False}
        path = tmp_path / f"r-{skip}.yaml"
        path.write_text(yaml.safe_dump(doc))
        assert cli.main(["train", str(path)]) == 0
        weights[skip] = load_file(tmp_path / f"run-{skip}" / "final" / "model.safetensors")
        lines = [json.loads(line) for line in (tmp_path / f"run-{skip}" / "metrics.jsonl").read_text().splitlines()]
        if skip:
            assert [line["skipped_rows"] for line in lines] == [0.5, 0.5]
        else:
            assert not any("skipped_rows" in line for line in lines)
    worst = max(float((weights[True][k] - weights[False][k]).abs().max()) for k in weights[False])
    assert worst <= 1e-6, worst
    moved = max(float((weights[True][k] - start[k]).abs().max()) for k in start)
    assert moved > 1e-4, moved  # the steps did train: the equality is not of two untouched models


@pytest.mark.parametrize(
    "advantages, rows, chosen",
    [
        ([0.0, 2.0, 0.0, 0.0], 3, [False, True, True, True]),  # the two shortest rows left out join the kept one
        ([0.0, 0.0, 0.0, 0.0], 1, [False, False, False, True]),  # nothing kept: the one shortest row
        ([0.0, 2.0, 0.0, -1.0], 2, [False, True, False, True]),  # as many kept as asked: nothing added
        ([0.0, 2.0, 0.0, 0.0], 4, [True, True, True, True]),  # every row
    ],
)
def test_padded_adds_the_shortest_rows_left_out(advantages, rows, chosen):
    inputs = {"completion_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])}
    keep = torch.tensor(advantages) != 0
    assert skipping.padded(inputs, keep, rows).tolist() == chosen
