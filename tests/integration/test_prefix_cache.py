"""run/prefix_cache.py on the tiny model: a batch whose prompts share a long prefix encodes it once and generates the
same tokens as generate() on the left-padded batch (greedy), directly and through TRL's generation of a GRPO batch;
a short shared prefix is left to generate()."""

import copy
import gc
import weakref

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_ext.run import prefix_cache, shared_head, trainer, trl_internals
from grpo_ext.settings import compat


def _forward_lengths(model) -> tuple[list, object]:
    """The (rows, tokens) of each forward call of ``model``, recorded by a hook."""
    seen: list = []
    handle = model.register_forward_pre_hook(lambda _m, _a, kw: seen.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    return seen, handle


def _left_padded(rows: list[list[int]], pad: int):
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


@pytest.mark.parametrize("shared", [prefix_cache.MIN_SHARED + 16, prefix_cache.MIN_SHARED - 1])
@pytest.mark.parametrize("given", ["keywords", "generation_config", "generation_config under autocast"])
def test_the_same_greedy_tokens_with_the_prefix_encoded_once(tiny_model, shared, given):
    """Greedy tokens alike with the prefix encoded once; given a generation config with a token budget (as TRL gives
    it), the rows go on from a cache allocated once for the call (a StaticCache) that holds the prefix once
    (``shared_head``), else from a growing one with the prefix copied into each row. Under bf16 autocast (a CPU run's
    bf16) that cache keeps its keys in bfloat16, as the attention reads them."""
    import contextlib

    from transformers import GenerationConfig, StaticCache

    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32)).eval()
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prefix = torch.randint(3, vocab, (shared,), generator=g).tolist()
    rows = [prefix + torch.randint(3, vocab, (n,), generator=g).tolist() for n in (3, 7, 1, 5)]
    ids, mask = _left_padded(rows, pad=0)
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    if given.startswith("generation_config"):
        settings = {"generation_config": GenerationConfig(**settings, disable_compile=True)}
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if "autocast" in given else contextlib.nullcontext()
    caches: list = []  # (type, its layers' key types, weak references to it and its layers) of each call's cache

    def record(_module, _args, kw):
        cache = kw.get("cache", kw.get("past_key_values"))
        layers = getattr(cache, "layers", [])
        # a layer that holds the prefix once (shared_head) allocates the rows' own keys at its first update
        keys = {k.dtype for k in (layer.head[0] if hasattr(layer, "head") else layer.keys for layer in layers) if k is not None}
        once = bool(layers) and all(hasattr(layer, "head") for layer in layers)
        caches.append((type(cache), keys, [weakref.ref(x) for x in [cache, *layers] if x is not None], once))

    with torch.no_grad(), autocast:
        plain = model.generate(input_ids=ids, attention_mask=mask, **settings)[:, ids.shape[1] :]
        seen, handle = _forward_lengths(model)
        types = model.register_forward_pre_hook(record, with_kwargs=True)
        gc.disable()  # a cache the call allocates is gone when the call returns, not left for the cycle collector
        try:
            with prefix_cache.sharing(model):
                ours = model.generate(input_ids=ids, attention_mask=mask, **settings)[:, ids.shape[1] :]
            alive = [c[:2] for c in caches if any(ref() is not None for ref in c[2])]
        finally:
            gc.enable()
        handle.remove()
        types.remove()
    assert torch.equal(ours, plain)
    assert not alive, alive
    if shared >= prefix_cache.MIN_SHARED:
        # the prefix once, then each row from its own tokens (7, the longest, with the padding after the prefix)
        assert seen[:2] == [(1, shared), (4, 7)], seen[:3]
        preallocated = given.startswith("generation_config") and prefix_cache.checkpoints_with_a_cache()
        assert issubclass(caches[1][0], StaticCache) == preallocated, caches[:3]
        if preallocated:
            assert caches[1][1] == {torch.bfloat16 if "autocast" in given else torch.float32}, caches[1]
            assert caches[1][3] == shared_head.supported(model) is True  # the tiny llama keeps the prefix once
    else:
        assert seen[0] == (4, ids.shape[1]), seen[:3]  # generate() as it is: the whole left-padded batch
    assert "generate" not in vars(model)  # the block's end gives the model its own generate back


