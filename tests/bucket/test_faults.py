"""A bucket that fails: an object missing, the bucket gone mid-epoch, a slow bucket.

A test that breaks its bucket (removes or rewrites an object, stops it) has one of its
own (`own_bucket`); one that slows it down reads the shared one through a proxy of its own
(`slowed_bucket`); the others read the shared one (`bucket`).

Every read ends within a bounded time (every wait here has a timeout), with an error
that names the object, or with the right examples; the examples served before an
error are right ones (pixels with their own label), never others.
"""

from __future__ import annotations

import collections
import json
import os

import pytest

from tests.bucket import reads
from tests.bucket.conftest import ARRAY_RECORD, TFRECORD
from tests.helpers import BLOCK_PACKAGES
from tests.pairs import Truth

# How long a failing read may take, at most, with the settings below: TensorFlow's GCS
# client with 2 retries of its own (its default is 10, with back-off up to 32 s each),
# the shard copies (the loader's, and as_fast_dataset's with gcsfs) with a 20 s read
# timeout without progress (gcsfs and array_record's client retry for minutes).
BOUND_S = 240
FAIL_FAST = {
    "GCS_RETRY_CONFIG_MAX_RETRIES": "2",
    "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "100000",
    "GCS_RETRY_CONFIG_MAX_DELAY_TIME_US": "1000000",
    "FAST_TFDS_BUCKET_READ_TIMEOUT_S": "20",
}
PREFIX = {"dataset": TFRECORD, "dataset-tf-client": TFRECORD, "loader": ARRAY_RECORD}
# "dataset" reads shard copies made with gcsfs; "dataset-tf-client" has no gcsfs, and
# reads the shards through TensorFlow's GCS client.
KINDS = list(PREFIX)
SHARD = "cats_vs_dogs_fast/224/1.0.0/cats_vs_dogs_fast-train.{}-00009-of-00016"

READ = """
import os
import cats_vs_dogs_fast
from tests.pairs import outputs_of

kind = os.environ["KIND"].split("-")[0]
read = {"dataset": cats_vs_dogs_fast.as_fast_dataset, "loader": cats_vs_dogs_fast.as_fast_loader}
got = []
try:
    for i, element in enumerate(read[kind](
        "train", data_dir=os.environ["GS_DIR"], batch_size=4, shuffle=False, seed=0,
        download_and_prepare=False,
    )):
        got.extend(list(o) for o in outputs_of(element))
        if i == 0 and os.environ.get("PAUSE"):
            print("FIRST", flush=True)
            sys.stdin.readline()
except Exception as error:
    print("OUTPUTS read", json.dumps(got), flush=True)
    print("ERROR", type(error).__name__, json.dumps(str(error)), flush=True)
else:
    print("OUTPUTS read", json.dumps(got), flush=True)
"""


def truth_of(kind, cats_data_dir, cats_array_record_dir) -> Truth:
    return Truth.of(cats_data_dir if kind.startswith("dataset") else cats_array_record_dir)


def assert_right_examples(outputs, truth: Truth) -> None:
    """Every example served is one of the split's, with its own pixels and label."""
    expected = truth.expect(("digest", "label"))
    assert not collections.Counter(outputs) - expected, "an example not in the split"


def start(bucket, kind: str, own_interpreter: bool = False, **env):
    """The read of `kind` in a child: a fork of a server that has imported TensorFlow
    where its code allows (`tests.forks`; the TensorFlow client's kind blocks gcsfs, and
    so has an interpreter of its own), or one of its own with `own_interpreter`."""
    bucket.proxy.reset()  # The requests of this read only.
    settings = {**FAIL_FAST, **env}
    code, args = READ, ()
    if kind == "dataset-tf-client":
        code, args = BLOCK_PACKAGES + READ, ["gcsfs"]
    return reads.start(
        bucket,
        code,
        args=args,
        own_interpreter=own_interpreter,
        KIND=kind,
        GS_DIR=bucket.url(PREFIX[kind]),
        **settings,
    )


def failed_read(child) -> tuple[dict, str]:
    """(what the child read, its error's message) once its read ends, which must be
    with an error."""
    child.stdin.close()
    found, error = reads.ended(child, BOUND_S)
    assert error, "the read ended without an error"
    _, message = error_message(error)
    return found, message


