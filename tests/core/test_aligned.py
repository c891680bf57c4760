"""`fast_tfds.core.aligned.empty`: arrays TensorFlow can take without a copy."""

import numpy as np
import pytest

from fast_tfds.core import aligned


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((1,), np.uint8), ((64, 224, 224, 3), np.uint8), ((3, 5, 7), np.float32), ((0, 4), np.int64)],
)
def test_empty_is_aligned_contiguous_and_writable(shape, dtype):
    array = aligned.empty(shape, dtype)
    assert array.shape == shape and array.dtype == dtype
    assert array.size == 0 or array.ctypes.data % aligned.ALIGNMENT == 0
    assert array.flags.c_contiguous and array.flags.writeable
    array[...] = 7  # every byte of it is its own
    assert (array == 7).all()
