"""`grpo-ext plan` with no hub: the table of model shapes, vLLM's share of the GPU, and sharded processes."""

import contextlib
import doctest
import io

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.recipe import load, validate
from grpo_ext.run import gpu_share, memory
from grpo_ext.run.gpu_share import GIB, Launch
from grpo_ext.settings import batch_rules, shapes
from tests.helpers import ROOT, TIMED, best_beside

PUBLISHED_PARAMS = [
    # (table entry, parameters as its model card or hub page states them, decimals of that figure, in billions)
    ("Qwen/Qwen2.5-0.5B", 0.49, 2),  # Qwen2.5 card: 0.49B
    ("Qwen/Qwen2.5-1.5B", 1.54, 2),  # 1.54B
    ("Qwen/Qwen2.5-3B", 3.09, 2),  # 3.09B
    ("Qwen/Qwen2.5-7B", 7.61, 2),  # 7.61B (untied head, larger vocabulary)
    ("Qwen/Qwen2.5-Math-1.5B", 1.54, 2),  # the 1.5B shape
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.78, 2),  # hub page: 1.78B (Qwen2.5-1.5B with an untied head)
    ("Qwen/Qwen3-0.6B", 0.6, 1),  # Qwen3 card: 0.6B
    ("Qwen/Qwen3-1.7B", 1.7, 1),  # 1.7B
    ("Qwen/Qwen3-4B", 4.0, 1),  # 4.0B
    ("Qwen/Qwen3-8B", 8.2, 1),  # 8.2B
    ("meta-llama/Llama-3.2-1B", 1.23, 2),  # Llama 3.2 card: 1.23B
    ("meta-llama/Llama-3.2-3B", 3.21, 2),  # 3.21B
    ("meta-llama/Llama-3.1-8B", 8.03, 2),  # hub page: 8.03B
    ("meta-llama/Llama-2-70b-hf", 69.0, 1),  # hub page: 69B
    ("HuggingFaceTB/SmolLM2-135M", 0.135, 3),  # 135M
    ("HuggingFaceTB/SmolLM2-360M", 0.36, 2),  # 360M (362M on the hub page)
    ("HuggingFaceTB/SmolLM2-1.7B", 1.71, 2),  # hub page: 1.71B
    ("google/gemma-2-2b", 2.61, 2),  # hub page: 2.61B
    ("google/gemma-2-9b", 9.24, 2),  # hub page: 9.24B
    ("google/gemma-3-1b-pt", 1.0, 1),  # 1B
    ("microsoft/Phi-3-mini-4k-instruct", 3.8, 1),  # card: 3.8B
    ("microsoft/Phi-3.5-mini-instruct", 3.8, 1),  # card: 3.8B
    ("microsoft/Phi-4-mini-instruct", 3.8, 1),  # card: 3.8B
]


def test_every_table_entry_is_checked():
    assert sorted(name for name, _, _ in PUBLISHED_PARAMS) == sorted(shapes.MODELS)


@pytest.mark.parametrize("hub_id,billions,decimals", PUBLISHED_PARAMS)
def test_table_shape_has_the_published_size(hub_id, billions, decimals):
    shape = memory.model_shape(shapes.config_fields(hub_id))
    assert abs(shape.params / 1e9 - billions) < 10**-decimals  # within one unit of the last digit (cards round or cut)


LOOKUPS = [
    # (model.name, table entry it finds)
    ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B"),  # instruct variant of a base entry
    ("qwen/qwen3-1.7b", "Qwen/Qwen3-1.7B"),  # hub ids are case-insensitive
    ("Qwen/Qwen3-4B-Base", "Qwen/Qwen3-4B"),  # base variant of a hybrid entry
    ("google/gemma-3-1b-it", "google/gemma-3-1b-pt"),  # -it and -pt share a shape
    ("meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-1B"),
    ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-1.7B"),
    ("meta-llama/Llama-2-70b-chat-hf", "meta-llama/Llama-2-70b-hf"),  # a two-part suffix
    ("Qwen/Qwen2.5-1.5B-Instruct-GGUF", None),  # another artefact, not a variant
    ("nobody/no-such-model", None),
]


@pytest.mark.parametrize("name,expected", LOOKUPS)
def test_find(name, expected):
    assert shapes.find(name) == expected


@pytest.mark.parametrize("module", [shapes, gpu_share])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