@pytest.mark.skipif(not compat.trl_at_least("1.0"), reason="TRL before 1.0 generates from text (run/trl_internals.py)")
def test_trl_generation_of_a_group_batch_is_unchanged(tiny_model, tmp_path):
    """Two prompts under one long system message, 4 completions each, greedy: TRL's batch is the same with the shared
    prefix encoded once as without, and the model's first forward call is the prefix alone."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    system = " ".join(["Reply with only one digit from 0 to 9."] * 12)
    prompts = [[{"role": "system", "content": system}, {"role": "user", "content": q}] for q in ("3 + 4?", "abc")]
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    args = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        beta=0.0,
        use_cpu=True,
        report_to="none",
        generation_kwargs={"do_sample": False},
    )
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=trainer.make_config(args),
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        tokenizer=tokenizer,
    )
    rows = [{"prompt": p} for p in prompts for _ in range(4)]
    found = {}
    for share in (True, False):
        grpo.share_prefix = share
        seen, handle = _forward_lengths(grpo.model)
        batch = trl_internals.sample_batch(grpo, rows)
        handle.remove()
        found[share] = batch["completion_ids"], seen
    assert torch.equal(found[True][0], found[False][0])
    width = found[False][1][0][1]  # without sharing, the first call is the whole left-padded batch
    assert found[False][1][0] == (8, width)
    rows_, shared = found[True][1][0]
    assert rows_ == 1 and prefix_cache.MIN_SHARED <= shared < width


def _lora(model):
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0))


def loss_pass_both_ways(model, tokenizer, tmp_path, system: str, completion_tokens: int = 8, checkpointing=False) -> dict:
    """TRL's loss of one sampled micro-batch (two prompts under ``system``, 4 completions each) and its gradients,
    with the shared prompt encoded once (True) and without (False), each with the (rows, tokens) the body embedded,
    call by call, and the bytes the autograd graph kept outside checkpointed layers (``checkpointing``: transformers'
    gradient checkpointing on, as the Trainer turns it on for ``training.gradient_checkpointing``)."""
    prompts = [[{"role": "system", "content": system}, {"role": "user", "content": q}] for q in ("3 + 4?", "abcd efg")]
    args = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=completion_tokens,
        beta=0.0,
        use_cpu=True,
        report_to="none",
        seed=1,
        bf16=False,
        gradient_checkpointing=False,  # as the recipes set it: TRL turns it on by default, and then nothing is shared
    )  # float32: the sums' order shows at 1e-7
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=[lambda completions, **_: [float(len(str(c)) % 3) for c in completions]],
        args=trainer.make_config(args),
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        tokenizer=tokenizer,
    )
    grpo.current_gradient_accumulation_steps = 1  # what Trainer's loop sets before a step
    grpo.model.train()
    batch = trl_internals.sample_batch(grpo, [{"prompt": p} for p in prompts for _ in range(4)])
    assert batch["advantages"].abs().sum() > 0  # rewards with spread: a gradient that can differ
    if checkpointing:
        grpo.args.gradient_checkpointing = True
        enable = getattr(grpo.model, "activation_checkpointing_enable", None) or grpo.model.gradient_checkpointing_enable
        enable()  # as the Trainer does when training starts
    found = {}
    for share in (True, False):
        grpo.share_prefix = share
        grpo.model.zero_grad(set_to_none=True)
        seen: list = []
        embed = prefix_cache.backbone_of(grpo.model).get_input_embeddings()
        handle = embed.register_forward_pre_hook(lambda _m, a, seen=seen: seen.append(tuple(a[0].shape)))
        kept: dict[int, int] = {}  # storage -> bytes, of what the graph keeps for the backward (weights aside)

        def keep(t, kept=kept):
            if not (t.requires_grad and t.grad_fn is None):
                kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            loss = grpo.compute_loss(grpo.model, dict(batch))
        loss.backward()
        handle.remove()
        grads = {n: p.grad.clone() for n, p in grpo.model.named_parameters() if p.grad is not None}
        found[share] = float(loss), grads, seen, sum(kept.values())
    return found


def assert_the_same_gradient(found: dict, tolerance: float = 1e-5) -> None:
    """The loss and every gradient alike both ways (``tolerance`` relative to the largest gradient), and the shared
    prefix embedded once, then every row's own tokens."""
    assert found[True][0] == pytest.approx(found[False][0], abs=1e-6)
    assert sorted(found[True][1]) == sorted(found[False][1]) and found[True][1]
    worst = max(float((found[True][1][n] - found[False][1][n]).abs().max()) for n in found[False][1])
    largest = max(float(g.abs().max()) for g in found[False][1].values())
    assert largest > 1e-4 and worst <= tolerance * max(1.0, largest), (worst, largest)
    (rows, shared), (rows_after, rest) = found[True][2][:2]
    width = found[False][2][0][1]  # without it, every row whole from the first call
    assert found[False][2][0][0] == 8
    assert rows == 1 and shared >= prefix_cache.MIN_SHARED and (rows_after, rest) == (8, width - shared)


