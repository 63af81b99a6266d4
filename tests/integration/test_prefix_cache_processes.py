"""The shared-prompt loss pass (run/prefix_cache.py) on two processes: CPU DDP over gloo, launched as a run is. Each
process's micro-batch shares a long prompt head; with ``share_prefix`` on, each process's body encodes it once, and
the gradient after DDP's all-reduce equals the one with every row's prompt encoded whole, with and without row
skipping."""

import json

from tests.integration.test_row_skipping_processes import launch

WORKER = """
import json, sys
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from grpo_ext.run import launch, prefix_cache, skipping, trainer
from grpo_ext.settings import compat

model_dir, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_dir, **compat.dtype_kwargs(torch.float32))
args = dict(output_dir=out, per_device_train_batch_size=6, num_generations=3, max_completion_length=8, beta=0.0,
            use_cpu=True, report_to="none", bf16=False, gradient_checkpointing=False)
results = []
for behaviours in ([], [skipping.SkipZeroAdvantage()]):
    grpo = trainer.make_trainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                                args=trainer.make_config(args), train_dataset=Dataset.from_dict({"prompt": list("abcdef")}),
                                tokenizer=AutoTokenizer.from_pretrained(model_dir), behaviours=behaviours)
    grpo.current_gradient_accumulation_steps = 1
    grpo.model.train()
    ddp = grpo.accelerator.prepare_model(grpo.model)
    assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel), type(ddp)
    rank, vocab = grpo.accelerator.process_index, grpo.model.config.vocab_size
    g = torch.Generator().manual_seed(1 + rank)  # each process its own rows; the head is the same on both
    head = torch.randint(3, vocab, (prefix_cache.MIN_SHARED + 20,), generator=torch.Generator().manual_seed(7)).tolist()
    own = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (2, 5, 3, 4, 2, 6)]
    rows = [head + tail for tail in own]
    width = max(map(len, rows))
    lengths = [8, 3, 6, 1, 5, 7]
    batch = {
        "prompt_ids": torch.tensor([[0] * (width - len(r)) + r for r in rows]),
        "prompt_mask": torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows]),
        "completion_ids": torch.randint(3, vocab, (6, 8), generator=g),
        "completion_mask": torch.tensor([[1] * n + [0] * (8 - n) for n in lengths]),
        # process 1 holds one group with spread, process 0 two; skipping deals them out
        "advantages": torch.tensor([0.5, -0.2, -0.3, 0.4, 0.0, -0.4] if rank == 0 else [0.0, 0.0, 0.0, 1.0, -0.5, -0.5]),
        "num_items_in_batch": torch.tensor(float(2 * sum(lengths))),
    }
    found = {}
    for share in (True, False):
        grpo.share_prefix = share
        grpo.model.zero_grad(set_to_none=True)
        seen = []
        embed = prefix_cache.backbone_of(grpo.model).get_input_embeddings()
        handle = embed.register_forward_pre_hook(lambda _m, a, seen=seen: seen.append(list(a[0].shape)))
        loss = grpo.compute_loss(ddp, dict(batch))
        loss.backward()
        handle.remove()
        grads = {n: p.grad.clone() for n, p in grpo.model.named_parameters() if p.grad is not None}
        found[share] = float(loss), grads, seen
    results.append({
        "skipping": bool(behaviours), "loss": [found[True][0], found[False][0]], "calls": [found[True][2], found[False][2]],
        "names": sorted(found[True][1]) == sorted(found[False][1]),
        "worst": max(float((found[True][1][n] - found[False][1][n]).abs().max()) for n in found[False][1]),
        "largest": max(float(x.abs().max()) for x in found[False][1].values()),
    })
    del ddp, grpo
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(results, f)
del model  # as a run ends (launch.close): the process group goes before the interpreter does
launch.close(True)
"""


def test_the_shared_prompt_loss_pass_on_two_processes_has_the_same_gradient(tiny_model, tmp_path):
    from grpo_ext.run import prefix_cache

    (tmp_path / "worker.py").write_text(WORKER)
    proc = launch(str(tmp_path / "worker.py"), str(tiny_model), str(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        for found in json.loads((tmp_path / f"rank{rank}.json").read_text()):
            what = (rank, found["skipping"])
            assert found["names"], what
            assert found["largest"] > 1e-4 and found["worst"] <= 1e-5 * max(1.0, found["largest"]), (what, found)
            assert abs(found["loss"][0] - found["loss"][1]) <= 1e-6, (what, found["loss"])
            shared_calls, whole_calls = found["calls"]
            rows = 4 if found["skipping"] else 6  # with skipping each process computes its even share of the 8 kept rows
            assert shared_calls[0][0] == 1 and shared_calls[0][1] >= prefix_cache.MIN_SHARED, what  # the head, once
            assert shared_calls[1][0] == rows and whole_calls[0][0] == rows, what
