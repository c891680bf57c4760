"""Multi-host padding's length, the one both back ends pad every host's epoch to."""

import pytest

from fast_tfds.core.shares import padded_length


@pytest.mark.parametrize(
    ("largest", "batch_size", "drop_remainder", "length"),
    [
        (10, 4, False, 12),  # the last, partial batch filled up
        (12, 4, False, 12),  # whole batches: nothing added
        (10, 4, True, 8),  # the partial batch dropped, as every host drops it
        (3, 4, True, 0),
        (1, 4, False, 4),
        (10, None, False, 10),  # unbatched: the largest share itself
        (10, None, True, 10),
    ],
)
def test_the_largest_share_in_whole_batches(largest, batch_size, drop_remainder, length):
    assert padded_length(largest, batch_size, drop_remainder) == length
