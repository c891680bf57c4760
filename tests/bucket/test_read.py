"""Both back ends read a build from an object store (gs://, s3://, az://, emulated: the
`store` fixture) exactly as from the local copy.

Each read is compared example by example (pixels and label) with TFDS's own reader of
the local copy (`tests.pairs.Truth`), and the bucket's read with the same read of the
local copy (augmented crops included), as multisets: the order of a read is not what
these tests are about.
"""

from __future__ import annotations

import collections
import json
import os

import pytest

from tests.bucket import reads
from tests.bucket.conftest import ARRAY_RECORD, TFRECORD
from tests.bucket.emulated import HOSTS
from tests.helpers import BLOCK_PACKAGES
from tests.pairs import Truth

SHARD = "cats_vs_dogs_fast-train.tfrecord-"
SHARD_MARK = ".tfrecord-"
READS = """
import os
import cats_vs_dogs_fast
import fast_tfds
import tensorflow as tf
import tensorflow_datasets as tfds

common = dict(batch_size=8, shuffle=False, seed=0, download_and_prepare=False)
for where in ("local", "bucket"):
    data_dir = os.environ[where.upper() + "_DIR"]
    report(where + "-memory", cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, **common))
    report(where + "-nocache", cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, cache=False, **common))
    report(where + "-augment", cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, augment=fast_tfds.Augment(), dtype=tf.uint8, **common))
    report(where + "-shuffled", cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, cache=False, batch_size=8, seed=0, deterministic=True,
        num_epochs=2, download_and_prepare=False))
bucket = os.environ["BUCKET_DIR"]
report("bucket-builder_dir", cats_vs_dogs_fast.as_fast_dataset(
    "train", builder_dir=bucket + "/cats_vs_dogs_fast/224/1.0.0", batch_size=8, shuffle=False,
    seed=0))
if bucket.startswith("gs://"):  # TFDS reads through TensorFlow, which reads gs:// only
    report("bucket-tfds_load", tfds.load(
        "cats_vs_dogs_fast/224", split="train", data_dir=bucket, as_supervised=True))
# A host's share of the split (every other shard), as from the local copy.
for where in ("local", "bucket"):
    report(where + "-share", cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=os.environ[where.upper() + "_DIR"], shard_index=1, shard_count=2,
        **common))
"""


def dirs(bucket, local, prefix: str) -> dict[str, str]:
    return {"LOCAL_DIR": os.fspath(local), "BUCKET_DIR": bucket.url(prefix)}


@pytest.fixture(scope="module")
def dataset_reads(store, cats_data_dir):
    """{name: outputs} of the reader's reads of the local copy and of the store."""
    found, _ = reads.run(store, READS, **dirs(store, cats_data_dir, TFRECORD))
    return found


@pytest.mark.parametrize("mode", ["memory", "nocache", "share"])
def test_as_fast_dataset_from_a_store_reads_the_local_pairs(dataset_reads, cats_data_dir, mode):
    if mode != "share":
        Truth.of(cats_data_dir).check(dataset_reads[f"bucket-{mode}"])
    assert collections.Counter(dataset_reads[f"bucket-{mode}"]) == collections.Counter(
        dataset_reads[f"local-{mode}"]
    )
    assert dataset_reads[f"bucket-{mode}"]


@pytest.mark.parametrize("mode", ["memory", "nocache", "shuffled"])
def test_as_fast_dataset_from_a_store_reads_the_local_copys_sequence(dataset_reads, mode):
    """The same examples in the same order as from the local copy: the split's record
    order, and a seeded shuffled read's two epochs (streamed), whose file order and
    shuffle come from the seed, not from which shard's copy arrives first."""
    got, local = dataset_reads[f"bucket-{mode}"], dataset_reads[f"local-{mode}"]
    assert len(got) == len(local) > 0
    assert got == local


def test_augment_from_a_store_cuts_the_same_crops_as_from_the_local_copy(dataset_reads):
    got, local = dataset_reads["bucket-augment"], dataset_reads["local-augment"]
    assert len(got) == len(local) > 0
    assert collections.Counter(got) == collections.Counter(local)


@pytest.mark.parametrize("name", ["bucket-builder_dir", "bucket-tfds_load"])
def test_builder_dir_and_tfds_load_from_a_store_read_the_local_pairs(
    store, dataset_reads, cats_data_dir, name
):
    if name == "bucket-tfds_load" and store.scheme != "gs":
        assert name not in dataset_reads  # TFDS cannot read it: docs/sharing.md
        return
    Truth.of(cats_data_dir).check(dataset_reads[name])


