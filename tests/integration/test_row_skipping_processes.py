"""Row skipping (run/skipping.py) on two processes: CPU DDP over gloo, launched as a run is (accelerate launch with
configs/cpu-ddp.yaml). Each process's gradient, after DDP's all-reduce, equals the one TRL's own loss gives on the
same global batch, for each loss_type the installed TRL has, including micro-batches where one process or both have
no row to learn from; and a two-step training with skipping on logs its skip share and ends."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers import ROOT, resumable_doc

# Each process builds the tiny model's trainer, wraps the model in DDP (accelerate's prepare, as Trainer does), and
# for each case and loss_type runs a backward pass through TRL's loss and one through grpo_ext's, writing what it saw.
WORKER = """
import json, sys
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOTrainer
from grpo_ext.run import launch, skipping, trainer, trl_internals
from grpo_ext.settings import compat

model_dir, out, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_dir, **compat.dtype_kwargs(torch.float32))
args = dict(output_dir=out, per_device_train_batch_size=6, num_generations=2, max_completion_length=12, beta=0.0,
            use_cpu=True, report_to="none", epsilon=0.1, bf16=False)  # float32: a row dealt elsewhere sums alike
grpo = trainer.make_trainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                            args=trainer.make_config(args), train_dataset=Dataset.from_dict({"prompt": list("abcdef")}),
                            tokenizer=AutoTokenizer.from_pretrained(model_dir), behaviours=[skipping.SkipZeroAdvantage()])
grpo.current_gradient_accumulation_steps = 1
grpo.model.train()
ddp = grpo.accelerator.prepare_model(grpo.model)
assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel), type(ddp)
rank, vocab = grpo.accelerator.process_index, grpo.model.config.vocab_size


def inputs(advantages):
    g = torch.Generator().manual_seed(1 + rank)  # each process its own prompts and completions
    rows, width = len(advantages), 10
    lengths = [10, 3, 8, 6, 1, 4] if rank == 0 else [2, 9, 5, 10, 7, 3]
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    # prompts 5 tokens wide on process 0, 7 on process 1 (left-padded): a row dealt to the other process is padded
    # anew, which moves its positions and changes nothing a rotary model sees
    prompt = 5 if rank == 0 else 7
    pads = [0, 2, 0, 1, 2, 0] if rank == 1 else [0] * 6
    return {
        "prompt_ids": torch.randint(0, vocab, (rows, prompt), generator=g),
        "prompt_mask": torch.tensor([[0] * n + [1] * (prompt - n) for n in pads]),
        "completion_ids": torch.randint(0, vocab, (rows, width), generator=g),
        "completion_mask": mask,
        "advantages": torch.tensor(advantages),
        "old_per_token_logps": -torch.log(torch.tensor(float(vocab))) + 0.3 * torch.randn(rows, width, generator=g),
        "num_items_in_batch": torch.tensor(37.0),  # the whole batch's tokens, as TRL gathers them before the loss
    }


def backward(compute, batch):
    grpo.model.zero_grad(set_to_none=True)
    before = {name: len(trl_internals.logged(grpo, name)) for name in METRICS}
    loss = compute(ddp, dict(batch))
    loss.backward()
    grads = {n: p.grad.clone() for n, p in grpo.model.named_parameters() if p.grad is not None}
    return float(loss), grads, {name: len(trl_internals.logged(grpo, name)) - before[name] for name in METRICS}


METRICS = ["skipped_rows", "entropy", "clip_ratio/low_min"]  # TRL's second gathers one value per row


