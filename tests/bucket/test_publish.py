"""`fast-tfds publish` into the emulated gs:// bucket (and S3's and Azure's servers): a
published build reads as the local one with both front doors, publishing it again uploads
nothing, another build at the url is refused unless --overwrite, a publish cut short
completes when run again (uploading only what is missing), and a reader during a publish
is told the build is not there.

Each publish runs `python -m fast_tfds.cli publish` in a child with the store's
environment (each client takes the server's address from it), each into its own prefix
of the session's store.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time

import pytest
from tqdm import tqdm

from fast_tfds.building.publishing import PublishError, publish
from tests.bucket import reads
from tests.bucket.emulated import child_env
from tests.children import Child
from tests.helpers import BLOCK_PACKAGES, REPO
from tests.pairs import Truth

VERSION = ("cats_vs_dogs_fast", "224", "1.0.0")

DATASET = """
import os
import cats_vs_dogs_fast
report("dataset", cats_vs_dogs_fast.as_fast_dataset(
    "train", data_dir=os.environ["GS_DIR"], batch_size=8, shuffle=False, seed=0,
    download_and_prepare=False))
"""

LOADER = """
import os
import cats_vs_dogs_fast
try:
    report("loader", cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=os.environ["GS_DIR"], batch_size=8, shuffle=False, seed=0,
        download_and_prepare=False))
except Exception as error:
    print("ERROR", type(error).__name__, " ".join(str(error).split()), flush=True)
"""


def version_dir(data_dir) -> str:
    return os.path.join(data_dir, *VERSION)


def start_publish(bucket, folder, url, *options: str, code: str = "", **env: str) -> Child:
    """`fast-tfds publish folder url` in a child, through its entry point (`code`: run
    first, e.g. to block an import; `env`: more of its environment)."""
    command = [sys.executable]
    if code:
        runner = code + "\nfrom fast_tfds.cli import main\nmain(sys.argv[2:])\n"
        command += ["-c", runner, "gcsfs"]
    else:
        command += ["-m", "fast_tfds.cli"]
    command += ["publish", os.fspath(folder), url, *options]
    return Child(command, cwd=REPO, env=child_env(bucket, **env))


def run_publish(bucket, folder, url, *options: str, code: str = "") -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `fast-tfds publish folder url`."""
    child = start_publish(bucket, folder, url, *options, code=code)
    out = child.rest()
    return child.wait(60), out, child.stderr_text()


def published(bucket, folder, url, *options: str) -> str:
    """The summary line of a publish that succeeded."""
    code, out, err = run_publish(bucket, folder, url, *options)
    assert code == 0, err[-3000:]
    assert "Publishing" not in err, err[-3000:]  # no progress bar but on a terminal
    return out.strip().splitlines()[-1]


def objects(bucket, prefix: str) -> list[str]:
    return [n.rsplit("/", 1)[-1] for n in bucket.names(f"{prefix}/{'/'.join(VERSION)}")]


def test_a_published_build_reads_the_local_pairs_and_published_again_uploads_nothing(
    bucket, cats_both_formats_dir
):
    """A build with TFRecord and ArrayRecord files, published, then read from the bucket
    with `as_fast_dataset` (its TFRecord files) and `as_fast_loader` (its ArrayRecord
    files); published again: no upload at all."""
    folder = version_dir(cats_both_formats_dir)
    local = sorted(os.listdir(folder))
    bucket.proxy.reset()
    said = published(bucket, folder, bucket.url("published"))
    assert said.endswith(f": {len(local)} files uploaded, 0 already there"), said
    uploaded = [n.rsplit("/", 1)[-1] for n in bucket.proxy.uploaded()]
    assert sorted(uploaded) == local == objects(bucket, "published")
    is_shard = ["-of-" in n for n in uploaded]
    assert is_shard == sorted(is_shard, reverse=True), uploaded  # the data files first
    assert uploaded[-1] == "dataset_info.json", uploaded

    found, err = reads.run(bucket, DATASET + LOADER, GS_DIR=bucket.url("published"))
    Truth.of(cats_both_formats_dir).check(found["dataset"])
    # The loader opens the ArrayRecord files of a build that has both formats (it prints
    # ERROR and reports nothing where it cannot).
    assert "loader" in found, err[-3000:]
    Truth.of(cats_both_formats_dir).check(found["loader"])

    bucket.proxy.reset()
    said = published(bucket, folder, bucket.url("published", *VERSION))  # the folder itself
    assert said.endswith(f": 0 files uploaded, {len(local)} already there"), said
    assert bucket.proxy.uploaded() == []


