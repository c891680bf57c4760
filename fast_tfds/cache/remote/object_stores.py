"""The one seam between the readers and an object store (`gs://`, `s3://`, `az://`): which
store holds a url, its fsspec client, its listing and what identifies an object's content in it, how
long a read from it may wait, and the one-line errors of a read that fails.

`ObjectStore` is what a store must say; `GCS` (gcsfs, the `[gcs]` extra), `S3` (s3fs,
`[s3]`) and `AZURE` (adlfs, `[azure]`) are one row each of it in `STORES`: the copies, the
openings, the builder's metadata and the persistent cache's keys are written against
`ObjectStore` alone. Each client finds the store's usual credentials itself (environment,
profile, managed identity); no argument of ours carries them.

The client is found through fsspec's registry of protocols (fsspec comes with TFDS), so
that a process without it is told what to install, not given an ImportError; whether it
is installed is asked without importing it (`installed`): gcsfs's import, aiohttp's
included, is a few tenths of a second, and a reader that opens a dataset asks this.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from typing import Any, TypeVar

from fast_tfds.core.options import env_seconds

# How long a read from a bucket (a copy, a record, a listing), or an upload to it (`fast-tfds
# publish`), may wait without progress before it gives up: gcsfs and array_record's client
# retry for minutes, so without this bound a bucket that went away would look like a hang.
# A healthy bucket answers in well under a second.
TIMEOUT_ENV = "FAST_TFDS_BUCKET_READ_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0

# Copies at a time, per process (`copies.ObjectCopies`): enough to keep a bucket's latency
# hidden, few enough that one slow copy does not starve the reads of the shards it holds.
PARALLEL_COPIES = 16
# The connections a store's client keeps open at once: one for every copy at a time, and
# as many again for what runs beside them (the builder's metadata, a listing, a second
# reader's copies). A client holding fewer (botocore's default is 10) queues the copies
# beyond it behind whole shards, and the small requests that the builder's opening waits
# for behind them all.
CONNECTIONS = 2 * PARALLEL_COPIES

T = TypeVar("T")


class BucketReadError(RuntimeError):
    """A shard in an object store could not be read (one line: the object, what the
    store said, and what to do)."""


class NotKeyed(Exception):
    """Why the objects' metadata could not be had (one line, for the log)."""


class NoAnswer(TimeoutError):
    """A call into a store's client gave no answer within its bounded time (`within`)."""


