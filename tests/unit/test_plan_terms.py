"""The plan's memory-feature terms against hand-computed cases: how TRL computes the logits (whole, Liger's
one sequence at a time, or in tiles), vLLM's sleep mode, and the LoRA advice (rank, target layers, learning rate)."""

import pytest
from packaging.version import Version

from grpo_ext import cli
from grpo_ext.recipe import validate
from grpo_ext.run import gpu_share, memory
from grpo_ext.run.gpu_share import GIB, Launch
from grpo_ext.settings import advice, compat

PATHS = [
    # (TRL version, Liger flag set, how the loss gets log-probabilities), read in each version's grpo_trainer.py
    ("0.19.1", False, "full"),
    ("0.19.1", True, "liger"),  # Liger's fused linear GRPO loss
    ("1.12.0", True, "liger"),
    ("1.13.0", False, "full"),
    ("1.13.0", True, "tiles"),  # TRL's own chunked projection behind the Liger flag
    ("1.14.0", True, "tiles"),
    ("1.15.0", False, "tiles"),  # the fused LM head, always
    ("1.16.0", True, "tiles"),
]


@pytest.mark.parametrize("version,liger,path", PATHS)
def test_logprob_path(version, liger, path):
    assert compat.logprob_path(liger, Version(version)) == path


def test_either_liger_name_counts():
    assert compat.uses_liger({"use_liger_loss": True}) and compat.uses_liger({"use_liger_kernel": True})
    assert not compat.uses_liger({"use_liger_kernel": False})


TINY = memory.Shape(
    params=1_000_000, linear_params=800_000, linear_names=(), layers=2, hidden=64, intermediate=128, kv_dim=32, vocab=1000
)
BIG = memory.Shape(
    params=1_000_000, linear_params=800_000, linear_names=(), layers=2, hidden=64, intermediate=128, kv_dim=32, vocab=50_000
)
LOGITS = [
    # (shape, batch, seq, completion, bytes a value, device, path, head trained, bytes by hand)
    (TINY, 2, 30, 10, 2, "cuda", "full", True, 2 * 11 * 1000 * (2 * 2 + 4)),  # 176,000: bf16 logits, fp32 softmax, grad
    (TINY, 2, 30, 10, 2, "cuda", "liger", True, 1 * 11 * 1000 * (2 * 2 + 4)),  # one sequence at a time: 88,000
    (TINY, 2, 30, 10, 2, "cuda", "tiles", False, 2 * 10 * 1000 * 2),  # the completion's 20 tokens x 1000, bf16: 40,000
    (TINY, 2, 30, 10, 2, "cuda", "tiles", True, 40_000 + 1000 * 64 * 4),  # + the head's fp32 gradient: 296,000
    (TINY, 2, 30, 10, 4, "cpu", "tiles", False, 2 * 29 * 1000 * (4 + 3 * 4)),  # every position, tile + 3 fp32 copies
    (TINY, 2, 30, 10, 4, "cpu+scored", "tiles", False, 2 * 10 * 1000 * (4 + 3 * 4)),  # share_prompt: the completions
    (BIG, 64, 500, 200, 2, "cuda", "tiles", False, 4096 * 32768 * 2),  # 12,800 tokens and 50k entries: one full tile
]


@pytest.mark.parametrize("shape,batch,seq,completion,b,device,path,head,expected", LOGITS)
def test_logits_bytes(shape, batch, seq, completion, b, device, path, head, expected):
    device, _, scored = device.partition("+")
    assert memory.logits_bytes(shape, batch, seq, completion, b, device, path, head, scored_only=bool(scored))[0] == expected


@pytest.fixture
def qwen(digit_doc, no_hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    digit_doc["model"]["name"] = "Qwen/Qwen2.5-1.5B-Instruct"
    digit_doc["eval"]["enabled"] = False
    digit_doc["explore"]["end_boost"] = None
    return digit_doc


def estimate(doc: dict, launch: Launch) -> dict[str, int]:
    recipe = validate(doc)
    where = memory.config_source(recipe.model, recipe.base_dir)
    prompt = memory.prompt_tokens(recipe, where)[0]  # as the plan verb counts it
    return {name: n for name, n, _ in memory.estimate(recipe, memory.model_shape(where), prompt, "cuda", launch)}


@pytest.mark.skipif(not compat.has_key("vllm_enable_sleep_mode"), reason="sleep mode needs TRL 0.23")
def test_sleep_mode_counts_vllm_beyond_the_activations(qwen):
    qwen["training"].update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.5)
    launch = Launch(gpu_memory=24 * GIB)
    awake = estimate(qwen, launch)
    qwen["training"]["vllm_enable_sleep_mode"] = True
    asleep = estimate(qwen, launch)
    assert awake["vLLM (colocate)"] == 12 * GIB  # half of 24 GiB, held through the training step
    assert asleep["vLLM (colocate)"] == 12 * GIB - asleep["activations"]  # handed back while the step computes
    assert {k: v for k, v in asleep.items() if k != "vLLM (colocate)"} == {
        k: v for k, v in awake.items() if k != "vLLM (colocate)"
    }
    qwen["training"]["vllm_gpu_memory_utilization"] = 0.01  # a share smaller than the activations: the runtime stays
    assert estimate(qwen, launch)["vLLM (colocate)"] == gpu_share.VLLM_RUNTIME