@pytest.mark.skipif(not compat.trl_at_least("1.0"), reason="TRL before 1.0 generates from text (run/trl_internals.py)")
@pytest.mark.parametrize("adapters", [False, True], ids=["full", "lora"])
def test_the_loss_pass_with_the_prompt_encoded_once_has_the_same_gradient(tiny_model, tmp_path, adapters):
    """A training micro-batch whose prompts share a long system message: TRL's loss and every gradient are the same
    with the shared prompt run once as with every row's prompt run whole, and the body's first call is the prefix."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    if adapters:
        model = _lora(model)
    system = " ".join(["Reply with only one digit from 0 to 9."] * 12)
    assert_the_same_gradient(loss_pass_both_ways(model, AutoTokenizer.from_pretrained(tiny_model), tmp_path, system))


@pytest.mark.skipif(not compat.trl_at_least("1.0"), reason="TRL before 1.0 generates from text (run/trl_internals.py)")
@pytest.mark.skipif(not prefix_cache.checkpoints_with_a_cache(), reason="a cache of layer objects: transformers 4.56")
@pytest.mark.parametrize("adapters", [False, True], ids=["full", "lora"])
def test_the_checkpointed_loss_pass_shares_the_prompt_with_the_same_gradient(tiny_model, tmp_path, adapters):
    """Under gradient checkpointing the shared prompt is still encoded once: each layer keeps only its input, runs
    again in the backward from the same keys and values, and every gradient is the one of the whole rows (and of the
    pass without checkpointing); the graph keeps under a quarter of what the shared pass keeps without it."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    if adapters:
        model = _lora(model)
    system = " ".join(["Reply with only one digit from 0 to 9."] * 12)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    plain = loss_pass_both_ways(model, tokenizer, tmp_path, system)
    found = loss_pass_both_ways(model, tokenizer, tmp_path, system, checkpointing=True)
    assert_the_same_gradient(found)
    assert_the_same_gradient({True: found[True], False: plain[False]})  # and the same as no checkpointing at all
    assert found[True][3] < plain[True][3] / 4, (found[True][3], plain[True][3])


@pytest.mark.skipif(not compat.trl_at_least("1.0"), reason="TRL before 1.0 generates from text (run/trl_internals.py)")
def test_the_run_line_says_where_the_shared_prompt_is_encoded_once(tiny_model, tmp_path):
    """The line a run prints for prompts that share a long head: once in both passes; each pass that cannot, with
    why (before transformers 4.56, gradient checkpointing keeps no cache for the loss pass); whole with the key off."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    args = dict(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, use_cpu=True, report_to="none")
    args["gradient_checkpointing"] = False  # as the recipes set it (TRL turns it on by default)
    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=trainer.make_config(args),
        train_dataset=Dataset.from_dict({"prompt": ["a b c"]}),
        tokenizer=AutoTokenizer.from_pretrained(tiny_model),
    )
    head = "groups: the 480 prompt tokens every training prompt begins with are encoded once per batch"
    assert trl_internals.sharing(grpo, 480) == f"{head}, in generation and in the loss pass"
    grpo.args.gradient_checkpointing = True  # what the recipe says; the Trainer turns it on when training starts
    assert trl_internals.sharing(grpo, 480) == (
        f"{head}, in generation and in the loss pass"
        if prefix_cache.checkpoints_with_a_cache()
        else f"{head} in generation; the loss pass encodes them for each row (gradient checkpointing keeps no keys and "
        "values before transformers 4.56)"
    )
    grpo.share_prefix = False
    assert trl_internals.sharing(grpo, 480) == "groups: each row's prompt is encoded whole (groups.share_prompt is off)"


def test_a_frozen_cache_is_gone_once_let_go_of_without_the_cycle_collector():
    """The loss pass's caches hold the shared prompt's keys and values, and through them its graph: one that reached
    itself (an update closing over its own cache) stayed until the cycle collector ran, a step's prompt pass each."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer in range(2):
        cache.update(torch.ones(1, 3, 5, 4, requires_grad=True), torch.ones(1, 3, 5, 4, requires_grad=True), layer)
    gc.disable()
    try:
        fixed = prefix_cache._frozen(cache, 4)
        keys, _ = fixed.update(torch.zeros(4, 3, 2, 4), torch.zeros(4, 3, 2, 4), 1)
        assert keys.shape == (4, 3, 7, 4)
        refs = [weakref.ref(fixed), *map(weakref.ref, fixed.layers)]
        del fixed
        assert all(ref() is None for ref in refs)
    finally:
        gc.enable()