def test_another_build_at_the_url_is_refused_then_replaced_with_overwrite(
    bucket, cats_data_dir, cats_array_record_dir
):
    """The TFRecord build, then the ArrayRecord build of the same version to the same url:
    refused in one line; with --overwrite, the TFRecord files are gone and the loader
    reads the ArrayRecord build."""
    url = bucket.url("replaced")
    local_tfrecord = os.listdir(version_dir(cats_data_dir))
    published(bucket, version_dir(cats_data_dir), url)
    code, out, err = run_publish(bucket, version_dir(cats_array_record_dir), url)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith("ERROR: gs://") and "holds another build" in lines[0]
    assert "--overwrite" in lines[0]
    assert any(".tfrecord-" in n for n in objects(bucket, "replaced"))

    bucket.proxy.reset()
    said = published(bucket, version_dir(cats_array_record_dir), url, "--overwrite")
    assert "of another build removed" in said, said
    deleted = [r.object.rsplit("/", 1)[-1] for r in bucket.proxy.requests if r.method == "DELETE"]
    assert deleted[0] == "dataset_info.json", deleted  # readers see no build from then on
    assert sorted(deleted[1:]) == sorted(n for n in local_tfrecord if ".tfrecord-" in n), deleted
    assert objects(bucket, "replaced") == sorted(os.listdir(version_dir(cats_array_record_dir)))
    found, _ = reads.run(bucket, LOADER, GS_DIR=url)
    Truth.of(cats_array_record_dir).check(found["loader"])


def test_a_publish_cut_short_hides_the_build_then_completes_uploading_only_whats_missing(
    store, cats_array_record_dir
):
    """The store (gs, s3, az: the servers the tests share) takes two uploads, then none: a
    reader started then is told the build is not there (no examples); the publisher is
    killed; run again, it uploads only the objects that did not get there,
    dataset_info.json last, and the loader reads it."""
    folder, url = version_dir(cats_array_record_dir), store.url("cut_short")
    local = sorted(os.listdir(folder))
    store.proxy.reset()
    store.proxy.release.clear()
    store.proxy.uploads_allowed = 2
    child = start_publish(store, folder, url)
    try:
        deadline = time.monotonic() + 120
        while len(store.proxy.uploaded()) < 2 and child.poll() is None:
            assert time.monotonic() < deadline, "the publisher made no 2 uploads in 120 s"
            time.sleep(0.1)
        reader = reads.start(store, LOADER, GS_DIR=url)
        reader.stdin.close()
        found, error = reads.ended(reader)
        assert "loader" not in found and error.startswith("ERROR "), error
        assert "not built" in error or "not published" in error, error
    finally:
        child.kill()
        child.wait(60)
        store.proxy.uploads_allowed = None
        store.proxy.release.set()  # the held uploads are dropped
    there = objects(store, "cut_short")
    store.proxy.release.clear()  # as the session's store was
    assert len(there) == 2 and "dataset_info.json" not in there, there

    store.proxy.reset()
    said = published(store, folder, url)
    assert said.endswith(f": {len(local) - 2} files uploaded, 2 already there"), said
    uploaded = [n.rsplit("/", 1)[-1] for n in store.proxy.uploaded()]
    assert sorted(uploaded) == sorted(set(local) - set(there)), uploaded
    assert uploaded[-1] == "dataset_info.json", uploaded
    assert objects(store, "cut_short") == local
    found, _ = reads.run(store, LOADER, GS_DIR=url)
    Truth.of(cats_array_record_dir).check(found["loader"])