def test_the_memory_cache_reads_each_shard_from_the_store_once_in_two_epochs(store, cats_data_dir):
    store.proxy.reset()
    code = """
import os
import cats_vs_dogs_fast
report("two", cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=os.environ["BUCKET_DIR"], batch_size=8, shuffle=False, seed=0,
    num_epochs=2, download_and_prepare=False))
"""
    found, _ = reads.run(store, code, **dirs(store, cats_data_dir, TFRECORD))
    Truth.of(cats_data_dir).check(found["two"], times=2)
    shards = [r.object for r in store.proxy.media_reads() if SHARD in r.object]
    per_shard = collections.Counter(shards)
    assert per_shard and set(per_shard.values()) == {1}, per_shard


COPIES = """
import gc, os
import cats_vs_dogs_fast

def copies():
    found = {}
    for folder in os.listdir(os.environ["TMPDIR"]):
        if folder.startswith("fast_tfds-shards-"):
            found[folder] = sorted(os.listdir(os.path.join(os.environ["TMPDIR"], folder)))
    print("COPIES", json.dumps(found), flush=True)

ds = cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=os.environ["BUCKET_DIR"], batch_size=8, seed=0, cache=False,
    num_epochs=2, download_and_prepare=False)
copies()
report("two", ds)
copies()
del ds
gc.collect()
copies()
"""


def test_as_fast_dataset_reads_whole_shard_copies_removed_with_the_dataset(
    store, cats_data_dir, tmp_path
):
    """A streamed read (cache=False) of two shuffled epochs from a store asks it for
    each shard object once (TensorFlow's client would read every shard in each epoch),
    from copies in a temporary folder under TMPDIR that is there when the dataset is made
    (the copies start while the builder loads: `copies.opening`), the same one the epochs
    read, and goes when the dataset does."""
    store.proxy.reset()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    child = reads.start(store, COPIES, BUCKET_DIR=store.url(TFRECORD), TMPDIR=os.fspath(tmp))
    child.stdin.close()
    out = child.rest()
    assert child.wait(60) == 0, child.stderr_text()[-4000:]
    before, read, after = [
        json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("COPIES ")
    ]
    found = [line for line in out.splitlines() if line.startswith("OUTPUTS two ")]
    Truth.of(cats_data_dir).check(
        [reads._output(r) for r in json.loads(found[0].split(" ", 2)[2])], times=2
    )
    ((folder, files),) = read.items()
    assert list(before) == [folder], (before, read)
    shards = sorted(
        f.name for f in (cats_data_dir / "cats_vs_dogs_fast/224/1.0.0").glob(f"*{SHARD_MARK}*")
    )
    assert len(shards) == 16 and [f.split("-", 1)[1] for f in files] == shards, files
    assert after == {}, after
    asked = collections.Counter(
        r.object for r in store.proxy.requests if r.object and SHARD_MARK in r.object
    )
    assert len(asked) == 16 and set(asked.values()) == {1}, asked


SLICES = """
import os
import cats_vs_dogs_fast
import tensorflow_datasets as tfds

split = "train[:25%]"
builder = tfds.builder_from_directory(os.environ["LOCAL_DIR"] + "/cats_vs_dogs_fast/224/1.0.0")
files = [os.path.basename(fi.filename) for fi in builder.info.splits[split].file_instructions]
print("SLICE", json.dumps(files), flush=True)
common = dict(batch_size=8, shuffle=False, seed=0, download_and_prepare=False)
report("dataset", cats_vs_dogs_fast.as_fast_dataset(
    split, data_dir=os.environ["BUCKET_DIR"] + "/tfrecord", **common))
report("loader", cats_vs_dogs_fast.as_fast_loader(
    split, data_dir=os.environ["BUCKET_DIR"] + "/array_record", **common))
"""


