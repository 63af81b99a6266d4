"""The sharding configs on the CPU: CPU twins of configs/fsdp.yaml, deepspeed-zero2.yaml and deepspeed-zero3.yaml (the
shipped file with use_cpu, full precision and 2 processes) train a tiny recipe 2 steps over gloo, against
configs/cpu-ddp.yaml on the same recipe and seed. Each process writes what accelerate made of the launch (its
distributed type, the ZeRO stage, whether the weights are partitioned) at the end of training.

FSDP: accelerate 1.16 turns a launch into FSDP only for its GPU-like device types; on the CPU (MULTI_CPU) it keeps
DDP, so the run ends with DDP's weights to the bit, and grpo_ext says so. DeepSpeed ZeRO-2 and ZeRO-3 run on the CPU
(DeepSpeed's CPU accelerator, gloo) when deepspeed is installed, which the project's extras do not do: those tests
skip without it. DeepSpeed builds a C++ op (its shared-memory all-reduce) the first time, with ninja and the system's
compiler: minutes once, seconds afterwards. The trainings compared step by step sample nothing beside training (eval
and pre-flight off); the last test runs ZeRO-3 with both on, sampled from the weights gathered on every process, and
compares what they sampled with DDP's."""

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT
from tests.slow.test_two_nodes import ACCELERATE, two_node_recipe

# Each process trains through the Python API (and logs as the command line does); a callback writes, at the end of
# training, what accelerate made of the launch.
WORKER = """
import json, sys
from pathlib import Path

from transformers import TrainerCallback

import grpo_ext
from grpo_ext.core import console


class Layout(TrainerCallback):
    def on_train_end(self, args, state, control, model=None, **kwargs):
        from accelerate.state import AcceleratorState

        accelerator = AcceleratorState()
        plugin = getattr(accelerator, "deepspeed_plugin", None)
        Path(sys.argv[2], f"rank{args.process_index}.json").write_text(json.dumps({
            "distributed_type": str(accelerator.distributed_type).rsplit(".", 1)[-1],
            "backend": accelerator.backend,
            "zero_stage": plugin.zero_stage if plugin else None,
            "partitioned": any(hasattr(p, "ds_tensor") for p in model.parameters()),
            "dtensor": any(type(p).__name__ == "DTensor" or type(p.data).__name__ == "DTensor" for p in model.parameters()),
        }))


console.show()
grpo_ext.train(sys.argv[1], [f"output_dir={sys.argv[2]}/run", *sys.argv[3:]], callbacks=[Layout()])
"""

# the same batch in every layout: full precision (bf16 under DeepSpeed keeps bf16 weights, not DDP's autocast)
FULL = ["training.bf16=false"]
# and nothing sampled beside training
SAME = [*FULL, "eval.enabled=false", "health.preflight=false"]


def cpu_twin(name: str, folder: Path) -> Path:
    """The shipped config with the CPU's settings: use_cpu, full precision, 2 processes; its sharding as shipped."""
    config = yaml.safe_load((ROOT / "configs" / name).read_text())
    config.update(use_cpu=True, mixed_precision="no", num_processes=2)
    path = folder / f"cpu-{name}"
    path.write_text(yaml.safe_dump(config))
    return path


def trained(config: Path, recipe: Path, out: Path, *overrides: str) -> tuple[list[dict], str]:
    """(what each process found, the launch's stderr) of a 2-process training of ``recipe`` into ``out``/run."""
    out.mkdir()
    (out / "worker.py").write_text(WORKER)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [
            *("nice", "-n", "10", ACCELERATE, "launch", "--config_file", str(config), "--main_process_port", "0"),
            *(str(out / "worker.py"), str(recipe), str(out), *overrides),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)], proc.stderr


def weights(folder: Path) -> dict:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).state_dict()


def steps(run: Path) -> list[tuple[float, float]]:
    return [(line["loss"], line["grad_norm"]) for line in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())]


