"""The `backend` fixture: each test that takes it runs once per back end (tests/reading/
backends.py), building only the sample that back end reads."""

from __future__ import annotations

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tests.loader.conftest import (  # noqa: F401  (fixtures)
    cats_array_record_dir,
    stanford_array_record_dir,
)
from tests.reading.backends import NAMES, Backend, Stored

DATA_DIRS = {"tf.data": "cats_data_dir", "loader": "cats_array_record_dir"}


def open_backend(request, name: str) -> Backend:
    return Backend(name, request.getfixturevalue(DATA_DIRS[name]))


@pytest.fixture(params=NAMES)
def backend(request) -> Backend:
    """tf.data, then the loader (a test may name its own with indirect parametrization)."""
    return open_backend(request, request.param)


@pytest.fixture
def tf_data(request) -> Backend:
    """tf.data alone: a contract only it has."""
    return open_backend(request, "tf.data")


@pytest.fixture
def loader(request) -> Backend:
    """The loader alone: a contract only it has."""
    return open_backend(request, "loader")


@pytest.fixture(scope="session")
def cats_split(cats_data_dir) -> list[Stored]:
    """Per example index (config 224, the same in both builds): its filename, label and
    stored pixels (TensorFlow's decode of its JPEG), in the split's record order (TFDS's
    own reader, one file after the other)."""
    ds = tfds.builder("cats_vs_dogs_fast/224", data_dir=cats_data_dir).as_dataset(
        "train",
        shuffle_files=False,
        read_config=tfds.ReadConfig(interleave_cycle_length=1),
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    return [
        Stored(
            ex["image/filename"].decode(), int(ex["label"]), tf.io.decode_jpeg(ex["image"]).numpy()
        )
        for ex in ds.as_numpy_iterator()
    ]
