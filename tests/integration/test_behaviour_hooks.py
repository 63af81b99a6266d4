"""The trainer of run/trl_internals.py on the installed TRL and the tiny model: it calls each behaviour at its hook,
in the list's order, and goes on with what the hooks return (the compatibility matrix runs this on every TRL row)."""

import torch

from grpo_ext.run import trainer, trl_internals
from grpo_ext.run.trl_internals import Behaviour

PROMPTS = ["a", "b"]
GROUP = 2


class Recording(Behaviour):
    """Writes each hook it is called at into ``calls``; its batch hook marks the batch, its loss hook adds to the loss,
    and, with ``more``, its batch hook generates one more group through ``Step.generate``."""

    def __init__(self, name: str, calls: list, more: bool = False):
        self.name, self.calls, self.more = name, calls, more

    def on_rewards(self, step, completions, completion_ids, scores):
        self.calls.append((self.name, "rewards", step.training, len(completions), tuple(scores.shape)))

    def on_batch(self, step, batch):
        self.calls.append((self.name, "batch", step.training))
        if self.more:
            extra = step.generate([{"prompt": "c"}] * GROUP)
            self.calls.append((self.name, "generated", extra["completion_ids"].size(0)))
        return {**batch, f"seen_by_{self.name}": True}

    def on_loss(self, step, model, inputs, loss):
        self.calls.append((self.name, "loss", sorted(k for k in inputs if k.startswith("seen_by_"))))
        return loss(inputs) + 1.0


def _trainer(tiny_model, tmp_path, behaviours):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    kwargs = dict(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=GROUP * len(PROMPTS),
        num_generations=GROUP,
        max_completion_length=4,
        beta=0.0,
        use_cpu=True,
        report_to="none",
    )
    grpo = trainer.make_trainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model),
        reward_funcs=[lambda completions, **_: [float(len(str(c))) for c in completions]],
        args=trainer.make_config(kwargs),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS + ["c"]}),
        tokenizer=AutoTokenizer.from_pretrained(tiny_model),
        behaviours=behaviours,
    )
    grpo.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this test does not run
    return grpo


def test_each_hook_calls_the_behaviours_in_order(tiny_model, tmp_path):
    from trl import GRPOTrainer

    calls = []
    grpo = _trainer(tiny_model, tmp_path, [Recording("first", calls, more=True), Recording("second", calls)])
    rows = [{"prompt": p} for p in PROMPTS for _ in range(GROUP)]
    grpo.model.train()
    batch = trl_internals.sample_batch(grpo, rows)
    assert batch["seen_by_first"] and batch["seen_by_second"]  # the batch each hook returned is the one kept
    reward = ("rewards", True, len(rows), (len(rows), 1))
    assert calls == [
        ("first", *reward),
        ("second", *reward),
        ("first", "batch", True),
        # Step.generate: TRL's generation and scoring, the rewards hooks called and the batch hooks not
        ("first", "rewards", True, GROUP, (GROUP, 1)),
        ("second", "rewards", True, GROUP, (GROUP, 1)),
        ("first", "generated", GROUP),
        ("second", "batch", True),
    ]
    calls.clear()
    inputs = {k: v for k, v in batch.items() if not k.startswith("seen_by_")}
    ours = grpo.compute_loss(grpo.model, dict(inputs))
    theirs = GRPOTrainer.compute_loss(grpo, grpo.model, dict(inputs))
    assert [c[:2] for c in calls] == [("first", "loss"), ("second", "loss")]  # the first in the list wraps the others
    assert torch.allclose(ours, theirs + 2.0)  # each hook's loss is the one trained on
    calls.clear()
    grpo.model.eval()
    trl_internals.sample_batch(grpo, rows[:GROUP])
    grpo.compute_loss(grpo.model, dict(inputs))
    assert [c[:3] for c in calls if c[1] != "generated"] == [  # eval sampling: rewards and batch hooks, no loss hook
        ("first", "rewards", False),
        ("second", "rewards", False),
        ("first", "batch", False),
        ("first", "rewards", False),
        ("second", "rewards", False),
        ("second", "batch", False),
    ]


def test_without_behaviours_the_trainer_is_trls(tiny_model, tmp_path):
    from trl import GRPOTrainer

    grpo = _trainer(tiny_model, tmp_path, [])
    grpo.model.train()
    batch = trl_internals.sample_batch(grpo, [{"prompt": p} for p in PROMPTS for _ in range(GROUP)])
    assert not any(k.startswith("seen_by_") for k in batch)
    ours = grpo.compute_loss(grpo.model, dict(batch))
    assert torch.equal(ours, GRPOTrainer.compute_loss(grpo, grpo.model, dict(batch)))
