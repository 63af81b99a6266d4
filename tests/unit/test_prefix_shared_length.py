"""run/prefix_cache.shared_length: the tokens every row of a batch shares, each row keeping one of its own."""

import pytest

from grpo_ext.run.prefix_cache import shared_length


@pytest.mark.parametrize(
    "rows, expected",
    [
        ([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]], 2),  # the third row parts at its third token
        ([[1, 2, 3], [1, 2, 3]], 2),  # the same prompt twice (a group): all but the last token, where generate() starts
        ([[1, 2, 3], [1, 2, 3, 4, 5]], 2),  # one row is the other's prefix: the shorter keeps a token of its own
        ([[7, 2], [1, 2]], 0),  # nothing shared from the first token
        ([[1, 2, 3]], 0),  # a batch of one: nothing to share with
        ([[5], [5]], 0),  # one token each: it is the one generate() starts from
    ],
)
def test_shared_length(rows, expected):
    assert shared_length(rows) == expected