def test_a_slice_asks_the_store_for_its_own_shards_only(
    store, cats_data_dir, cats_array_record_dir
):
    """The shards' copies start while the builder loads only for a whole split: a slice's
    read (here a quarter of it) copies the shards it reads, once each, and no other."""
    store.proxy.reset()
    child = reads.start(store, SLICES, LOCAL_DIR=os.fspath(cats_data_dir), BUCKET_DIR=store.url())
    child.stdin.close()
    out = child.rest()
    assert child.wait(60) == 0, child.stderr_text()[-4000:]
    (line,) = [line for line in out.splitlines() if line.startswith("SLICE ")]
    files = json.loads(line.split(" ", 1)[1])
    assert 0 < len(files) < 16, files
    found = {
        name: [reads._output(r) for r in json.loads(rows)]
        for _, name, rows in (
            line.split(" ", 2) for line in out.splitlines() if line.startswith("OUTPUTS ")
        )
    }
    Truth.of(cats_data_dir, split="train[:25%]").check(found["dataset"])
    Truth.of(cats_array_record_dir, split="train[:25%]").check(found["loader"])
    for mark, name in ((SHARD_MARK, "dataset"), (ARRAY_RECORD_SHARD, "loader")):
        asked = collections.Counter(
            r.object.rsplit("/", 1)[-1]
            for r in store.proxy.requests
            if r.object and mark in r.object
        )
        expected = [f.replace(SHARD_MARK, mark) for f in files]
        assert sorted(asked) == sorted(expected) and set(asked.values()) == {1}, (name, asked)


LOADER_READS = """
import os, sys
import cats_vs_dogs_fast
import fast_tfds

common = dict(batch_size=8, shuffle=False, seed=0, download_and_prepare=False)
for where in ("local", "bucket"):
    data_dir = os.environ[where.upper() + "_DIR"]
    report(where + "-loader", cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, **common))
    report(where + "-loader-augment", cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, augment=fast_tfds.Augment(), **common))
    report(where + "-loader-share", cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, shard_index=1, shard_count=2, **common))
"""


def test_as_fast_loader_from_a_store_reads_the_local_pairs(
    store,
    cats_array_record_dir,
):
    """TFDS's metadata through the store's fsspec client, the records from whole-shard
    copies; a host's share (shard_count) as from the local copy."""
    store.proxy.reset()
    child = reads.start(store, LOADER_READS, **dirs(store, cats_array_record_dir, ARRAY_RECORD))
    child.stdin.close()
    found = reads.outputs_of(child)
    Truth.of(cats_array_record_dir).check(found["bucket-loader"])
    for name in ("loader", "loader-augment", "loader-share"):
        assert collections.Counter(found[f"bucket-{name}"]) == collections.Counter(
            found[f"local-{name}"]
        )
        assert found[f"bucket-{name}"]
    assert store.proxy.media_reads(".array_record-00000-of-00016"), "read from the store"


SHUFFLED_LOADER = """
import os
import cats_vs_dogs_fast

report("bucket", cats_vs_dogs_fast.as_fast_loader(
    "train", data_dir=os.environ["BUCKET_DIR"], batch_size=8, seed=0, download_and_prepare=False,
    num_workers=int(os.environ["WORKERS"])))
"""
ARRAY_RECORD_SHARD = ".array_record-"