@pytest.mark.skipif(not compat.has_key("vllm_enable_sleep_mode"), reason="sleep mode needs TRL 0.23")
def test_an_over_budget_colocate_plan_offers_sleep_mode(qwen, write_recipe, capsys):
    qwen["training"].update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.5)
    assert cli.main(["plan", str(write_recipe(qwen)), "--gpu-memory", "12GiB"]) == 1
    out = capsys.readouterr().out
    total = next(x for x in out.splitlines() if x.strip().startswith("total")).split()[1:3]
    line = next(x for x in out.splitlines() if x.strip().startswith("training.vllm_enable_sleep_mode=true ")).split()
    awake = estimate(qwen, Launch(gpu_memory=12 * GIB))
    by_hand = sum(awake.values()) - min(awake["activations"], awake["vLLM (colocate)"] - gpu_share.VLLM_RUNTIME)
    assert line[1:3] == memory.fmt_bytes(by_hand).split() and total == memory.fmt_bytes(sum(awake.values())).split()


LR = [
    # (learning rate, LoRA, parameters, the line starts with, or None)
    (1e-6, True, 7_000_000_000, "training.learning_rate=1e-06 is far below the usual 2e-06-1e-05 for LoRA"),  # 1e-6 < 2e-6/1.5
    (1.5e-6, True, 7_000_000_000, None),  # inside two thirds of LoRA's lower bound
    (1e-5, True, 7_000_000_000, None),  # the range's top: TRL's GRPO reproduction used 1e-5 at rank 1
    (1e-5, False, 7_000_000_000, "training.learning_rate=1e-05 is far above the usual 2e-07-1e-06 for a 7B"),  # > 2 x 1e-6
    (3e-5, True, 7_000_000_000, "training.learning_rate=3e-05 is far above the usual 2e-06-1e-05 for LoRA"),  # > 2 x 1e-5
]


@pytest.mark.parametrize("lr,lora,params,start", LR)
def test_lora_learning_rate_advice(lr, lora, params, start):
    values = {"num_generations": 8, "beta": 0.0, "epsilon": 0.2, "learning_rate": lr}
    lines = advice.check(values.get, params, lora=lora)
    assert [line[: len(start)] for line in lines] == [start] if start else lines == []
    if lora:
        assert all(advice.LORA_SOURCE in line for line in lines)


def test_lora_rank_and_target_advice():
    assert advice.lora(1, 210, 210) == [] and advice.lora(32, 210, 210) == []
    [rank] = advice.lora(64, 210, 210)
    assert rank.startswith("model.lora.r=64: GRPO needs little adapter capacity; ranks 1-32")
    [targets] = advice.lora(16, 56, 196)
    assert targets.startswith("model.lora.target_modules wraps 56 of the 196 linear layers")
    assert advice.lora(64) == [rank]  # without the model's shape only the rank is judged


def test_plan_counts_the_lora_targets(qwen, write_recipe, capsys):
    """Qwen2.5-1.5B has 28 layers of 7 linear layers (q, k, v, o, gate, up, down): q and v alone are 56 of 196."""
    qwen["model"]["lora"] = {"r": 64, "target_modules": ["q_proj", "v_proj"]}
    assert cli.main(["plan", str(write_recipe(qwen))]) == 0
    out = capsys.readouterr().out
    assert "advice: model.lora.target_modules wraps 56 of the 196 linear layers" in out
    assert "advice: model.lora.r=64: GRPO needs little adapter capacity" in out
    # the adapter's size is rank x (in + out) per wrapped layer, by hand: 28 x 64 x ((1536 + 1536) + (1536 + 256))
    assert f"{28 * 64 * (3072 + 1792) / 1e6:.1f}M trainable (LoRA r=64)" in out


def test_a_full_fine_tuning_plan_offers_lora_at_ten_times_the_learning_rate(qwen, write_recipe, capsys):
    qwen["training"]["learning_rate"] = 2e-6
    assert cli.main(["plan", str(write_recipe(qwen)), "--gpu-memory", "8GiB"]) == 1
    out = capsys.readouterr().out
    assert "model.lora=true training.learning_rate=2e-05 " in out


@pytest.mark.parametrize("share", [True, False])
def test_the_prompts_shared_head_counts_once_a_micro_batch(qwen, share):
    """Under groups.share_prompt the loss pass runs the head every training prompt shares once a micro-batch: the
    activations count it once (4 rows of 500 tokens, 400 of them shared: 400 + 4 x 100 tokens, not 2,000)."""
    qwen["groups"] = {"share_prompt": share}
    qwen["training"].update(per_device_train_batch_size=4, num_generations=4, max_completion_length=100)
    recipe = validate(qwen)
    where = memory.config_source(recipe.model, recipe.base_dir)
    shape = memory.model_shape(where)

    def activations(shared: int) -> int:
        rows = memory.estimate(recipe, shape, 400, "cpu", shared=shared)
        return next(n for name, n, _ in rows if name == "activations")

    logits = memory.logits_bytes(shape, 4, 500, 100, 4, "cpu", memory.path_of(recipe), True, share)[0]
    whole, once = activations(0) - logits, activations(400) - logits
    assert once == (whole * 800 // 2000 if share else whole)