def timeout_s() -> float:
    """FAST_TFDS_BUCKET_READ_TIMEOUT_S, else 120 s; a one-line ValueError for a bad value
    (every reader of a bucket, and every listing, asks this one)."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def said_of(error: BaseException) -> str:
    """An error as a few words on one line (what a one-line message quotes)."""
    return " ".join(f"{type(error).__name__}: {error}".split())[:500]


def within(
    call: Callable[[], T],
    timeout: float,
    name: str,
    progress: Callable[[], float] | None = None,
) -> T:
    """`call()`'s result or its error, run `in_thread` (`name`) and waited for as `waited`
    says (`timeout` seconds, without progress where `progress` is given)."""
    return waited(in_thread(call, name), timeout, progress)


def in_thread(call: Callable[[], T], name: str) -> Future:
    """`call()` started in a daemon thread (`name`): its result or its error, as a Future.
    A client's retries (and making the client: finding credentials) can each take minutes
    where the bucket does not answer; the stuck thread is left to end on its own, and as a
    daemon does not hold up the exit (a ThreadPoolExecutor's threads would: they are
    joined at exit). A thread costs tens of microseconds; a request to a bucket,
    milliseconds."""
    result: Future = Future()

    def run():
        try:
            result.set_result(call())
        except BaseException as error:  # noqa: BLE001  (re-raised by its waiter)
            result.set_exception(error)

    threading.Thread(target=run, daemon=True, name=name).start()
    return result


def waited(result: Future, timeout: float, progress: Callable[[], float] | None = None) -> Any:
    """`result`'s result or its error once it is there, else `NoAnswer` after `timeout`
    seconds; where `progress()` gives the time (monotonic) of the last progress towards it
    (a transfer's last piece, `get_file`, `put_file`), `timeout` seconds without progress: a long
    transfer whose pieces keep coming is waited for. The one bounded wait of every call
    into a store (`within`) and of every wait for a shard's copy (`copies`)."""
    started = time.monotonic()
    while not result.done():
        last = max(started, progress()) if progress is not None else started
        left = last + timeout - time.monotonic()
        if left <= 0:
            raise NoAnswer(f"no answer within {timeout:g} s")
        futures.wait([result], left)
    return result.result()


def _transferred(piece: Callable[[], None]) -> Any:
    """An fsspec callback for a client's `get_file`/`put_file` that calls `piece()` as the
    transfer starts (its size is set) and as each piece of it goes through (what a wait
    bounded without progress watches: a shard's copy, `copies`; an upload, `within`);
    `piece` may raise to stop the transfer (the client stops at its next piece). fsspec
    comes with TFDS; imported here, on use."""
    from fsspec.callbacks import Callback

    return Callback(hooks={"piece": lambda size, value: piece()})


@dataclasses.dataclass(frozen=True)
class ObjectStore:
    """An object store the readers read builds from, over its fsspec client: one row of
    `STORES`, what differs between stores held as data, the rest written once below.

    A row says what a store's urls' scheme is (`scheme`, also fsspec's protocol for its
    client), which package gives the client and which of our extras installs it
    (`package`, `extra`), what identifies an object's content (`content`, see
    `fingerprint`), how a user checks that an object can be read (`check`), whether
    TensorFlow reads it too (`tensorflow_reads`), and what its client is told when one
    object is copied whole (`get_options`) or uploaded whole (`put_options`). Publishing a
    build (`fast_tfds.building.publishing`) also needs the checksum the store computes of
    an object's bytes (`checksum`), and the same checksum of a local file (`digest`:
    `local_checksum`). `client_options`: what the client is made with, where its defaults
    do not serve (`client`).
    """

    scheme: str  # 'gs': urls are gs://bucket/path
    package: str  # the module of the fsspec client: 'gcsfs'
    extra: str  # this package's extra that installs the client: 'gcs'
    # The fields of a detailed listing's entry that identify an object's content, after
    # its size: the first one required (quotes stripped: an ETag comes quoted), the
    # others as the store gives them.
    content: tuple[str, ...]
    # A command that shows whether an object can be read from here (errors quote it), of
    # the object's {url}, or of its {bucket} (container) and {path} in it.
    check: str
    # The checksum the store computed of object `key`'s bytes, of (key, its entry in a
    # detailed listing): from the entry, or asked of the store where the listing lacks
    # it; None where the store keeps none (a publisher then reads the object back). And
    # the digest of a local file that gives the same checksum once it is uploaded.
    checksum: Callable[[str, dict[str, Any]], str | None]
    digest: Callable[[], Any] | None
    # Whether TensorFlow's own file systems read it (gs:// only: TensorFlow's S3 support
    # went to tensorflow-io, which does not load on TensorFlow 2.18+, and it never had
    # Azure's): where it does not, the client is needed for every read, and what only
    # TensorFlow reads (the tf.data service's workers, a file cache) cannot be there.
    tensorflow_reads: bool = False
    # What the store is called in a message that its listing gave too little.
    noun: str = "store"
    get_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    put_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    client_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def install(self) -> str:
        """What a message tells a user to run to get the client."""
        return f"pip install 'fast-image-tfds[{self.extra}]'"

    def fingerprint(self, url: str, entry: dict[str, Any]) -> list:
        """[url, size, ...what identifies the content] of the object `url`, from its
        entry in a detailed listing: what a persistent cache's key holds of it, which
        changes whenever the object is rewritten. `NotKeyed` where the store gave too
        little."""
        first, *more = self.content
        identity, size = entry.get(first), entry.get("size")
        if identity in (None, "") or size is None:
            raise NotKeyed(f"the {self.noun} gave no {first} or size for {url}")
        return [url, int(size), str(identity).strip('"'), *(entry.get(f) for f in more)]

    def check_command(self, url: str) -> str:
        """A command that shows whether `url` can be read from here (errors quote it)."""
        bucket, _, path = self.key(url).partition("/")
        return self.check.format(url=url, bucket=bucket, path=path)

    def get_file(self, key: str, local: str, piece: Callable[[], None]) -> None:
        """Object `key` (its url without the scheme) copied whole to the local file
        `local`, in one streamed request; `piece()` is called as each piece arrives
        (`_transferred`)."""
        self.client().get_file(key, local, callback=_transferred(piece), **self.get_options)

    def put_file(self, local: str, key: str, piece: Callable[[], None]) -> None:
        """The local file `local` uploaded whole as object `key`, replacing any: a reader
        sees the old object or the new one, never part of one; `piece()` is called as each
        piece goes (`_transferred`). Where the store computes a checksum only when asked
        at upload, this asks for the one `checksum` reads."""
        self.client().put_file(local, key, callback=_transferred(piece), **self.put_options)

    def local_checksum(self, local: str) -> str | None:
        """What `checksum` would give of the local file `local` once uploaded (None where
        it gives None): equal checksums and sizes mean the object holds the file."""
        if self.digest is None:
            return None
        # Read in pieces: google_crc32c's `update` takes bytes, not the memoryview that
        # `hashlib.file_digest` gives it.
        digest = self.digest()
        with open(local, "rb") as f:
            while piece := f.read(1 << 22):
                digest.update(piece)
        return base64.b64encode(digest.digest()).decode("ascii")

    def client(self) -> Any:
        """The fsspec client (fsspec's shared instance in this process, made with
        `client_options`); ImportError where its package is not installed."""
        import fsspec

        return fsspec.filesystem(self.scheme, **self.client_options)

    def installed(self) -> bool:
        """Whether the client's package can be imported, without importing it."""
        try:
            return importlib.util.find_spec(self.package) is not None
        except (ImportError, ValueError):
            return False

    def key(self, url: str) -> str:
        return url.removeprefix(f"{self.scheme}://")

    def url(self, key: str) -> str:
        return f"{self.scheme}://{key}"

    def listing(self, folder: str) -> dict[str, dict[str, Any]]:
        """{name: entry} of the files (objects) in `folder` (a url), from the client's
        detailed listing, asked of the store anew: a listing must see a rewrite made since
        the process last looked, and the client keeps none of it for later calls (TFDS's,
        through the same client, included). FileNotFoundError where there is no folder."""
        client, key = self.client(), self.key(folder.rstrip("/"))
        try:
            listed = client.ls(key, detail=True, refresh=True)
        finally:
            client.invalidate_cache(key)
        return {e["name"].rsplit("/", 1)[-1]: e for e in listed if e.get("type") == "file"}

    def gave_nothing(self, url: str, timeout: float) -> BucketReadError:
        return BucketReadError(
            f"{url}: the bucket gave no records within {timeout:g} s (it is unreachable or "
            f"too slow); check that it can be read from here (`{self.check_command(url)}`), "
            f"or allow a slow bucket more time with {TIMEOUT_ENV}=SECONDS"
        )

    def read_failed(self, url: str, said: str) -> BucketReadError:
        return BucketReadError(
            f"{url}: reading it from the bucket failed ({said}); check that the object "
            f"exists and can be read from here (`{self.check_command(url)}`); a build "
            "copied in part needs copying again, whole"
        )

    def no_room(self, url: str, folder: str) -> BucketReadError:
        return BucketReadError(
            f"{url}: no room for its local copy in {folder} (the disk is full); the copies "
            "of a split's shards take the shards' size there: free that much, or set TMPDIR "
            "to a folder on a larger disk"
        )


def _crc32c() -> Any:
    # google-crc32c comes with gcsfs (through google-cloud-storage), in C.
    import google_crc32c

    return google_crc32c.Checksum()


def _listed_crc32c(key: str, entry: dict[str, Any]) -> str | None:
    # GCS computes the CRC32C of every object it stores, and lists it (base64).
    return entry.get("crc32c")


def _asked_sha256(key: str, entry: dict[str, Any]) -> str | None:
    # S3 keeps a SHA-256 of an object only when asked for one at its upload, and a listing
    # does not carry it: one HEAD that asks for it. An object uploaded in parts has a
    # checksum of its parts' checksums ("...-N"), not the file's.
    bucket, _, path = key.partition("/")
    head = S3.client().call_s3("head_object", Bucket=bucket, Key=path, ChecksumMode="ENABLED")
    value = head.get("ChecksumSHA256")
    return value if value and "-" not in value else None


def _listed_md5(key: str, entry: dict[str, Any]) -> str | None:
    # Azure computes the Content-MD5 of a blob put in one request (up to the SDK's
    # single-put size); a blob put in blocks has none.
    md5 = (entry.get("content_settings") or {}).get("content_md5")
    return base64.b64encode(bytes(md5)).decode("ascii") if md5 else None


# Google Cloud Storage through gcsfs. An object's generation changes whenever it is
# rewritten (and its new bytes get a new CRC32C), so a key made of them changes whenever a
# shard does, as a local file's size and modification time do. A copy is one streamed GET
# with no metadata request (`concurrency=1`); a file under gcsfs's chunk size (50 MiB) is
# uploaded in one request, a larger one as a resumable upload that GCS makes an object of
# only once all of it is there.
GCS = ObjectStore(
    scheme="gs",
    package="gcsfs",
    extra="gcs",
    content=("generation", "crc32c"),
    check="gcloud storage ls -l {url}",
    checksum=_listed_crc32c,
    digest=_crc32c,
    tensorflow_reads=True,
    noun="bucket",
    get_options={"concurrency": 1},
)
# Amazon S3 (or an S3-compatible store: MinIO, R2, Ceph; AWS_ENDPOINT_URL names it) through
# s3fs. An object's ETag is its content's MD5 (or, uploaded in parts, the parts') and
# changes whenever it is rewritten with other bytes; with the size it keys the object's
# content (a rewrite with the same bytes is the same content). botocore's client holds 10
# connections unless told (`CONNECTIONS`); gcsfs's and adlfs's aiohttp sessions, 100.
S3 = ObjectStore(
    scheme="s3",
    package="s3fs",
    extra="s3",
    content=("ETag",),
    check="aws s3 ls {url}",
    checksum=_asked_sha256,
    digest=hashlib.sha256,
    put_options={"ChecksumAlgorithm": "SHA256"},
    client_options={"config_kwargs": {"max_pool_connections": CONNECTIONS}},
)
# Azure Blob Storage through adlfs (az://CONTAINER/PATH; the account comes with the
# credentials: AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_CONNECTION_STRING, ...). A blob's
# ETag changes with every write of it.
AZURE = ObjectStore(
    scheme="az",
    package="adlfs",
    extra="azure",
    content=("etag",),
    check="az storage blob list --container-name {bucket} --prefix {path}",
    checksum=_listed_md5,
    digest=hashlib.md5,
    put_options={"overwrite": True},
)
STORES: dict[str, ObjectStore] = {store.scheme: store for store in (GCS, S3, AZURE)}
SCHEMES = ", ".join(f"{scheme}://" for scheme in STORES)  # what messages say is read


def is_remote(path: str) -> bool:
    return "://" in path


def store_of(url: str) -> ObjectStore | None:
    """The store that holds `url`; None for a local path or a scheme no store here reads."""
    scheme, found, _ = url.partition("://")
    return STORES.get(scheme) if found else None


def fingerprints(folder: str, keep: Callable[[str], bool]) -> list[list]:
    """The fingerprints (`ObjectStore.fingerprint`) of the objects in `folder` whose name
    `keep(name)` accepts, sorted by url, from one listing, never the objects' bytes;
    `NotKeyed` where that cannot be had (no client, another scheme, an error, no answer
    within the read timeout): the caller then caches in memory, as for any key it
    cannot make."""
    store = store_of(folder)
    if store is None:
        scheme = folder.split("://", 1)[0]
        raise NotKeyed(f"{scheme}:// objects have no metadata a key can use, only {SCHEMES} ones")
    if not store.installed():
        raise NotKeyed(f"reading the objects' metadata needs {store.package} ({store.install})")
    folder = folder.rstrip("/")
    timeout = timeout_s()
    try:
        listed = within(lambda: store.listing(folder), timeout, "fast_tfds-bucket-listing")
    except NoAnswer:
        raise NotKeyed(f"listing {folder} gave no answer within {timeout:g} s") from None
    except Exception as error:  # noqa: BLE001  (one line for the log)
        raise NotKeyed(f"listing {folder} failed ({said_of(error)})") from None
    return sorted(
        store.fingerprint(store.url(entry["name"]), entry)
        for name, entry in listed.items()
        if keep(name)
    )
