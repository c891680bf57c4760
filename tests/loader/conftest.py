"""Tiny ArrayRecord builds of both datasets (the TFRecord one to compare with is in
tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tensorflow_datasets as tfds

import stanford_dogs_tfrecord  # noqa: F401  (registers the dataset)
from tests.helpers import shared_folder

STANFORD_DUMMY_DATA = Path(stanford_dogs_tfrecord.Builder.code_path.parent / "dummy_data")


def build(name: str, config: str, data_dir, manual_dir, file_format: str | None) -> None:
    tfds.builder(name, config=config, data_dir=data_dir).download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)),
        file_format=file_format,
    )


def decoded(decode, record: bytes):
    """(image, target) of one record, as the loader makes them: its one batch function
    (`AugmentedBatches`, a plain read) on a batch of that record alone."""
    from fast_tfds.loader.augmented import AugmentedBatches, map_arrays

    images, targets = AugmentedBatches(decode, None, seed=0)([(0, 0, record)])
    return images[0], map_arrays(lambda column: column[0], targets)


@pytest.fixture(scope="session")
def cats_array_record_dir(tmp_path_factory, cats_sample):
    """cats_vs_dogs_fast built as ArrayRecord, both configs, from the shared sample."""
    manual_dir, _ = cats_sample

    def build_both(data_dir):
        for config in ("224", "original"):
            build("cats_vs_dogs_fast", config, data_dir, manual_dir, "array_record")

    return shared_folder(tmp_path_factory, "cats_array_record", build_both)


@pytest.fixture(scope="session")
def stanford_array_record_dir(tmp_path_factory):
    """stanford_dogs_tfrecord built as ArrayRecord, both configs, from its dummy data."""

    def build_both(data_dir):
        for config in ("224", "original"):
            build("stanford_dogs_tfrecord", config, data_dir, STANFORD_DUMMY_DATA, "array_record")

    return shared_folder(tmp_path_factory, "stanford_array_record", build_both)