def test_a_store_that_stops_answering_ends_the_publish_within_the_read_timeout(
    store, cats_array_record_dir
):
    """No upload answered (the proxy holds them, for longer than the clients would wait
    and retry): the publish ends after the one read timeout without progress
    (FAST_TFDS_BUCKET_READ_TIMEOUT_S), in one line naming an object it was uploading, a
    data file (they go first); no dataset_info.json gets there."""
    folder, url = version_dir(cats_array_record_dir), store.url("unanswered")
    shards = [n for n in os.listdir(folder) if "-of-" in n]
    store.proxy.release.clear()
    store.proxy.uploads_allowed = 0
    try:
        child = start_publish(store, folder, url, FAST_TFDS_BUCKET_READ_TIMEOUT_S="5")
        out = child.rest(60)
        code, err = child.wait(60), child.stderr_text()
    finally:
        store.proxy.uploads_allowed = None
        store.proxy.release.set()  # the held uploads are dropped
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and not out.strip(), err[-3000:]
    prefix = f"ERROR: uploading {store.url('unanswered', *VERSION)}/"
    assert lines[0].startswith(prefix), lines
    assert lines[0][len(prefix) :].split(":")[0] in shards, lines
    assert ": no answer within 5 s (the store is unreachable or too slow); " in lines[0], lines
    assert "FAST_TFDS_BUCKET_READ_TIMEOUT_S=SECONDS" in lines[0], lines
    store.proxy.release.clear()  # as the session's store was
    assert "dataset_info.json" not in objects(store, "unanswered")


def test_a_write_the_store_refuses_and_a_missing_client_are_one_line(bucket, cats_data_dir):
    folder = version_dir(cats_data_dir)
    code, _, err = run_publish(bucket, folder, "gs://no-such-bucket/data")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert "gs://no-such-bucket/data/cats_vs_dogs_fast/224/1.0.0/" in lines[0], lines
    assert "refused the write" in lines[0], lines

    code, _, err = run_publish(bucket, folder, bucket.url("no_client"), code=BLOCK_PACKAGES)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert "needs gcsfs" in lines[0] and "pip install 'fast-image-tfds[gcs]'" in lines[0], lines


@pytest.mark.parametrize(
    ("what", "said"),
    [
        ("missing", "no such folder"),
        ("empty", "not a built version folder (no dataset_info.json"),
        ("data_dir", "not a version folder (no dataset_info.json); pass the one to publish, "),
        ("local_url", "publishing writes to an object store (gs://, s3://, az://)"),
        ("other_scheme", "hdfs://b/data/cats_vs_dogs_fast/224/1.0.0: no store here publishes "),
        ("abfs", "abfss://b@lab.dfs.core.windows.net/data/cats_vs_dogs_fast/224/1.0.0: abfss:// "),
    ],
)
def test_what_cannot_be_published_is_refused_in_one_line(tmp_path, cats_data_dir, what, said):
    folder = {
        "missing": tmp_path / "missing",
        "empty": tmp_path,
        "data_dir": cats_data_dir,
        "local_url": version_dir(cats_data_dir),
        "other_scheme": version_dir(cats_data_dir),
        "abfs": version_dir(cats_data_dir),
    }[what]
    url = {
        "local_url": os.fspath(tmp_path / "out"),
        "other_scheme": "hdfs://b/data",
        "abfs": "abfss://b@lab.dfs.core.windows.net/data",
    }.get(what, "gs://bucket/data")
    with pytest.raises(PublishError) as raised:
        publish(folder, url)
    message = str(raised.value)
    assert said in message and "\n" not in message, message
    if what == "data_dir":
        assert message.endswith(version_dir(cats_data_dir)), message
    if what == "abfs":
        assert message.endswith("; publish to az://b/data/cats_vs_dogs_fast/224/1.0.0"), message


