"""S3 and Azure that fail (`own_store`, a store of the test's own), and what cannot be
done with them, each in one line that names the object or the argument: an object deleted
mid-epoch, a store that stops answering (the one read timeout), wrong credentials, a
half-published build, and the refusals (a build into a store, a file cache or the tf.data
service over a store TensorFlow cannot read). The GCS bucket's own faults are
test_faults.py's; the examples served before an error are right ones, never others.
"""

from __future__ import annotations

import contextlib

import pytest

from fast_tfds.cache.remote.object_stores import store_of
from tests.bucket import reads
from tests.bucket.conftest import TFRECORD
from tests.bucket.test_faults import (
    BOUND_S,
    PREFIX,
    SHARD,
    assert_right_examples,
    error_message,
    failed_read,
    start,
    truth_of,
)

STORES = pytest.mark.parametrize("own_store", ["s3", "az"], indirect=True)
KINDS = pytest.mark.parametrize("kind", ["dataset", "loader"])


def shard(kind: str) -> str:
    return SHARD.format("tfrecord" if kind == "dataset" else "array_record")


@STORES
@KINDS
def test_an_object_deleted_mid_epoch_ends_the_read_with_its_name(
    own_store, kind, cats_data_dir, cats_array_record_dir
):
    name = f"{PREFIX[kind]}/{shard(kind)}"
    if kind == "loader":
        # One shard's requests are held until it is deleted, after the first batch: the
        # loader asks for every shard as the epoch starts, and would have them all by then.
        own_store.proxy.held = shard(kind)
        child = start(own_store, kind, PAUSE="1")
        child.until("FIRST\n", BOUND_S)
        own_store.delete(name)
        own_store.proxy.release.set()
        child.stdin.write("\n")
    else:
        # as_fast_dataset's first batch waits for the interleave's copies, a held one's
        # included (it did not come with the shard held here): the object the build's
        # metadata names is gone before the read starts.
        own_store.delete(name)
        child = start(own_store, kind)
    found, message = failed_read(child)
    url = own_store.url(name)
    line = message[message.index(f"{url}: ") :].splitlines()[0]
    assert "reading it from the bucket failed" in line, message
    assert "\n" not in message or kind == "dataset", message  # TensorFlow adds its op's lines
    assert_right_examples(found["read"], truth_of(kind, cats_data_dir, cats_array_record_dir))


@STORES
@KINDS
def test_a_store_that_stops_answering_ends_the_read_within_the_read_timeout(
    own_store, kind, cats_data_dir, cats_array_record_dir
):
    """A shard whose requests get no answer: the read ends after the one read timeout
    without progress (FAST_TFDS_BUCKET_READ_TIMEOUT_S), naming the object."""
    own_store.proxy.held = shard(kind)  # never released: held for 60 s
    child = start(own_store, kind, FAST_TFDS_BUCKET_READ_TIMEOUT_S="5")
    found, message = failed_read(child)
    url = own_store.url(PREFIX[kind], shard(kind))
    assert f"{url}: the bucket gave no records within 5 s" in message, message
    assert_right_examples(found["read"], truth_of(kind, cats_data_dir, cats_array_record_dir))
    own_store.proxy.release.set()


@pytest.mark.parametrize("own_store", ["s3", "az"], indirect=True)
@KINDS
def test_wrong_credentials_are_one_line_naming_the_build(own_store, kind):
    """The stores' own checks: Azurite checks each request's shared-key signature, as Azure
    does; moto checks S3's access keys and signatures once switched to
    (`S3Bucket.authenticating`), and knows no key but its IAM user's then: the suite's own
    key is a wrong one. Nothing is read. On servers of the test's own: switched on, moto's
    checks would refuse the reads that other xdist workers make of the run's S3 server
    meanwhile."""
    store = own_store
    with contextlib.ExitStack() as stack:
        if store.scheme == "s3":
            allowed = stack.enter_context(store.authenticating())
            assert_checked(store, allowed)
            wrong = {"AWS_ACCESS_KEY_ID": "testing"}
        else:
            wrong = {
                "AZURE_STORAGE_CONNECTION_STRING": store.env()[
                    "AZURE_STORAGE_CONNECTION_STRING"
                ].replace("AccountKey=Eby8", "AccountKey=Zby8")
            }
        child = start(store, kind, **wrong)
        found, message = failed_read(child)
    info = store.url(PREFIX[kind], "cats_vs_dogs_fast/224/1.0.0/dataset_info.json")
    assert message.startswith(f"{info}: reading it from the bucket failed ("), message
    assert "\n" not in message and store_of(info).check_command(info) in message, message
    assert found["read"] == []


