"""Dynamic sampling (run/dynamic.py) on two processes: CPU DDP over gloo, launched as a run is (accelerate launch with
configs/cpu-ddp.yaml, the harness of test_row_skipping_processes.py). Flat groups are counted over both processes,
both run the same extra rounds, each ends with as many rows as it started with, all informative when the rounds
filled the batch, and the metrics are the whole batch's on each; a two-step training with it on ends."""

import json

import pytest
import yaml

from tests.helpers import resumable_doc
from tests.integration.test_row_skipping_processes import launch

# For each case in turn, each process builds the tiny model's trainer with dynamic sampling and scores its own
# generation batch (2 groups of 4) through TRL's generation and the behaviours' hooks, then writes what came back and
# what was logged: one launch for every case (a launch is most of a case's time: two processes importing TRL).
WORKER = """
import json, os, sys
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from grpo_ext.run import dynamic, launch, trainer, trl_internals
from grpo_ext.settings import compat

model_dir, out, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
RANK = int(os.environ["RANK"])


def spread(prompts, completions, **kwargs):
    # a lively prompt scores 0, 1, 0, 1; a refill prompt too in the first group of process 1's share of a round, so
    # each extra round brings exactly one informative group; any other group is flat
    lively = lambda i, p: "lively" in str(p) or ("refill" in str(p) and RANK == 1 and i < 4)
    return [float(i % 2) if lively(i, p) else 1.0 for i, p in enumerate(prompts)]


for number, case in enumerate(cases):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, **compat.dtype_kwargs(torch.float32))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = dict(output_dir=out, per_device_train_batch_size=8, num_generations=4, max_completion_length=4, beta=0.0,
                use_cpu=True, report_to="none", seed=3)
    grpo = trainer.make_trainer(model=model, reward_funcs=[spread], args=trainer.make_config(args),
                                train_dataset=Dataset.from_dict({"prompt": [f"refill {i}" for i in range(5)]}),
                                tokenizer=tokenizer, behaviours=[dynamic.DynamicSampling(case["rounds"])])
    grpo.model.train()
    rows = [{"prompt": p} for p in case["prompts"][RANK] for _ in range(4)]
    batch = trl_internals.sample_batch(grpo, rows)
    names = ["groups/dropped", "groups/extra_rounds", "groups/flat_kept", "groups/extra_seconds"]
    seen = {
        "prompts": tokenizer.batch_decode(batch["prompt_ids"], skip_special_tokens=True),
        "advantages": batch["advantages"].tolist(),
        "tokens": int((batch["completion_mask"]).sum()),
        "num_items_in_batch": int(batch["num_items_in_batch"]),
        "metrics": {name: trl_internals.logged(grpo, name) for name in names},
    }
    with open(f"{out}/case{number}-rank{RANK}.json", "w") as f:
        json.dump(seen, f)
    del batch, grpo, model
launch.close(True)  # as a run ends: the process group goes before the interpreter does
"""

CASES = [
    # (each process's two prompts (a group of 4 each), max_extra_rounds, groups/dropped, extra_rounds, flat_kept)
    # process 0's groups are all flat, process 1's are not: two rounds bring one group each and fill the batch
    ((["flat a", "flat b"], ["lively c", "lively d"]), 4, 0.5, 2.0, 0.0),
    # three groups of four flat, on both processes: the rounds run out with one group missing, a flat one fills it
    ((["flat a", "flat b"], ["lively c", "flat d"]), 2, 0.75, 2.0, 0.25),
    # no group flat: the batch stays as drawn, no round
    ((["lively a", "lively b"], ["lively c", "lively d"]), 2, 0.0, 0.0, 0.0),
]