READ_BACK = """
import dataclasses
import sys
from fast_tfds.building.publishing import publish
from fast_tfds.cache.remote import object_stores

# A store that keeps no checksum of its objects (a publisher reads them back).
object_stores.STORES["gs"] = dataclasses.replace(
    object_stores.GCS, checksum=lambda key, entry: None, digest=None
)
for _ in range(2):
    done = publish(sys.argv[1], sys.argv[2])
    print("PUBLISHED", len(done.uploaded), len(done.kept), flush=True)
"""


def test_where_the_store_keeps_no_checksum_the_objects_are_read_back(bucket, cats_data_dir):
    """Each object is checked by its bytes read back, and so is each object already there
    when the same build is published again: nothing is uploaded the second time."""
    folder, url = version_dir(cats_data_dir), bucket.url("read_back")
    local = sorted(os.listdir(folder))
    bucket.proxy.reset()
    child = Child([sys.executable, "-c", READ_BACK, folder, url], cwd=REPO, env=child_env(bucket))
    out = child.rest()
    assert child.wait(60) == 0, child.stderr_text()[-3000:]
    said = [line.split()[1:] for line in out.splitlines() if line.startswith("PUBLISHED")]
    assert said == [[str(len(local)), "0"], ["0", str(len(local))]], out
    assert sorted(n.rsplit("/", 1)[-1] for n in bucket.proxy.uploaded()) == local
    read = [r.object.rsplit("/", 1)[-1] for r in bucket.proxy.media_reads() if r.object]
    assert sorted(read) == sorted(local * 2), read  # once after its upload, once again


def test_on_a_terminal_a_progress_bar_shows_the_bytes_uploaded(bucket, cats_data_dir):
    folder = version_dir(cats_data_dir)
    total = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))
    terminal, stderr = pty.openpty()
    fcntl.ioctl(stderr, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    command = [sys.executable, "-m", "fast_tfds.cli", "publish", folder, bucket.url("terminal")]
    child = Child(command, cwd=REPO, env=child_env(bucket), stderr=stderr)
    os.close(stderr)
    out = child.rest()
    assert child.wait(60) == 0
    shown = b""
    while select.select([terminal], [], [], 0)[0]:
        try:
            piece = os.read(terminal, 65536)
        except OSError:  # the child's end is closed
            break
        if not piece:
            break
        shown += piece
    os.close(terminal)
    last = shown.decode(errors="replace").split("\r")[-2]
    size = tqdm.format_sizeof(total)
    assert last.startswith("Publishing: 100%|") and f"| {size}/{size} [" in last, shown
    assert "files uploaded" in out and "Publishing" not in out


@pytest.mark.parametrize("store", ["s3", "az"], indirect=True)
def test_s3_and_azure_publish_checked_uploads_that_read_back_and_are_not_made_twice(
    store, cats_array_record_dir
):
    """The ArrayRecord build published to moto's S3 and to Azurite: each object checked by
    the store's own checksum (S3's SHA-256 asked for at upload, Azure's Content-MD5), the
    loader reads the local pairs from it, and publishing again uploads nothing."""
    folder = version_dir(cats_array_record_dir)
    count = len(os.listdir(folder))
    url = store.url(f"published-{store.scheme}")
    said = published(store, folder, url)
    assert said.endswith(f": {count} files uploaded, 0 already there"), said
    found, _ = reads.run(store, LOADER, GS_DIR=url)
    Truth.of(cats_array_record_dir).check(found["loader"])
    said = published(store, folder, url)
    assert said.endswith(f": 0 files uploaded, {count} already there"), said