def assert_checked(store, allowed: dict[str, str]) -> None:
    """The server refuses the suite's key (InvalidAccessKeyId) and takes the allowed one."""
    import boto3
    import botocore.exceptions

    def listing(key_id: str, secret: str) -> int:
        client = boto3.client(
            "s3",
            endpoint_url=store.proxy.url,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            region_name=allowed["AWS_DEFAULT_REGION"],
        )
        return client.list_objects_v2(Bucket=store.name, MaxKeys=1)["KeyCount"]

    assert listing(allowed["AWS_ACCESS_KEY_ID"], allowed["AWS_SECRET_ACCESS_KEY"]) == 1
    with pytest.raises(botocore.exceptions.ClientError, match="InvalidAccessKeyId"):
        listing("testing", "testing")


@pytest.mark.parametrize("own_store", ["gs", "s3", "az"], indirect=True)
@pytest.mark.parametrize("download_and_prepare", [False, True])
def test_a_half_published_build_is_not_built_and_nothing_is_built_there(
    own_store, cats_data_dir, download_and_prepare, tmp_path
):
    """A build whose metadata is not there yet (it is uploaded last): never read, never
    built into the store (gs:// too, whose metadata TFDS reads itself); the line says how
    to build it locally and publish it there."""
    version = cats_data_dir / "cats_vs_dogs_fast/224/1.0.0"
    half = tmp_path / "half"
    half.mkdir()
    for path in sorted(version.iterdir()):
        if path.name != "dataset_info.json":
            (half / path.name).write_bytes(path.read_bytes())
    own_store.upload(half, "half/cats_vs_dogs_fast/224/1.0.0")
    own_store.proxy.reset()
    code = """
import json, os
import cats_vs_dogs_fast
try:
    cats_vs_dogs_fast.as_fast_dataset("train", data_dir=os.environ["DATA_DIR"],
        download_and_prepare=os.environ["BUILD"] == "1")
except Exception as error:
    print("ERROR", type(error).__name__, json.dumps(str(error)), flush=True)
"""
    child = reads.start(
        own_store, code, DATA_DIR=own_store.url("half"), BUILD=str(int(download_and_prepare))
    )
    child.stdin.close()
    _, error = reads.ended(child, BOUND_S)
    kind, message = error_message(error)
    flag = f"download_and_prepare={download_and_prepare}"
    assert kind == "DatasetNotBuilt" and "\n" not in message, message
    assert message.startswith(f"{flag}: cats_vs_dogs_fast/224/1.0.0 is not built in "), message
    assert "tfds build cats_vs_dogs_fast" in message and "never made there" in message, message
    assert "`fast-tfds publish " in message and message.count("\n") == 0, message
    written = [r for r in own_store.proxy.requests if r.method in ("PUT", "POST", "DELETE")]
    assert written == [], written
    assert not own_store.proxy.media_reads(".tfrecord-"), "a shard was read"


@pytest.mark.parametrize("store", ["s3", "az"], indirect=True)
@pytest.mark.parametrize("what", ["cache", "service"])
def test_what_only_tensorflow_reads_is_refused_over_the_store(store, what, tmp_path):
    """A file cache (TensorFlow writes it) and the tf.data service (its workers read the
    shards through TensorFlow) cannot be over s3:// or az://: one line each."""
    code = """
import json, os
import cats_vs_dogs_fast
what, url = os.environ["WHAT"], os.environ["DATA_DIR"]
option = {"cache": url + "/cache/train"} if what == "cache" else {"service": "localhost:1"}
try:
    cats_vs_dogs_fast.as_fast_dataset("train", data_dir=url, download_and_prepare=False, **option)
except Exception as error:
    print("ERROR", type(error).__name__, json.dumps(str(error)), flush=True)
"""
    data_dir = store.url(TFRECORD)
    child = reads.start(store, code, WHAT=what, DATA_DIR=data_dir)
    child.stdin.close()
    _, error = reads.ended(child, BOUND_S)
    kind, message = error_message(error)
    assert kind == "ValueError" and "\n" not in message, message
    if what == "cache":
        assert message.startswith(f"cache='{data_dir}/cache/train': TensorFlow's file cache"), (
            message
        )
    else:
        assert message.startswith("service='localhost:1': the tf.data service's workers"), message
        assert f"cannot read {store.scheme}://" in message, message