def skipped(run: Path, err: str) -> list[float]:
    """Each step's share of rows row skipping left out, after checking that the run said it leaves them out."""
    assert "groups: rows with zero advantage are left out" in err
    return [json.loads(line)["skipped_rows"] for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def recipe(tiny_model, tmp_path_factory) -> Path:
    """The two-node test's recipe: 2 steps of 4 groups of 4 a process, row skipping on (three quarters of the rows left out)."""
    folder = tmp_path_factory.mktemp("sharding")
    return two_node_recipe(tiny_model, folder, folder / "unused")


@pytest.fixture(scope="module")
def ddp(recipe, tmp_path_factory) -> Path:
    """The run directory of configs/cpu-ddp.yaml on the recipe."""
    out = tmp_path_factory.mktemp("ddp") / "out"
    found, _ = trained(ROOT / "configs" / "cpu-ddp.yaml", recipe, out, *SAME)
    assert [f["distributed_type"] for f in found] == ["MULTI_CPU", "MULTI_CPU"]
    return out / "run"


def test_fsdp_config_on_the_cpu_runs_ddp_and_says_so(recipe, ddp, tmp_path):
    found, err = trained(cpu_twin("fsdp.yaml", tmp_path), recipe, tmp_path / "out", *SAME)
    # accelerate keeps MULTI_CPU: no FSDP plugin, no DTensor weights, one whole model a process
    assert (
        found
        == [{"distributed_type": "MULTI_CPU", "backend": "gloo", "zero_stage": None, "partitioned": False, "dtensor": False}] * 2
    )
    assert err.count("grpo_ext: FSDP: accelerate shards only on GPUs") == 1  # said once, by the main process
    assert "find_unused_parameters=True was specified in DDP constructor" in err  # torch's DDP wrapped the model
    run = tmp_path / "out" / "run"
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    assert skipped(run, err) == [0.75, 0.75]
    assert steps(run) == steps(ddp)
    theirs, ours = weights(ddp / "final"), weights(run / "final")
    assert all(ours[k].equal(theirs[k]) for k in theirs)  # DDP's weights to the bit


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed (pip install deepspeed)")
@pytest.mark.parametrize(
    "config, stage, partitioned",
    [
        ("deepspeed-zero2.yaml", 2, False),  # optimizer state and gradients sharded, each process the whole weights
        ("deepspeed-zero3.yaml", 3, True),  # the weights partitioned too
    ],
)
def test_deepspeed_zero_on_the_cpu_trains_as_ddp_does(recipe, ddp, tmp_path, config, stage, partitioned):
    import torch

    found, err = trained(cpu_twin(config, tmp_path), recipe, tmp_path / "out", *SAME)
    layout = {
        "distributed_type": "DEEPSPEED",
        "backend": "gloo",
        "zero_stage": stage,
        "partitioned": partitioned,
        "dtensor": False,
    }
    assert found == [layout] * 2
    assert "accelerate shards only on GPUs" not in err
    run = tmp_path / "out" / "run"
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    assert skipped(run, err) == [0.75, 0.75]  # row skipping on, as in the DDP run
    for (loss, norm), (ddp_loss, ddp_norm) in zip(steps(run), steps(ddp), strict=True):
        assert loss == pytest.approx(ddp_loss, abs=1e-6) and norm == pytest.approx(ddp_norm, rel=1e-5)
    theirs, ours, base = (
        weights(ddp / "final"),
        weights(run / "final"),
        weights(Path(yaml.safe_load(recipe.read_text())["model"]["name"])),
    )
    assert max(float((theirs[k] - base[k]).abs().max()) for k in theirs) > 1e-3  # the two steps moved the weights
    for k in theirs:  # DDP's weights to float tolerance (ZeRO-3 sums its gradients in another order)
        torch.testing.assert_close(ours[k], theirs[k], rtol=0, atol=1e-5)


def untimed(record):
    """A summary's record without its timings (``seconds``, ``seconds_per_call``, ...)."""
    if isinstance(record, dict):
        return {k: untimed(v) for k, v in record.items() if "seconds" not in k}
    if isinstance(record, list):
        return [untimed(v) for v in record]
    return record


def sampled(run: Path) -> dict:
    """What a run sampled beside training: its evals before and after (greedy) and its reward pre-flight."""
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    return untimed({key: summary[key] for key in ("eval_before", "eval_after")} | {"preflight": summary["health"]["preflight"]})


@pytest.fixture(scope="module")
def ddp_sampling(recipe, tmp_path_factory) -> Path:
    """The run directory of configs/cpu-ddp.yaml on the recipe with its eval and pre-flight on."""
    out = tmp_path_factory.mktemp("ddp-sampling") / "out"
    trained(ROOT / "configs" / "cpu-ddp.yaml", recipe, out, *FULL)
    return out / "run"


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed (pip install deepspeed)")
def test_zero3_samples_the_eval_and_preflight_as_ddp(recipe, ddp_sampling, tmp_path):
    """A recipe without tools samples its eval (greedy, 2 prompts, before and after) and pre-flight (4 prompts at
    training's temperature) with grpo_ext's own sampler: under ZeRO-3 from the weights gathered on every process, as TRL
    generates, each process its share; the samples and their scores are DDP's (the eval after within float tolerance
    of DDP's weights, greedy)."""
    found, err = trained(cpu_twin("deepspeed-zero3.yaml", tmp_path), recipe, tmp_path / "out", *FULL)
    assert [(f["zero_stage"], f["partitioned"]) for f in found] == [(3, True)] * 2
    for what in ("eval before: 2 prompts", "pre-flight: 4 prompts", "eval after: 2 prompts"):
        assert f"{what} sampled by 2 processes, each its share" in err
    ours, theirs = sampled(tmp_path / "out" / "run"), sampled(ddp_sampling)
    assert ours["eval_before"]["examples"]  # the completions themselves, per prompt
    assert ours == theirs
