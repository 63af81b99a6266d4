"""run/prefix_cache.py on the tiny model: a batch whose prompts share a long prefix encodes it once and generates the
same tokens as generate() on the left-padded batch (greedy), directly and through TRL's generation of a GRPO batch;
a short shared prefix is left to generate()."""

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_ext.run import prefix_cache, trainer, trl_internals
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
def test_the_same_greedy_tokens_with_the_prefix_encoded_once(tiny_model, shared):
    model = AutoModelForCausalLM.from_pretrained(tiny_model, **compat.dtype_kwargs(torch.float32)).eval()
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prefix = torch.randint(3, vocab, (shared,), generator=g).tolist()
    rows = [prefix + torch.randint(3, vocab, (n,), generator=g).tolist() for n in (3, 7, 1, 5)]
    ids, mask = _left_padded(rows, pad=0)
    settings = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        plain = model.generate(input_ids=ids, attention_mask=mask, **settings)[:, ids.shape[1] :]
        seen, handle = _forward_lengths(model)
        with prefix_cache.sharing(model):
            ours = model.generate(input_ids=ids, attention_mask=mask, **settings)[:, ids.shape[1] :]
        handle.remove()
    assert torch.equal(ours, plain)
    if shared >= prefix_cache.MIN_SHARED:
        # the prefix once, then each row from its own tokens (7, the longest, with the padding after the prefix)
        assert seen[:2] == [(1, shared), (4, 7)], seen[:3]
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