FAMILIES = [
    # the 1.5B-ish size of each family in the table, as a user names it
    "Qwen/Qwen2.5-1.5B-Instruct",
    "Qwen/Qwen3-1.7B",
    "meta-llama/Llama-3.2-1B-Instruct",
    "HuggingFaceTB/SmolLM2-1.7B-Instruct",
    "google/gemma-2-2b-it",
    "google/gemma-3-1b-it",
    "microsoft/Phi-4-mini-instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
]
MODES = [
    # (extra overrides, CLI flags, a row the plan must show)
    ([], [], "generation cache"),  # generation by the trained model
    (["training.use_vllm=true", "training.vllm_mode=colocate"], [], "vLLM (colocate)"),  # vLLM beside it
    ([], ["--gpus", "4", "--sharding", "zero3"], "gathered weights"),  # DeepSpeed ZeRO-3 over 4 GPUs
    ([], ["--gpus", "4", "--sharding", "fsdp"], "split over 4 (FSDP)"),  # FSDP over 4 GPUs
]


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """One whole offline plan outside the timing: the first one imports torch, transformers and datasets."""
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()):
        for name, value in [("HF_HUB_OFFLINE", "1"), ("HF_HUB_CACHE", str(tmp_path_factory.mktemp("empty-hub-cache")))]:
            patch.setenv(name, value)
        assert cli.main(["plan", "digit", "model.name=Qwen/Qwen3-0.6B", "--gpu-memory", "80GiB"]) == 0


