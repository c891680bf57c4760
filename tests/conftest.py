"""Shared fixtures: a small sample archive built into real TFRecords on disk."""

import os
import shutil

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

import cats_vs_dogs_fast  # noqa: E402, F401  (registers the dataset)
import stanford_dogs_tfrecord  # noqa: E402, F401  (registers the dataset)
from fast_tfds.samples import cats_vs_dogs as cats_archive  # noqa: E402
from tests import forks  # noqa: E402
from tests.bucket.emulated import end_shared_servers  # noqa: E402
from tests.children import TIMEOUT_S  # noqa: E402
from tests.helpers import TFDS_CLI, run_ok, shared_folder  # noqa: E402

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


def pytest_sessionfinish(session):
    """Ends the object-store servers that the run's xdist workers shared (tests/bucket), in
    the process that ran the run, once every worker is done with them."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None and not os.environ.get("PYTEST_XDIST_WORKER"):
        end_shared_servers(factory.getbasetemp())


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        if item.path.relative_to(root).as_posix() in SMOKE_MODULES:
            item.add_marker(pytest.mark.smoke)


@pytest.fixture(scope="session", autouse=True)
def fork_servers_in_the_runs_folder(tmp_path_factory):
    """The fork servers' folders (`tests.forks`) go in this process's temporary folder of the
    run, which pytest removes with its old runs: none is left in /tmp by a worker that ended
    without running its atexit functions."""
    forks.folder_base = tmp_path_factory.getbasetemp()


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
    config = tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir))

    def build(data_dir):
        for name in ("224", "original"):
            builder = tfds.builder("cats_vs_dogs_fast", config=name, data_dir=data_dir)
            builder.download_and_prepare(download_config=config)

    return shared_folder(tmp_path_factory, "cats_data", build)


def _with_array_record(tmp_path_factory, cats_data_dir, name: str, configs: tuple[str, ...]):
    """The shared folder `name`: the builds of `configs` of `cats_data_dir`, each holding
    TFRecord and ArrayRecord files of the same examples (`tfds convert_format`, run as a
    user runs it, as a fork of a server that has imported TensorFlow: `tests.forks`; with
    one worker it starts no process of its own)."""

    def convert(data):
        for config in configs:
            config_dir = data / "cats_vs_dogs_fast" / config
            shutil.copytree(cats_data_dir / "cats_vs_dogs_fast" / config, config_dir)
            version_dir = config_dir / "1.0.0"
            run_ok(
                [
                    *(*TFDS_CLI, "convert_format", "--dataset_version_dir", os.fspath(version_dir)),
                    *("--out_file_format", "array_record", "--num_workers", "1"),
                ],
                timeout=TIMEOUT_S,
                fork=True,
            )
            assert sorted(version_dir.glob("*.array_record-*"))

    return shared_folder(tmp_path_factory, name, convert)


@pytest.fixture(scope="session")
def cats_both_formats_dir(cats_data_dir, tmp_path_factory):
    """A data dir whose 224 build holds TFRecord and ArrayRecord files of the same
    examples (`tfds convert_format`), as a folder that serves both back ends does."""
    return _with_array_record(tmp_path_factory, cats_data_dir, "cats_both_formats", ("224",))


@pytest.fixture(scope="session")
def cats_every_config_both_formats_dir(cats_data_dir, tmp_path_factory):
    """`cats_both_formats_dir` with the original config converted too: the benchmarks'
    loader rows read both configs as ArrayRecord, converted once per run here rather than
    by each benchmark test (each copies it, as a benchmark may write next to the files)."""
    configs = ("224", "original")
    return _with_array_record(tmp_path_factory, cats_data_dir, "cats_every_config", configs)


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
    config = tfds.download.DownloadConfig(manual_dir=os.fspath(STANFORD_DUMMY_DATA))

    def build(data_dir):
        builder = tfds.builder("stanford_dogs_tfrecord", config="224", data_dir=data_dir)
        builder.download_and_prepare(download_config=config)

    return shared_folder(tmp_path_factory, "stanford_tfrecord", build)
