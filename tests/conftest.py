"""Shared fixtures: a small sample archive built into real TFRecords on disk."""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

import cats_vs_dogs_fast  # noqa: E402, F401  (registers the dataset)
import stanford_dogs_tfrecord  # noqa: E402, F401  (registers the dataset)
from fast_tfds.samples import cats_vs_dogs as cats_archive  # noqa: E402
from tests.helpers import shared_folder  # noqa: E402

CATS_PER_CLASS = 20
STANFORD_DUMMY_DATA = stanford_dogs_tfrecord.Builder.code_path.parent / "dummy_data"

# The smoke subset (`pytest -m smoke`): building, reading and the loader, end to end.
# scripts/check_install.sh runs it at the lowest supported versions of the dependencies.
SMOKE_MODULES = (
    "tests/datasets/test_cats_vs_dogs_builder.py",
    "tests/datasets/test_stanford_dogs_builder.py",
    "tests/read/test_reader.py",
    "tests/loader/test_loader.py",
)


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        if item.path.relative_to(root).as_posix() in SMOKE_MODULES:
            item.add_marker(pytest.mark.smoke)


@pytest.fixture(scope="session")
def cats_sample(tmp_path_factory):
    """(manual_dir, counts) of a small Cats vs Dogs look-alike archive with every quirk."""
    manual_dir = tmp_path_factory.mktemp("cats_manual")
    counts = cats_archive.write_cats_zip(
        manual_dir / cats_archive.CATS_ZIP_NAME, CATS_PER_CLASS, seed=3, image_size=(96, 80)
    )
    return manual_dir, counts


@pytest.fixture(scope="session")
def cats_data_dir(tmp_path_factory, cats_sample):
    """A TFDS data dir with cats_vs_dogs_fast built in both configs from `cats_sample`."""
    manual_dir, _ = cats_sample
    data_dir = shared_folder(tmp_path_factory, "cats_data")
    config = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))
    for name in ("224", "original"):
        tfds.builder("cats_vs_dogs_fast", config=name, data_dir=data_dir).download_and_prepare(
            download_config=config
        )
    return data_dir


@pytest.fixture(scope="session")
def cats_builder(cats_data_dir):
    return tfds.builder("cats_vs_dogs_fast", config="224", data_dir=cats_data_dir)


@pytest.fixture(scope="session")
def cats_filenames(cats_builder):
    """Every example's filename, read through TFDS's own reader."""
    ds = cats_builder.as_dataset(split="train", decoders={"image": tfds.decode.SkipDecoding()})
    return sorted(ex["image/filename"].numpy().decode() for ex in ds)


@pytest.fixture(scope="session")
def stanford_tfrecord_dir(tmp_path_factory):
    """stanford_dogs_tfrecord built as TFRecord (the default) from its dummy data, config 224."""
    data_dir = shared_folder(tmp_path_factory, "stanford_tfrecord")
    config = tfds.download.DownloadConfig(manual_dir=os.fspath(STANFORD_DUMMY_DATA))
    tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=data_dir).download_and_prepare(
        download_config=config
    )
    return data_dir