seen = []
for loss_type in json.loads(sys.argv[4]):
    grpo.loss_type = loss_type
    for case in cases:
        batch = inputs(case[rank])
        theirs, their_grads, _ = backward(lambda m, i: GRPOTrainer.compute_loss(grpo, m, i), batch)
        ours, our_grads, logged = backward(grpo.compute_loss, batch)
        seen.append({
            "loss_type": loss_type, "case": case, "loss": [ours, theirs], "names": sorted(our_grads) == sorted(their_grads),
            "worst": max(float((our_grads[n] - their_grads[n]).abs().max()) for n in their_grads),
            "largest": max(float(g.abs().max()) for g in their_grads.values()),
            "skipped_rows": trl_internals.logged(grpo, "skipped_rows")[-1], "logged": logged,
        })
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(seen, f)
del ddp, grpo, model  # as a run ends (launch.close): the process group goes before the interpreter does
launch.close(True)
"""

# advantages of process 0's micro-batch, then process 1's (6 rows each)
CASES = [
    [[0.0, 1.5, 0.0, -0.7, 0.0, -0.8], [0.0, 0.0, 0.5, 0.0, -0.5, 0.0]],  # 3 and 2 rows kept: process 1 pads to 3
    # process 1 has no row to learn from: dealt out, each computes 2 of the 3 (process 1 the third and one that adds
    # nothing); with bnpo, process 1 computes 3 that add nothing
    [[0.0, 1.5, 0.0, -0.7, 0.0, -0.8], [0.0] * 6],
    # process 0 keeps every row: dealt out, 3 each; with bnpo both compute the whole micro-batch
    [[1.0, -1.0, 0.5, -0.5, 0.2, -0.2], [0.0] * 6],
    [[0.0] * 6, [0.0] * 6],  # no row anywhere: one row each, to stay in step, and no metrics of it
]
# what each case leaves out of the loss's passes, the same share on both processes: where the kept rows are dealt
# out evenly, and with bnpo (whose normaliser is each process's own token count), where they are not
SKIPPED = {"dealt": [0.5, 1 - 2 / 6, 0.5, 5 / 6], "bnpo": [0.5, 0.5, 0.0, 5 / 6]}


def launch(*args: str, timeout: int) -> subprocess.CompletedProcess:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    # port 0: the launcher takes a free port, so two launches side by side (pytest -n 2) never meet on 29500
    config = ("--config_file", str(ROOT / "configs" / "cpu-ddp.yaml"), "--main_process_port", "0")
    cmd = [accelerate, "launch", *config, *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def test_gradient_on_two_processes_equals_trls(tiny_model, tmp_path):
    from grpo_ext.settings import compat
    from tests.integration.test_row_skipping import INSTALLED

    assert compat.trl_at_least("1.0")  # the worker's loss types and metrics are TRL 1.x's
    (tmp_path / "worker.py").write_text(WORKER)
    proc = launch(
        str(tmp_path / "worker.py"), str(tiny_model), str(tmp_path), json.dumps(CASES), json.dumps(INSTALLED), timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    both = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for rank, seen in enumerate(both):
        assert len(seen) == len(CASES) * len(INSTALLED)
        for i, found in enumerate(seen):
            what = (rank, found["loss_type"], found["case"])
            skipped = SKIPPED["bnpo" if found["loss_type"] == "bnpo" else "dealt"][i % len(CASES)]
            assert found["skipped_rows"] == skipped, what
            # a process's loss is over the rows it computed, which may be the other's: the processes' sum is the same
            ours, theirs = (sum(seen_by[i]["loss"][k] for seen_by in both) for k in (0, 1))
            assert abs(ours - theirs) <= 1e-6 * max(1.0, abs(theirs)), (what, ours, theirs)  # float32 sums, other orders
            assert found["names"], what  # every weight has a gradient, as with TRL's loss
            assert found["worst"] <= 1e-6, (what, found["worst"])
            clipped = found["loss_type"] in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")  # TRL logs clip ratios
            if any(any(row) for row in found["case"]):
                assert found["largest"] > 1e-4, what  # a gradient that can differ: the equality is not of zeros
                assert found["logged"] == {"skipped_rows": 1, "entropy": 1, "clip_ratio/low_min": int(clipped)}, what
            else:  # TRL's entropy and clip ratios of the row computed only to stay in step are not logged
                assert found["logged"] == {"skipped_rows": 1, "entropy": 0, "clip_ratio/low_min": 0}, what


FLAT = ["a flat prompt", "one more flat prompt", "the last flat prompt"]


@pytest.mark.parametrize(
    "last, skipped, unchanged",
    [
        # each step one process holds the lively group and a flat one, the other two flat groups: the lively group's
        # 4 rows are dealt out, 2 to each process (a quarter of its 8)
        ("a lively prompt", 0.75, False),
        # no process has a row to learn from: each computes one of its 8, the weights stay the base model's, and
        # the run says so
        ("a fourth flat prompt", 7 / 8, True),
    ],
)
def test_two_steps_on_two_processes_log_the_skip_share(tiny_model, digit_doc, tmp_path, last, skipped, unchanged):
    (tmp_path / "quarter.py").write_text(
        "def quarter(completions, prompts, **kwargs):\n"
        "    return [1.0 if 'flat' in str(p) else float(i % 2) for i, p in enumerate(prompts)]\n"
    )
    run = tmp_path / "run"
    doc = resumable_doc(digit_doc, tiny_model, run, max_steps=2, num_generations=4)
    doc["training"].update(save_strategy="no", per_device_train_batch_size=8, max_completion_length=4, learning_rate=1e-3)
    doc["data"] = {"prompts": [*FLAT, last]}
    doc["rewards"] = ["./quarter.py:quarter"]
    doc["groups"] = {"skip_zero_advantage": True}
    doc["health"] = {"preflight": False}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    proc = launch("-m", "grpo_ext.train", str(path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rows with zero advantage are left out" in proc.stderr
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert [line["skipped_rows"] for line in lines] == [skipped, skipped]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert bool(summary["final"]["unchanged"]) == unchanged, summary["final"]
    if unchanged:
        from safetensors.torch import load_file

        start, end = load_file(tiny_model / "model.safetensors"), load_file(run / "final" / "model.safetensors")
        assert all(torch.equal(start[k], end[k]) for k in start)  # exactly: every gradient was zero