def copy_error_line(message: str, url: str) -> str:
    """The one line a failed shard copy gives as_fast_dataset's epoch (in TensorFlow's
    error, which adds the op that raised it on lines of its own)."""
    (line,) = [line for line in message.splitlines() if f"fast_tfds: {url}" in line]
    assert "Traceback" not in message, message
    return line[line.index(f"fast_tfds: {url}") :]


def error_message(line: str) -> tuple[str, str]:
    _, kind, message = line.split(" ", 2)
    return kind, json.loads(message)


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_object_ends_the_read_with_its_name(
    own_bucket, kind, cats_data_dir, cats_array_record_dir
):
    file_format = "tfrecord" if kind.startswith("dataset") else "array_record"
    name = f"{PREFIX[kind]}/{SHARD.format(file_format)}"
    own_bucket.delete(name)
    child = start(own_bucket, kind)
    found, message = failed_read(child)
    assert f"gs://{own_bucket.name}/{name}" in message, message
    assert "gcloud storage ls -l" in message, message
    if kind == "loader":
        assert "\n" not in message, message
    elif kind == "dataset":
        line = copy_error_line(message, f"gs://{own_bucket.name}/{name}")
        assert ": reading it from the bucket failed (FileNotFoundError" in line, line
    else:
        assert "reading it from the bucket failed" in message, message
        assert "fast-tfds verify" not in message and "--overwrite" not in message, message
    if kind.startswith("dataset"):
        # Asked for once: a 404 is not retried, and a failed read ends the shard.
        asked = [r for r in own_bucket.proxy.requests if r.object == name]
        assert [r.status for r in asked] == [404], asked
    assert_right_examples(found["read"], truth_of(kind, cats_data_dir, cats_array_record_dir))


