"""The one fill loop of both back ends (`Store.put_many`): each example written once at
its slot, features then picture; a record not read is passed over; a JPEG that does not
decode is the reader's one line, naming the example."""

from __future__ import annotations

import numpy as np
import pytest
import simplejpeg

from fast_tfds.augment import step
from fast_tfds.cache.pictures import PictureSizes
from fast_tfds.cache.store import Store


def jpeg(level: int) -> bytes:
    return simplejpeg.encode_jpeg(np.full((8, 8, 3), level, np.uint8), quality=95)


def test_each_example_is_written_once_at_its_slot():
    # Examples 10, 11, 12 at slots 0, 1, 2; pictures stored at the output size.
    sizes = PictureSizes(np.full(3, 8), np.full(3, 8), (8, 8), None)
    store = Store(3, {"label": ((), np.int64)}, lambda i: i - 10, pictures=sizes)
    slots = store.put_many(
        [12, 10], [None, jpeg(200)], [None, None], {"label": [5, 3]}, step.decode_error
    )
    assert slots.tolist() == [2, 0]
    assert store.written.tolist() == [True, False, False]  # None: not read, passed over
    assert store.features["label"][[0]].tolist() == [3]
    # A written slot keeps what it holds: its picture and its label.
    store.put_many([10], [jpeg(20)], [None], {"label": [9]}, step.decode_error)
    assert store.features["label"][[0]].tolist() == [3]
    assert abs(int(store.pictures.image(0).mean()) - 200) <= 2

    with pytest.raises(ValueError, match=r"^fast_tfds: example 11 does not decode \("):
        store.put_many([11], [b"not a jpeg"], [None], {"label": [4]}, step.decode_error)
    assert not store.written[1]

    store.put_many(
        [11, 12], [jpeg(100), jpeg(50)], [None, None], {"label": [4, 5]}, step.decode_error
    )
    assert store.filled and store.features["label"][[0, 1, 2]].tolist() == [3, 4, 5]