@pytest.fixture(scope="module")
def refilled(tiny_model, tmp_path_factory):
    """Every case of CASES, scored in one launch: the folder of its ``case{N}-rank{R}.json``."""
    out = tmp_path_factory.mktemp("refilled")
    (out / "worker.py").write_text(WORKER)
    cases = json.dumps([{"prompts": prompts, "rounds": rounds} for prompts, rounds, *_ in CASES])
    proc = launch(str(out / "worker.py"), str(tiny_model), str(out), cases, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("number", range(len(CASES)), ids=["rounds fill the batch", "a flat group fills it", "no flat group"])
def test_two_processes_refill_the_same_groups(refilled, number):
    prompts, rounds, dropped, extra, flat_kept = CASES[number]
    seen = [json.loads((refilled / f"case{number}-rank{rank}.json").read_text()) for rank in (0, 1)]
    for rank, found in enumerate(seen):
        assert len(found["advantages"]) == 8, rank  # as many rows as it started with: two groups of 4
        assert found["metrics"]["groups/dropped"] == [dropped], rank
        assert found["metrics"]["groups/extra_rounds"] == [extra], rank
        assert found["metrics"]["groups/flat_kept"] == [flat_kept], rank
    assert seen[0]["metrics"] == seen[1]["metrics"]  # the whole batch's, extra seconds included
    # TRL's token count spans every process's rows, recounted on the joined batch
    assert seen[0]["num_items_in_batch"] == seen[1]["num_items_in_batch"] == seen[0]["tokens"] + seen[1]["tokens"]
    advantages = seen[0]["advantages"] + seen[1]["advantages"]
    groups = [advantages[i : i + 4] for i in range(0, 16, 4)]
    informative = round(4 * (1 - flat_kept))
    assert all(any(a != 0 for a in g) for g in groups[:informative])  # only groups with spread reach the loss...
    assert all(a == 0.0 for g in groups[informative:] for a in g)  # ...and the filler moves nothing, exactly
    kept = [p for found in seen for p in found["prompts"][::4]]
    if extra:  # the lively groups first (process 1's moved to process 0), then one refill group per round
        lively = [p for p in (*prompts[0], *prompts[1]) if "lively" in p]
        assert [p.strip() for p in kept[: len(lively)]] == lively, kept
        assert all("refill" in p for p in kept[len(lively) : len(lively) + int(extra)]), kept
    else:
        assert [p.strip() for p in kept] == [*prompts[0], *prompts[1]]


FLAT = ["a flat prompt", "one more flat prompt", "the last flat prompt"]


def test_two_steps_on_two_processes_train_on_refilled_groups(tiny_model, digit_doc, tmp_path):
    # every step draws each of the four prompts once: one process holds two flat groups, the other the lively group
    # and a flat one; refills draw from the same four prompts
    (tmp_path / "quarter.py").write_text(
        "def quarter(completions, prompts, **kwargs):\n"
        "    return [1.0 if 'flat' in str(p) else float(i % 2) for i, p in enumerate(prompts)]\n"
    )
    run = tmp_path / "run"
    doc = resumable_doc(digit_doc, tiny_model, run, max_steps=2, num_generations=4)
    doc["training"].update(save_strategy="no", per_device_train_batch_size=8, max_completion_length=4)
    doc["data"] = {"prompts": [*FLAT, "a lively prompt"]}
    doc["rewards"] = ["./quarter.py:quarter"]
    doc["groups"] = {"dynamic_sampling": True, "max_extra_rounds": 3, "skip_zero_advantage": True}
    doc["health"] = {"preflight": False}
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    proc = launch("-m", "grpo_ext.train", str(path), timeout=600)  # a process left out of a round would hang: killed
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "groups without reward spread are replaced by new prompts' (up to 3 extra rounds a batch)" in proc.stderr
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    for line in lines:
        assert line["groups/dropped"] == 0.75  # three of the four groups, over both processes
        assert 1 <= line["groups/extra_rounds"] <= 3
        if line["groups/flat_kept"] == 0:  # every row of both processes informative: none to leave out
            assert line["skipped_rows"] == 0.0
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
