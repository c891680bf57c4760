"""The loader's per-record work (`DecodeExample`) on records made here: each record's label
and boxes reach its output, an empty box list is no boxes, and a damaged record is an error
that says what is wrong. (Cases a mutation run over fast_tfds/loader/examples.py found
untested; see "Mutation testing" in CONTRIBUTING.md.)"""

from __future__ import annotations

import numpy as np
import pytest
from tensorflow_datasets.proto import tf_example_pb2

from fast_tfds.loader import DecodeExample
from fast_tfds.loader.examples import BadRecord
from fast_tfds.samples import photos
from stanford_dogs_tfrecord.hook import BBOX_KEY, BoxParts
from tests.loader.conftest import decoded

JPEG = photos.jpeg_bytes(photos.random_photo(np.random.default_rng(5), (60, 40)))


def record(label: int | None, bbox: list[float] | None = None, image: bytes = JPEG) -> bytes:
    example = tf_example_pb2.Example()
    feature = example.features.feature
    feature["image"].bytes_list.value.append(image)
    if label is not None:
        feature["label"].int64_list.value.append(label)
    if bbox is not None:
        feature[BBOX_KEY].float_list.value.extend(bbox)
    return example.SerializeToString()


def test_the_label_and_boxes_of_the_record_are_its_target():
    decode = DecodeExample(image_size=(32, 32), parts=BoxParts(with_boxes=True, max_boxes=3))
    image, target = decoded(decode, record(7, [0.1, 0.2, 0.6, 0.9, 0.0, 0.0, 0.5, 0.5]))
    assert image.shape == (32, 32, 3) and target["label"] == 7 and target["num_boxes"] == 2
    expected = np.array([[0.1, 0.2, 0.6, 0.9], [0, 0, 0.5, 0.5], [0, 0, 0, 0]], np.float32)
    np.testing.assert_array_equal(target["bbox"], expected)


def test_a_box_feature_with_no_values_is_no_boxes():
    example = tf_example_pb2.Example.FromString(record(2))
    example.features.feature[BBOX_KEY].SetInParent()  # present, of no kind: an empty list
    decode = DecodeExample(image_size=(32, 32), parts=BoxParts(with_boxes=True, max_boxes=2))
    _, target = decoded(decode, example.SerializeToString())
    assert target["label"] == 2 and target["num_boxes"] == 0 and not target["bbox"].any()


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\xff" * 8, r".+"),  # not a serialized Example
        (record(None), r".+"),
        (record(3), rf".*'{BBOX_KEY}'.*"),  # the dataset's hook needs its boxes
    ],
    ids=["not a record", "no label", "no boxes"],
)
def test_a_damaged_record_says_what_is_missing(data, reason):
    decode = DecodeExample(image_size=(32, 32), parts=BoxParts(with_boxes=True))
    with pytest.raises(BadRecord, match=rf"^a record is not an image example \({reason}\)$"):
        decoded(decode, data)