@pytest.fixture
def offline(monkeypatch, tmp_path, no_hub, warm):
    """No hub, and an empty hub cache: only the table can tell the shape."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))


@pytest.mark.parametrize("mode", MODES, ids=["hf", "vllm", "zero3", "fsdp"])
@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("timed", TIMED)
def test_each_family_plans_offline_fast(timed, name, mode, offline, digit_doc, write_recipe, capsys):
    overrides, flags, row = mode
    digit_doc["model"]["name"] = name
    digit_doc["explore"]["end_boost"] = None  # the digit recipe's end boost is a setting of transformers' sampling, not vLLM's
    path = write_recipe(digit_doc)
    plan = ["plan", str(path), *overrides, "--gpu-memory", "80GiB", *flags]
    assert cli.main(plan) == 0
    out = capsys.readouterr().out
    assert row in out and "fits in 80.00 GiB" in out
    if timed:  # the table answers at once: a plan is a validation and the model's shape built on the meta device, no hub
        recipe = load(str(path), list(overrides))  # wait; the reference is those two, side by side

        def reference() -> None:
            cli.main(["validate", str(path), *overrides])
            memory.model_shape(memory.config_source(recipe.model, recipe.base_dir))

        work, spent = best_beside(lambda: cli.main(plan), reference)
        assert work < 3 * spent, f"plan {work:.3f} s, validate and the model's shape {spent:.3f} s"


def test_hub_model_outside_the_table_names_it(offline, digit_doc, write_recipe, capsys):
    digit_doc["model"]["name"] = "Qwen/Qwen2.5-1.5B-Instrukt"
    assert cli.main(["plan", str(write_recipe(digit_doc))]) == 2
    err = capsys.readouterr().err
    assert "table of shapes (grpo-ext ls lists its" in err and "did you mean 'Qwen/Qwen2.5-1.5B'" in err


@pytest.fixture
def qwen_doc(digit_doc, offline):
    digit_doc["model"]["name"] = "Qwen/Qwen2.5-1.5B-Instruct"
    digit_doc["eval"]["enabled"] = False
    digit_doc["explore"]["end_boost"] = None  # vLLM has no end boost; the hf rows plan the same without it
    return digit_doc


ONE_24GIB_GPU = Launch(gpu_memory=24 * GIB)


def rows(doc: dict, launch: Launch = ONE_24GIB_GPU) -> dict[str, int]:
    recipe = validate(doc)
    shape = memory.model_shape(memory.config_source(recipe.model, recipe.base_dir))
    return {name: n for name, n, _ in memory.estimate(recipe, shape, 100, "cuda", launch)}


VLLM = [
    # (training overrides, vLLM row expected, generation cache expected)
    ({}, None, True),  # the trained model generates: its own cache
    ({"use_vllm": True, "vllm_mode": "server"}, None, False),  # the server's GPU generates: nothing here
    ({"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.5}, 12 * GIB, False),  # half of 24 GiB
]


@pytest.mark.parametrize("training,vllm_row,cache", VLLM)
def test_vllm_share(training, vllm_row, cache, qwen_doc):
    qwen_doc["training"].update(training)
    parts = rows(qwen_doc)
    assert parts.get("vLLM (colocate)") == vllm_row
    assert ("generation cache" in parts) == cache


SHARDING = [
    # (launch, component, its size against one DDP process: "same", "quarter" or "lower")
    (Launch(4, "ddp"), "weights", "same"),  # DDP replicates everything
    (Launch(4, "zero2"), "weights", "same"),  # ZeRO-2 keeps whole weights
    (Launch(4, "zero2"), "gradients + AdamW", "lower"),  # ... and splits fp32 master + moments
    (Launch(4, "zero3"), "weights", "quarter"),  # ZeRO-3 splits the weights
    (Launch(4, "zero3"), "reference model", "quarter"),  # ... and the reference model's
    (Launch(4, "fsdp"), "weights", "quarter"),  # FSDP splits them too
    (Launch(4, "fsdp"), "gradients + AdamW", "lower"),
]


@pytest.mark.parametrize("launch,component,relation", SHARDING)
def test_sharding(launch, component, relation, qwen_doc):
    qwen_doc["training"]["beta"] = 0.04
    one, shared = rows(qwen_doc, Launch()), rows(qwen_doc, launch)
    expected = {"same": one[component], "quarter": one[component] // 4}.get(relation)
    assert shared[component] == expected if expected is not None else shared[component] < one[component]


def test_colocate_that_cannot_fit_says_so(qwen_doc, write_recipe, capsys):
    qwen_doc["training"].update(use_vllm=True, vllm_mode="colocate")
    path = write_recipe(qwen_doc)
    assert cli.main(["plan", str(path), "--gpu-memory", "6GiB"]) == 1
    assert "vLLM needs at least" in capsys.readouterr().out
    qwen_doc["training"]["vllm_gpu_memory_utilization"] = 0.9  # leaves the trainer too little
    assert cli.main(["plan", str(write_recipe(qwen_doc)), "--gpu-memory", "24GiB"]) == 1
    out = capsys.readouterr().out
    suggested = yaml.safe_load(out.split("vllm_gpu_memory_utilization: ", 1)[1].split()[0])
    assert 0.1 < suggested < 0.9 and f"training.vllm_gpu_memory_utilization={suggested}" in out
    qwen_doc["training"]["vllm_gpu_memory_utilization"] = suggested
    assert cli.main(["plan", str(write_recipe(qwen_doc)), "--gpu-memory", "24GiB"]) == 0


def test_vllm_on_the_cpu_is_refused(qwen_doc, write_recipe, capsys):
    qwen_doc["training"].update(use_vllm=True)
    assert cli.main(["plan", str(write_recipe(qwen_doc)), "--device", "cpu"]) == 2
    assert "training.use_vllm: needs CUDA GPUs" in capsys.readouterr().err


def test_published_checks_stay_within_30_percent(offline):
    """benchmarks/plan_check.py: every check recipe validates and plans offline; the median error stays in +-30%."""
    import importlib.util
    import statistics

    spec = importlib.util.spec_from_file_location("plan_check", ROOT / "benchmarks" / "plan_check.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert sorted(c.recipe for c in bench.CHECKS) == sorted(p.name for p in bench.HERE.glob("*.yaml"))
    results = bench.ratios()
    assert len(results) >= 6
    assert statistics.median(abs(ratio - 1) for _, _, ratio in results) <= 0.30


BAD_FLAGS = [
    # (CLI flags, the start of the one error line)
    (["--gpus", "0"], "error: --gpus: 0 is not a number of GPUs"),
    (["--sharding", "zero4"], "error: --sharding: unknown 'zero4'; did you mean 'zero3'?"),
    (["--device", "cpu", "--sharding", "zero3"], "error: --sharding zero3: needs CUDA GPUs"),
]


@pytest.mark.parametrize("flags,error", BAD_FLAGS)
def test_bad_launch_flags_exit_2(flags, error, qwen_doc, write_recipe, capsys):
    assert cli.main(["plan", str(write_recipe(qwen_doc)), *flags]) == 2
    assert capsys.readouterr().err.startswith(error)


def test_the_plan_says_where_the_shape_came_from(qwen_doc, write_recipe, capsys):
    assert cli.main(["plan", str(write_recipe(qwen_doc)), "--gpu-memory", "80GiB"]) == 0
    assert "shape of Qwen/Qwen2.5-1.5B from grpo_ext's table" in capsys.readouterr().out


@pytest.mark.parametrize(
    "bf16,share_prompt,copied,key_bytes,value_bytes",
    [(False, True, False, 4, 4), (True, True, False, 2, 2), (True, True, True, 2, 2), (True, False, False, 4, 2)],
)
def test_a_cpu_counts_the_generation_cache_as_it_is_stored(bf16, share_prompt, copied, key_bytes, value_bytes, monkeypatch):
    """A CPU with bf16 runs under autocast over float32 weights: the values leave their projection in bf16, and the
    keys, float32 out of the rotary embedding, are stored in bf16 where grpo_ext's shared-prompt cache holds them
    (``prefix_cache._narrowed``). With the prompt shared, the eval's cache holds its 454 tokens once for the 64
    conversations (``shared_head``), unless ``GRPO_EXT_PREFIX_ONCE=0`` copies them into each; a training step's 16
    copy them, and the larger of the two is counted."""
    from grpo_ext.run import hardware, shared_head

    monkeypatch.setattr(hardware, "uses_bf16", lambda recipe: bf16)
    if copied:
        monkeypatch.setenv(shared_head.OFF, "0")
    recipe = load("arith-tools", [f"groups.share_prompt={str(share_prompt).lower()}"])
    shape = memory.model_shape(memory.config_source(recipe.model, recipe.base_dir))
    parts = {name: n for name, n, _ in memory.estimate(recipe, shape, 454, "cpu", shared=454)}
    seq = 454 + recipe.training.effective("max_completion_length")

    def kv(rows: int, tokens: int) -> int:
        return rows * tokens * shape.layers * shape.kv_dim * (key_bytes + value_bytes)

    once = share_prompt and not copied  # the eval's 64 conversations; a training step's 16 copy the prompt
    generation = batch_rules.generation_batch(recipe.training.effective)
    batches = [(kv(1, 454) + kv(64, seq - 454) if once else kv(64, seq), 64), (kv(generation, seq), generation)]
    expected, rows = max(batches)
    assert parts["generation cache"] == expected + rows * shape.vocab * 8  # the sampling logits beside it


@pytest.mark.parametrize("held_out,max_prompts,seqs", [(None, None, 64), (2, None, 8), (40, None, 64), (40, 3, 12)])
def test_the_eval_batch_is_the_conversations_the_eval_plays(held_out, max_prompts, seqs):
    """The eval samples its prompts times ``eval.samples`` conversations together, at most ``eval.batch_size`` (64)
    of them: a recipe with 2 held-out rows and 4 samples holds the cache of 8, not of 64; ``eval.max_prompts`` caps
    the rows. The training batch (4 here) is the other bound."""
    overrides = ["eval.samples=4", "training.num_generations=4", "training.per_device_train_batch_size=4"]
    overrides.append("training.gradient_accumulation_steps=1")
    recipe = load("arith", overrides + ([f"eval.max_prompts={max_prompts}"] if max_prompts else []))
    shape = memory.model_shape(memory.config_source(recipe.model, recipe.base_dir))
    parts = {name: how for name, _, how in memory.estimate(recipe, shape, 100, "cpu", held_out=held_out)}
    generation = batch_rules.generation_batch(recipe.training.effective)
    assert generation == 4
    assert parts["generation cache"].startswith(f"{seqs} sequences x ")


def test_the_plan_warns_of_a_prompt_and_completion_past_the_models_context(capsys):
    """SmolLM2 takes 8,192 tokens: a completion of 8,180 leaves too few for arith's prompts, which training refuses
    once the model has loaded; the plan says so first, with the max_prompt_length that would fit."""
    assert cli.main(["plan", "arith"]) == 0
    assert "context" not in capsys.readouterr().out
    assert cli.main(["plan", "arith", "training.max_completion_length=8180"]) == 0
    warning = capsys.readouterr().out.splitlines()[-1]
    assert warning.startswith("warning: the longest prompt (") and "the model's context of 8192 tokens" in warning
    assert "set training.max_prompt_length: 12 to drop the longer prompts" in warning