@pytest.mark.parametrize("kind", ["dataset", "dataset-tf-client"])
def test_a_truncated_object_is_named_not_its_copy(own_bucket, kind, cats_data_dir):
    """A shard object cut short in the bucket: the copy is whole (the object's bytes, all
    of them), so its records fail their checks, and the error names the object in the
    bucket, never the local copy's temporary path."""
    name = f"{TFRECORD}/{SHARD.format('tfrecord')}"
    data = (cats_data_dir / SHARD.format("tfrecord")).read_bytes()
    own_bucket.rewrite(name, data[: len(data) // 2])
    child = start(own_bucket, kind)
    found, message = failed_read(child)
    assert f"fast_tfds: shard gs://{own_bucket.name}/{name} gave " in message, message
    assert "fast_tfds-shards-" not in message, message
    if kind == "dataset":
        assert "the object in the bucket is truncated or corrupt" in message, message
    assert_right_examples(found["read"], Truth.of(cats_data_dir))


@pytest.mark.parametrize("kind", KINDS)
def test_a_bucket_gone_mid_epoch_ends_the_read_with_an_object_named(
    own_bucket, kind, cats_data_dir, cats_array_record_dir
):
    # Each request waits, so that most shards are still unread when the bucket goes, and
    # one shard's requests are held until it has gone: the readers with shard copies ask
    # for every shard as the epoch starts, and would have them all by the first batch.
    own_bucket.proxy.latency_s = 0.5
    own_bucket.proxy.held = SHARD.format(
        "tfrecord" if kind.startswith("dataset") else "array_record"
    )
    # The read timeout set short (FAIL_FAST's is for reads that must not fail): the shard
    # copies' client retries a dropped connection for longer than it, so the test waits
    # it out.
    # An interpreter of its own, not a fork (`tests.forks`): this read ends by what the
    # store's client does when its connections fail, and in a fork the bucket gone
    # mid-epoch ended the read without a request failing at the proxy (5 runs of 5).
    child = start(
        own_bucket, kind, own_interpreter=True, PAUSE="1", FAST_TFDS_BUCKET_READ_TIMEOUT_S="8"
    )
    child.until("FIRST\n", BOUND_S)
    own_bucket.emulator.stop()
    own_bucket.proxy.release.set()
    child.stdin.write("\n")
    found, message = failed_read(child)
    assert f"gs://{own_bucket.name}/{PREFIX[kind]}/" in message, message
    if kind != "dataset-tf-client":
        # The shard copies' client (gcsfs) gives up on a dropped connection after its
        # own retries, or the reader stops waiting after 8 s without a byte: one line.
        if kind == "dataset":
            message = copy_error_line(message, f"gs://{own_bucket.name}/{PREFIX[kind]}/")
        assert "\n" not in message, message
        assert "within 8 s" in message or "reading it from the bucket failed" in message, message
    else:
        assert "reading it from the bucket failed" in message, message
        assert "GCS_RETRY_CONFIG_MAX_RETRIES" in message, message
    assert_right_examples(found["read"], truth_of(kind, cats_data_dir, cats_array_record_dir))
    failed = collections.Counter(r.object for r in own_bucket.proxy.requests if r.status == 0)
    assert failed, "no request failed"
    if kind == "dataset-tf-client":
        # One retry cycle of TensorFlow's client per object (the first try and its 2
        # retries), never one per record of the shard.
        retries = int(FAIL_FAST["GCS_RETRY_CONFIG_MAX_RETRIES"])
        assert max(failed.values()) <= 1 + retries, failed


@pytest.mark.parametrize("kind", KINDS)
def test_a_slow_bucket_reads_the_same_pairs(
    slowed_bucket, kind, cats_data_dir, cats_array_record_dir
):
    slowed_bucket.proxy.latency_s = 0.2
    child = start(slowed_bucket, kind)
    child.stdin.close()
    found, error = reads.ended(child, BOUND_S)
    assert not error, error
    truth_of(kind, cats_data_dir, cats_array_record_dir).check(found["read"])
    shard = ".tfrecord-00000-of-00016" if kind.startswith("dataset") else ""
    assert slowed_bucket.proxy.media_reads(shard)


def test_an_emulator_host_without_array_records_endpoint_is_one_line(bucket):
    child = start(bucket, "loader", CLOUD_STORAGE_EMULATOR_ENDPOINT="")
    child.stdin.close()
    _, error = reads.ended(child, BOUND_S)
    kind, message = error_message(error)
    assert kind == "ValueError" and "\n" not in message, message
    assert message.startswith("STORAGE_EMULATOR_HOST=") and "CLOUD_STORAGE_EMULATOR_ENDPOINT=" in (
        message
    )
    assert not [r for r in bucket.proxy.requests if r.object and ".array_record-" in r.object]


@pytest.mark.parametrize("kind", ["dataset", "loader"])
def test_a_bad_read_timeout_is_the_same_one_line_in_both_readers(bucket, kind):
    """The one read timeout (`object_stores.timeout_s`): both readers of a bucket's
    shards say the same line for a bad value."""
    child = start(bucket, kind, FAST_TFDS_BUCKET_READ_TIMEOUT_S="soon")
    child.stdin.close()
    _, error = reads.ended(child, BOUND_S)
    assert error_message(error) == (
        "ValueError",
        "FAST_TFDS_BUCKET_READ_TIMEOUT_S='soon': must be a positive number of seconds",
    )


def test_the_fail_fast_settings_are_tensorflows():
    """The GCS settings above are read by this TensorFlow (else the bound is untested)."""
    import tensorflow as tf

    library = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2")
    if not os.path.exists(library):
        pytest.skip(f"no {library} to look into")
    with open(library, "rb") as f:
        data = f.read()
    for name in FAIL_FAST:
        if name.startswith("GCS_"):
            assert name.encode() in data, name


@pytest.mark.parametrize("kind", ["tf-augment", "loader"])
def test_a_listing_with_no_answer_in_time_caches_in_memory_with_one_line(
    slowed_bucket, kind, tmp_path, cats_data_dir, cats_array_record_dir
):
    """persist=True lists the shards' folder for its key: a bucket that does not answer
    the listing within FAST_TFDS_BUCKET_READ_TIMEOUT_S is one line naming the folder,
    and the read goes on from memory, with the right examples and no file."""
    slowed_bucket.proxy.listing_latency_s = 4  # answered, but twice the read timeout late
    prefix = TFRECORD if kind == "tf-augment" else ARRAY_RECORD
    cache = tmp_path / "cache"
    cache.mkdir()
    local = cats_data_dir if kind == "tf-augment" else None
    found, stderr = reads.run(
        slowed_bucket,
        reads.PERSIST,
        **reads.persisting((kind, slowed_bucket.url(prefix), cache, local)),
        FAST_TFDS_BUCKET_READ_TIMEOUT_S="2",
    )
    warned = [line for line in stderr.splitlines() if "caching in memory only" in line]
    folder = slowed_bucket.url(prefix, "cats_vs_dogs_fast/224/1.0.0")
    assert len(warned) == 1 and f"listing {folder} gave no answer within 2 s" in warned[0], stderr[
        -3000:
    ]
    if kind == "loader":
        truth = Truth.of(cats_array_record_dir)
        truth.check(found["loader:gs0"])
        truth.check(found["loader:gs1"])
    else:  # the same crops as the local copy's in memory
        for k in range(2):
            got, local_got = found[f"{kind}:gs{k}"], found[f"{kind}:local{k}"]
            assert collections.Counter(got) == collections.Counter(local_got)
            assert len(got) > 0
    assert not [p for p in cache.iterdir() if p.is_file()], "no persistent file"


# An opening that fails: a build not in the bucket (at once, as before), or a read whose
# options are refused once the builder is loaded, when its shards' copies have started
# (`cache.remote.copies.opening`). Then the child waits, bounded, for the copying threads to end and
# the copies' folder to go, and says what is left: nothing may go on copying for an
# opening that failed.
OPENING_FAILS = """
import json, os, threading, time
import cats_vs_dogs_fast

kind, case = os.environ["KIND"], os.environ["CASE"]
read = {"dataset": cats_vs_dogs_fast.as_fast_dataset, "loader": cats_vs_dogs_fast.as_fast_loader}
refused = {"dataset": {"no_such_option": 1}, "loader": {"shard_count": 10**6}}
try:
    read[kind]("train", data_dir=os.environ["GS_DIR"], batch_size=4, seed=0,
               download_and_prepare=False, **(refused[kind] if case == "refused" else {}))
except Exception as error:
    print("ERROR", type(error).__name__, json.dumps(str(error)), flush=True)

def left():
    copying = [t.name for t in threading.enumerate() if t.name.startswith("fast_tfds-")]
    tmp = os.environ["TMPDIR"]
    return copying + [p for p in os.listdir(tmp) if p.startswith("fast_tfds-shards-")]

deadline = time.monotonic() + 60
while left() and time.monotonic() < deadline:
    time.sleep(0.05)
print("LEFT", json.dumps(left()), flush=True)
"""


@pytest.mark.parametrize("kind", ["dataset", "loader"])
def test_a_build_not_in_the_bucket_is_one_line_and_copies_nothing(bucket, kind, tmp_path):
    data_dir = bucket.url("nothing-here")
    bucket.proxy.reset()
    child = reads.start(
        bucket, OPENING_FAILS, KIND=kind, CASE="missing", GS_DIR=data_dir, TMPDIR=f"{tmp_path}"
    )
    child.stdin.close()
    out = child.rest(BOUND_S)
    assert child.wait(60) == 0, child.stderr_text()[-4000:]
    (error,) = [line for line in out.splitlines() if line.startswith("ERROR ")]
    name, message = error_message(error)
    assert name == "DatasetNotBuilt" and "\n" not in message, message
    assert message.startswith(
        f"download_and_prepare=False: cats_vs_dogs_fast/224/1.0.0 is not built in {data_dir}; run "
    ), message
    assert "LEFT []" in out.splitlines(), out
    assert not bucket.proxy.media_reads(), bucket.proxy.media_reads()


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("dataset", "no_such_option: not an option of as_fast_dataset for cats_vs_dogs_fast; "),
        ("loader", "shard_count=1000000: "),
    ],
)
def test_an_opening_refused_after_its_copies_started_leaves_nothing_copying(
    bucket, kind, says, tmp_path
):
    """The shards' copies start while the builder loads; options refused after that are
    the same one line as before, and the copies stop: no copying thread, no folder left
    (the loader's reader had taken its copies by then, the dataset's had not)."""
    child = reads.start(
        bucket,
        OPENING_FAILS,
        KIND=kind,
        CASE="refused",
        GS_DIR=bucket.url(PREFIX[kind]),
        TMPDIR=f"{tmp_path}",
    )
    child.stdin.close()
    out = child.rest(BOUND_S)
    assert child.wait(60) == 0, child.stderr_text()[-4000:]
    (error,) = [line for line in out.splitlines() if line.startswith("ERROR ")]
    _, message = error_message(error)
    assert message.startswith(says) and "\n" not in message, message
    assert "LEFT []" in out.splitlines(), out
