"""run/shared_head.py: attention over a prefix held once beside each row's own keys is the attention over the whole
row, for grouped key-value heads, padding masked between the prefix and a row's own tokens, a query that sees none of
its row's own keys, in float32 and bfloat16."""

import pytest
import torch

from grpo_ext.run import shared_head


@pytest.mark.parametrize("queries", [1, 4])  # a decoding step; a row's own tokens encoded after the prefix
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_over_a_prefix_held_once_is_the_attention_over_the_whole_row(queries, dtype):
    g = torch.Generator().manual_seed(0)
    rows, heads, groups, prefix, own, dim = 3, 6, 2, 5, 7, 8

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    query, head_keys, head_values = randn(rows, heads, queries, dim), randn(1, groups, prefix, dim), randn(1, groups, prefix, dim)
    keys, values = randn(rows, groups, own, dim), randn(rows, groups, own, dim)
    keep = torch.ones(rows, 1, queries, prefix + own, dtype=torch.bool)
    keep[0, ..., prefix : prefix + 3] = False  # row 0's padding, between the prefix and its own tokens
    keep[1, ..., -2:] = False  # row 1's positions not written yet
    keep[2, :, 0, -1] = False  # causal: the first query does not see the last key
    keep[2, :, -1, prefix:] = False  # a query (a padding position's) that sees the prefix alone
    additive = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
    setattr(keys, shared_head.HEAD, (head_keys, head_values))

    out, weights = shared_head.attend(None, query, keys, values, additive, scaling=0.3)

    whole_keys = torch.cat([head_keys.expand(rows, -1, -1, -1), keys], dim=2).repeat_interleave(heads // groups, dim=1)
    whole_values = torch.cat([head_values.expand(rows, -1, -1, -1), values], dim=2).repeat_interleave(heads // groups, 1)
    expected = torch.nn.functional.scaled_dot_product_attention(
        query.float(), whole_keys.float(), whole_values.float(), attn_mask=keep, scale=0.3
    ).transpose(1, 2)
    assert weights is None and out.shape == (rows, queries, heads, dim) and out.dtype == dtype
    tolerance = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.float(), expected, atol=tolerance, rtol=tolerance)
