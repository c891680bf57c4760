"""An emulated bucket (tests/bucket/emulated.py) holding small builds of cats_vs_dogs_fast:
TFRecords under gs://BUCKET/tfrecord, ArrayRecords under gs://BUCKET/array_record; and the
same in S3 and Azure (tests/bucket/stores.py): `store`, over every store."""

from __future__ import annotations

import pytest

from tests.bucket import emulated, stores
from tests.helpers import shared_folder
from tests.loader.conftest import cats_array_record_dir  # noqa: F401  (a fixture)

TFRECORD, ARRAY_RECORD = "tfrecord", "array_record"


STORES = {"gs": emulated.Bucket, "s3": stores.S3Bucket, "az": stores.AzureContainer}


def start_bucket(folder, tfrecord_dir, array_record_dir, scheme: str = "gs") -> emulated.Bucket:
    try:
        bucket = STORES[scheme](folder)
    except emulated.EmulatorUnavailable as error:
        if scheme == "az" and stores.azurite_required():
            pytest.fail(f"CI=true and no Azurite here: {error}")
        pytest.skip(f"no emulated {scheme}:// store here: {error}")
    try:
        bucket.upload(tfrecord_dir, TFRECORD)
        bucket.upload(array_record_dir, ARRAY_RECORD)
    except BaseException:
        bucket.close()
        raise
    return bucket


def shared_store(tmp_path_factory, scheme, tfrecord_dir, array_record_dir) -> emulated.Bucket:
    """The run's store of `scheme`: its server started and the builds uploaded once per run,
    by the first xdist worker to ask (`shared_folder`), not once per worker; each worker
    reaches it through a proxy of its own, so that the requests a test counts are its
    worker's. The server outlives the worker that started it: the process that ran the
    tests ends it once every worker is done (`emulated.end_shared_servers`, from
    tests/conftest.py). Tests that change what a shared store holds do so under names of
    their own, as the other workers read it meanwhile."""

    def start(folder):
        store = start_bucket(folder, tfrecord_dir, array_record_dir, scheme)
        server = store.emulator if scheme == "gs" else store
        emulated.record_shared_server(folder, server.port, server.process)
        store.proxy.close()

    folder = shared_folder(tmp_path_factory, f"store-{scheme}", start)
    return STORES[scheme](folder, port=emulated.shared_server_port(folder))


@pytest.fixture(scope="session")
def bucket(tmp_path_factory, cats_data_dir, cats_array_record_dir):  # noqa: F811
    """The run's bucket (an emulator, `shared_store`) behind this worker's TLS proxy, for the
    reads of every test that leaves it as it is; a test that counts the requests forgets
    those of earlier tests first (`bucket.proxy.reset()`)."""
    bucket = shared_store(tmp_path_factory, "gs", cats_data_dir, cats_array_record_dir)
    yield bucket
    bucket.close()


@pytest.fixture
def own_bucket(tmp_path, cats_data_dir, cats_array_record_dir):  # noqa: F811
    """A bucket of the test's own, which the test may break (stop, empty, slow down)."""
    bucket = start_bucket(tmp_path / "bucket", cats_data_dir, cats_array_record_dir)
    yield bucket
    bucket.close()


@pytest.fixture
def slowed_bucket(bucket):
    """`bucket` behind a proxy of the test's own, which the test may slow down (not break:
    stop, empty or rewrite, as `own_bucket` may)."""
    slowed = bucket.behind_own_proxy()
    yield slowed
    slowed.close()


@pytest.fixture(scope="session", params=list(STORES))
def store(request, tmp_path_factory, cats_data_dir, cats_array_record_dir):  # noqa: F811
    """`bucket`, and S3's and Azure's servers holding the same builds: each started once
    per run (`shared_store`), for the reads that leave them as they are."""
    if request.param == "gs":
        yield request.getfixturevalue("bucket")
        return
    store = shared_store(tmp_path_factory, request.param, cats_data_dir, cats_array_record_dir)
    yield store
    store.close()


@pytest.fixture(params=list(STORES))
def own_store(request, tmp_path, cats_data_dir, cats_array_record_dir):  # noqa: F811
    """A store of the test's own (gs, s3, az), which the test may break."""
    store = start_bucket(tmp_path / "store", cats_data_dir, cats_array_record_dir, request.param)
    yield store
    store.close()