def shard_reads(bucket) -> collections.Counter:
    """{object: requests} of every request for an ArrayRecord shard object (its bytes,
    its metadata, a range of it), answered or not."""
    return collections.Counter(
        r.object for r in bucket.proxy.requests if r.object and ARRAY_RECORD_SHARD in r.object
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_asks_the_store_for_whole_shards_not_records(
    store, cats_array_record_dir, workers
):
    """A shuffled epoch from a store asks for each shard object once (a copy of the whole
    object, shared by the worker processes), never once per record: the count of
    requests, not their time, is what this pins. With worker processes (untested
    before), the examples are the local copy's too."""
    store.proxy.reset()
    found, _ = reads.run(
        store,
        SHUFFLED_LOADER,
        BUCKET_DIR=store.url(ARRAY_RECORD),
        WORKERS=str(workers),
    )
    truth = Truth.of(cats_array_record_dir)
    truth.check(found["bucket"])
    asked = shard_reads(store)
    shards = 16
    assert len(asked) == shards, asked
    # Two workers may both start the copy of a shard that neither has finished.
    assert max(asked.values()) <= max(1, workers), asked
    assert sum(asked.values()) < len(found["bucket"]), (sum(asked.values()), len(found["bucket"]))


WITHOUT_GCSFS = """
import os
import cats_vs_dogs_fast
report("gs", cats_vs_dogs_fast.as_fast_loader(
    "train", data_dir=os.environ["GS_DIR"], batch_size=8, seed=0, download_and_prepare=False))
"""


def test_the_loader_without_gcsfs_reads_record_by_record_and_says_so(bucket, cats_array_record_dir):
    """Where gcsfs is not installed, the loader reads through array_record's client as
    before (a request per record), with one log line that says what to install."""
    bucket.proxy.reset()
    child = reads.start(
        bucket,
        BLOCK_PACKAGES + WITHOUT_GCSFS,
        args=["gcsfs"],
        GS_DIR=bucket.url(ARRAY_RECORD),
    )
    child.stdin.close()
    found = reads.outputs_of(child)
    Truth.of(cats_array_record_dir).check(found["gs"])
    said = [line for line in child.stderr_text().splitlines() if "needs gcsfs" in line]
    assert len(said) == 1 and "pip install 'fast-image-tfds[gcs]'" in said[0], child.stderr_text()[
        -3000:
    ]
    assert sum(shard_reads(bucket).values()) > 16


WITHOUT_TENSORFLOW = """
from etils.epath import gpath
# TensorFlow is still on disk here: etils would pick its gfile for gs:// metadata.
gpath._is_tf_installed = lambda: False
import os
import cats_vs_dogs_fast
report("gs-loader", cats_vs_dogs_fast.as_fast_loader(
    "train", data_dir=os.environ["BUCKET_DIR"], batch_size=8, shuffle=False, seed=0,
    download_and_prepare=False))
assert "tensorflow" not in sys.modules
"""


def test_as_fast_loader_reads_gs_where_tensorflow_is_not_installed(bucket, cats_array_record_dir):
    """TFDS's metadata through gcsfs (etils' gs:// back end without TensorFlow), the
    records through array_record: nothing goes through TensorFlow's GCS client."""
    bucket.proxy.reset()
    child = reads.start(
        bucket,
        BLOCK_PACKAGES + WITHOUT_TENSORFLOW,
        args=["tensorflow"],
        **dirs(bucket, cats_array_record_dir, ARRAY_RECORD),
    )
    child.stdin.close()
    found = reads.outputs_of(child)
    Truth.of(cats_array_record_dir).check(found["gs-loader"])
    hosts = {r.host for r in bucket.proxy.requests}
    assert hosts and not hosts & set(HOSTS), hosts  # no CONNECT: only plain HTTP clients


def test_the_proxys_tls_works_with_certificates_made_without_openssl(bucket, tmp_path):
    """Where openssl is not installed, the test CA comes from the cryptography package:
    a client that trusts only that CA lists the bucket through a proxy using it."""
    import http.client
    import ssl

    from tests.bucket import emulated

    ca, cert, key = emulated._certificates_with_cryptography(tmp_path)
    proxy = emulated.Proxy(bucket.emulator.port, cert, key)
    try:
        context = ssl.create_default_context(cafile=str(ca))
        conn = http.client.HTTPSConnection("127.0.0.1", proxy.port, timeout=60, context=context)
        conn.set_tunnel("www.googleapis.com", 443)
        conn.request("GET", f"/storage/v1/b/{bucket.name}/o?maxResults=1")
        response = conn.getresponse()
        body = response.read()
        conn.close()
    finally:
        proxy.close()
    assert response.status == 200 and b'"items"' in body, body[:300]
    assert [r.host for r in proxy.requests] == ["www.googleapis.com"]


@pytest.mark.parametrize(
    ("asked", "status", "part"),
    [
        ("bytes=-10", 206, slice(-10, None)),
        ("bytes=0-9", 206, slice(0, 10)),
        ("bytes=131062-131171", 206, slice(-10, None)),
        ("bytes=131072-", 416, slice(0, 0)),
    ],
)
def test_the_proxy_answers_range_reads_as_gcs_does(bucket, asked, status, part):
    """array_record finds a file's end with a suffix range and reads up to it: answered
    as the emulator does (the whole object; 206 and nothing), a file of many blocks
    reads as corrupt (the tests' tiny shards fit in one read and would not show it)."""
    import http.client

    data = bytes(range(256)) * 512  # 131,072 bytes: two 64 KiB blocks
    conn = http.client.HTTPConnection("127.0.0.1", bucket.emulator.port, timeout=60)
    bucket._put(conn, "ranges/blocks", data)
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", bucket.proxy.port, timeout=60)
    path = f"/download/storage/v1/b/{bucket.name}/o/ranges%2Fblocks?alt=media"
    conn.request("GET", path, headers={"Range": asked})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    assert (response.status, body) == (status, data[part])