def one_step_three_ways(model, tokenizer, tmp_path, system: str, checkpointing: bool) -> dict:
    """One optimizer step of ``Trainer.train`` over 4 micro-batches (2 prompts under ``system``, 4 sampled completions
    each, the same seed), with the shared prompt encoded once a step ("step"), once a micro-batch ("micro-batch") and
    not at all ("whole"): the completions, the gradients the optimizer is about to apply, and the rows of each call of
    the body's embedding that builds a gradient (the loss pass's)."""
    from transformers import TrainerCallback

    prompts = [[{"role": "system", "content": system}, {"role": "user", "content": q}] for q in ("3 + 4?", "abcd efg")]
    found = {}
    for way in ("step", "micro-batch", "whole"):
        torch.manual_seed(0)
        grads: dict = {}

        class Grads(TrainerCallback):
            def on_pre_optimizer_step(self, args, state, control, grads=grads, **kwargs):
                grads.update({n: p.grad.clone() for n, p in kwargs["model"].named_parameters() if p.grad is not None})

        args = dict(
            output_dir=str(tmp_path / way),
            per_device_train_batch_size=2,
            gradient_accumulation_steps=4,
            num_generations=4,
            max_completion_length=6,
            max_steps=1,
            max_grad_norm=0.0,  # the gradients as the micro-batches left them
            beta=0.0,
            use_cpu=True,
            report_to="none",
            seed=1,
            bf16=False,
            gradient_checkpointing=checkpointing,
            save_strategy="no",
        )
        grpo = trainer.make_trainer(
            model=copy.deepcopy(model),  # each from the same weights: the step ends with the optimizer's
            reward_funcs=[lambda completions, **_: [float(len(str(c)) % 3) for c in completions]],
            args=trainer.make_config(args),
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            tokenizer=tokenizer,
            callbacks=[Grads()],
        )
        grpo.share_prefix = way != "whole"
        grpo.step_heads = prefix_cache.StepHeads() if way == "step" else None
        seen: list = []

        def record(_module, inputs, seen=seen):
            if torch.is_grad_enabled():
                seen.append(tuple(inputs[0].shape))

        hook = prefix_cache.backbone_of(grpo.model).get_input_embeddings().register_forward_pre_hook(record)
        grpo.train()
        hook.remove()
        assert not grpo.step_heads or len(grpo.step_heads) == 0  # flushed at the step's last micro-batch
        found[way] = grads, [rows for rows, _ in seen], trl_internals.sampled(grpo)["completion"]
    return found


def _worst(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b) and a
    return max(float((a[n] - b[n]).abs().max()) for n in a)


@pytest.mark.skipif(not compat.trl_at_least("1.0"), reason="TRL before 1.0 generates from text (run/trl_internals.py)")
@pytest.mark.skipif(not prefix_cache.checkpoints_with_a_cache(), reason="a cache of layer objects: transformers 4.56")
@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointed"])
@pytest.mark.parametrize("adapters", [False, True], ids=["full", "lora"])
def test_a_step_encodes_the_shared_prompt_once_for_all_its_micro_batches(tiny_model, tmp_path, adapters, checkpointing):
    """An optimizer step of 4 micro-batches whose prompts share a long system message runs that prefix through the
    model once (one one-row call of the body that builds a gradient; one a micro-batch before; none when every row
    runs whole), and the gradients the optimizer applies are those of the prefix run once a micro-batch and of the
    rows run whole, to a millionth of the largest (1e-8 against 0.04 to 0.13 here)."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    if adapters:
        model = _lora(model)
    system = " ".join(["Reply with only one digit from 0 to 9."] * 12)
    found = one_step_three_ways(model, AutoTokenizer.from_pretrained(tiny_model), tmp_path, system, checkpointing)
    step, micro, whole = (found[way][0] for way in ("step", "micro-batch", "whole"))
    assert found["step"][2] == found["whole"][2] and len(set(map(str, found["whole"][2]))) > 2  # the same rows
    largest = max(float(g.abs().max()) for g in whole.values())
    assert largest > 1e-3
    assert _worst(step, micro) <= 1e-6 * largest, (_worst(step, micro), largest)
    assert _worst(step, whole) <= 1e-6 * largest, (_worst(step, whole), largest)
    assert found["step"][1] == [1, 2, 2, 2, 2]  # the prefix, then each micro-batch's rows from it
    assert found["micro-batch"][1] == [1, 2] * 4 and found["whole"][1] == [2] * 4


def test_a_model_in_training_copies_the_prefix_and_one_in_eval_mode_holds_it_once(tiny_model):
    """TRL's generation inside a training step copies the shared prefix into each row, as the recipes' published runs
    trained; the evals, the pre-flight and ``grpo-ext eval`` sample in eval mode and hold it once (``shared_head``)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32))
    assert shared_head.supported(model.eval()) is True
    assert shared_head.supported(model.train()) is False
