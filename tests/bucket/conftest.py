"""An emulated bucket (tests/bucket/emulated.py) holding small builds of cats_vs_dogs_fast:
TFRecords under gs://BUCKET/tfrecord, ArrayRecords under gs://BUCKET/array_record."""

from __future__ import annotations

import pytest

from tests.bucket import emulated
from tests.loader.conftest import cats_array_record_dir  # noqa: F401  (a fixture)

TFRECORD, ARRAY_RECORD = "tfrecord", "array_record"


def start_bucket(folder, tfrecord_dir, array_record_dir) -> emulated.Bucket:
    try:
        bucket = emulated.Bucket(folder)
    except emulated.EmulatorUnavailable as error:
        pytest.skip(f"no emulated GCS bucket here: {error}")
    bucket.upload(tfrecord_dir, TFRECORD)
    bucket.upload(array_record_dir, ARRAY_RECORD)
    return bucket


@pytest.fixture(scope="session")
def bucket(tmp_path_factory, cats_data_dir, cats_array_record_dir):  # noqa: F811
    """One bucket (an emulator and its TLS proxy) for the reads of every test that leaves it
    as it is, started once per xdist worker; a test that counts the requests forgets those
    of earlier tests first (`bucket.proxy.reset()`)."""
    bucket = start_bucket(tmp_path_factory.mktemp("bucket"), cats_data_dir, cats_array_record_dir)
    yield bucket
    bucket.close()


@pytest.fixture
def own_bucket(tmp_path, cats_data_dir, cats_array_record_dir):  # noqa: F811
    """A bucket of the test's own, which the test may break (stop, empty, slow down)."""
    bucket = start_bucket(tmp_path / "bucket", cats_data_dir, cats_array_record_dir)
    yield bucket
    bucket.close()
