"""After the last step, the optimizer's state and the gradients are let go of before the eval after samples."""

import torch

from grpo_ext.run import trainer


class Wrapped:
    """An optimizer under a wrapper that keeps it as ``.optimizer`` (accelerate's)."""

    def __init__(self, optimizer):
        self.optimizer = optimizer


class Trainer:
    def __init__(self, model, optimizer, deepspeed=False):
        self.model, self.optimizer, self.is_deepspeed_enabled = model, Wrapped(optimizer), deepspeed


def stepped(deepspeed=False) -> Trainer:
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    assert optimizer.state and all(p.grad is not None for p in model.parameters())
    return Trainer(model, optimizer, deepspeed)


def test_the_moments_and_gradients_are_let_go_of():
    t = stepped()
    weights = [p.detach().clone() for p in t.model.parameters()]
    trainer.release_training_state(t)
    assert not t.optimizer.optimizer.state
    assert all(p.grad is None for p in t.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(weights, t.model.parameters(), strict=True))  # the weights stay


def test_a_sharded_optimizer_keeps_its_state():
    t = stepped(deepspeed=True)
    trainer.release_training_state(t)
    assert t.optimizer.optimizer.state and all(p.grad is None for p in t.model.parameters())
