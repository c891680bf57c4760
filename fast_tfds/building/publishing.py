"""Publishing a built version folder to an object store (`fast-tfds publish`).

A reader finds a build in a data dir by its `dataset_info.json`: TFDS counts a version
folder as built once it holds that file and features.json (`is_prepared`, through
`file_utils.is_valid_variant_dir`), and `tfds.builder_from_directory` reads it first. So a
build whose other files are all there before that one is never seen half-published: the data files
go first (several at a time), then the other metadata, and `dataset_info.json` last. A
reader that comes earlier is told the build is not there yet, never given part of it.
Each object is checked once uploaded: its size, and the checksum the store computed of
it (`ObjectStore.checksum`) against the same checksum of the local file, or its bytes
read back where the store keeps none.

The same checks make a publish that was cut short, or run again, cheap: an object that
is already there with the local file's size and checksum is not uploaded again. An
object that differs, or one the local build lacks, means another build is at the URL:
refused, unless `overwrite`, which first removes the other build's `dataset_info.json`
(readers then see no build, not a mix of two) and its objects that this build lacks.

Everything per store is in `ObjectStore` (`cache/remote/object_stores.py`); this module
only orders and checks the uploads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from fast_tfds.building.errors import BuildError
from fast_tfds.building.parallel import ordered_thread_map
from fast_tfds.cache.remote.copies import INFO, SHARD
from fast_tfds.cache.remote.object_stores import (
    SCHEMES,
    TIMEOUT_ENV,
    NoAnswer,
    ObjectStore,
    is_remote,
    said_of,
    store_of,
    timeout_s,
    within,
)
from fast_tfds.core.builder_lookup import store_name

# Uploads in flight at once (and local files checksummed at once): each is mostly
# waiting on the network or the disk, and a store takes many writes in parallel.
PARALLEL_UPLOADS = 8


class PublishError(BuildError):
    """A publish cannot go on; the message (one line) says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Published:
    """What `publish` did: the version folder's url, and the names of the objects it
    uploaded, found already there, and removed (another build's, with `overwrite`)."""

    url: str
    uploaded: list[str]
    kept: list[str]
    removed: list[str]


def publish(
    folder: str | os.PathLike,
    url: str,
    *,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Published:
    """Uploads the built version folder `folder` (e.g. ~/tensorflow_datasets/
    cats_vs_dogs_fast/224/1.0.0) into the data dir `url` (gs://bucket/prefix), under the
    same NAME/CONFIG/VERSION folders, so that readers pass `data_dir=url`; a `url` that
    already ends with them is the version folder itself. A `PublishError` (one line) for
    a folder that is not a built version folder, a url no store here takes, a missing
    client, another build at the url (unless `overwrite`) and a write the store refuses.
    `progress(size, total)` is called as each file is uploaded: its size, and the bytes
    of all the files to upload (the command line's progress bar).
    """
    folder = os.fspath(folder)
    info = _built_info(folder)
    # The names of the files of the version folder (TFDS's version folders are flat).
    names = sorted(e.name for e in os.scandir(folder) if e.is_file())
    target = destination(url, info)
    store = _store(target)
    # Each file's (size, the store's checksum of it), the checksums a few at a time.
    paths = [os.path.join(folder, n) for n in names]
    sums = ordered_thread_map(store.local_checksum, paths, workers=PARALLEL_UPLOADS)
    local = {n: (os.path.getsize(p), c) for n, p, c in zip(names, paths, sums, strict=True)}

    def listed() -> dict[str, dict[str, Any]]:
        with contextlib.suppress(FileNotFoundError):
            return store.listing(target)
        return {}  # nothing published there yet

    there = _asked(store, listed, f"listing {target}", target)
    same = sorted(
        n
        for n, entry in there.items()
        if n in local and _holds(store, entry, os.path.join(folder, n), local[n])
    )
    other = sorted(set(there) - set(same))
    if other and not overwrite:
        raise PublishError(
            f"{target}: holds another build ({len(other)} objects differ from {folder}, "
            f"e.g. {other[0]}); publish it elsewhere, or pass --overwrite to replace it"
        )
    # The dataset_info.json there first (even one equal to this build's): readers see no
    # build while the objects change, then this one whole.
    retired = [INFO] if other and INFO in there else []
    removed = [n for n in other if n not in local]
    for name in retired + removed:
        _delete(store, f"{target}/{name}")
    same = [n for n in same if n not in retired]
    todo = [n for n in names if n not in same]
    data = [n for n in todo if SHARD.fullmatch(n)]
    metadata = [n for n in todo if not SHARD.fullmatch(n) and n != INFO]
    total = sum(local[n][0] for n in todo)
    for group in (data, metadata, [n for n in todo if n == INFO]):
        for size in ordered_thread_map(
            lambda n: _upload(store, folder, n, target, local), group, workers=PARALLEL_UPLOADS
        ):
            if progress is not None:
                progress(size, total)
    return Published(target, todo, same, removed)


def destination(url: str, info: dict[str, Any]) -> str:
    """The version folder in `url` (a data dir, or that folder itself) of the build
    whose dataset_info.json is `info`: url/NAME[/CONFIG]/VERSION."""
    parts = [info.get("name"), info.get("configName"), info.get("version")]
    tail = "/".join(str(p) for p in parts if p)
    url = url.rstrip("/")
    return url if url.endswith(f"/{tail}") else f"{url}/{tail}"


def _built_info(folder: str) -> dict[str, Any]:
    """The dataset_info.json of the built version folder `folder`, or a one-line error
    that says what the folder is instead and what to pass."""
    example = "e.g. ~/tensorflow_datasets/cats_vs_dogs_fast/224/1.0.0"
    if not os.path.isdir(folder):
        raise PublishError(f"{folder}: no such folder; pass a built version folder, {example}")
    path = os.path.join(folder, INFO)
    if not os.path.isfile(path):
        below = sorted(os.path.relpath(d, folder) for d, _, f in os.walk(folder) if INFO in f)
        if below:
            raise PublishError(
                f"{folder}: not a version folder (no {INFO}); pass the one to publish, "
                f"e.g. {os.path.join(folder, below[0])}"
            )
        raise PublishError(
            f"{folder}: not a built version folder (no {INFO}: not built, or its build "
            f"did not finish); build it with `tfds build`, then pass its folder, {example}"
        )
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError) as error:
        raise PublishError(f"{path}: unreadable ({said_of(error)}); build it again") from None
    if not isinstance(info, dict) or not info.get("name") or not info.get("version"):
        raise PublishError(f"{path}: names no dataset or version; build it again")
    return info


def _store(url: str) -> ObjectStore:
    other = store_name(url)
    if other is not None:  # s3a://, abfs://, ...: the name the readers read it by
        raise PublishError(f"{url}: {other[1]}; publish to {other[0]}")
    store = store_of(url)
    if store is None and is_remote(url):
        scheme = url.split("://", 1)[0]
        raise PublishError(f"{url}: no store here publishes to {scheme}://, only to {SCHEMES}")
    if store is None:
        raise PublishError(
            f"{url}: publishing writes to an object store ({SCHEMES}); to copy a build to a "
            "local or mounted folder, copy its version folder with its NAME/CONFIG/VERSION"
        )
    if not store.installed():
        raise PublishError(
            f"{url}: publishing to {store.scheme}:// needs {store.package}; run `{store.install}`"
        )
    return store


def _holds(
    store: ObjectStore, entry: dict[str, Any], path: str, local: tuple[int, str | None]
) -> bool:
    """Whether the object of listing entry `entry` holds the local file `path`, whose
    size and checksum are `local`: its size and the store's checksum (asked within the
    read timeout), or (where the store keeps none) its bytes read back."""
    size, checksum = local
    if int(entry.get("size") or -1) != size:
        return False
    url = store.url(entry["name"])
    remote = (
        None
        if checksum is None
        else _asked(store, lambda: store.checksum(entry["name"], entry), f"checking {url}", url)
    )
    if remote is None:
        return _read_back(store, entry["name"], path)
    return remote == checksum


def _upload(
    store: ObjectStore,
    folder: str,
    name: str,
    target: str,
    local: dict[str, tuple[int, str | None]],
) -> int:
    """Uploads the local file `name` into `target` and checks what the store then holds;
    its size. The upload is bounded as a read is: the read timeout without progress (a
    piece of it that the store took), then one line naming the object."""
    url, path = f"{target}/{name}", os.path.join(folder, name)
    key = store.key(url)
    last = [time.monotonic()]

    def piece() -> None:
        last[0] = time.monotonic()

    def put() -> None:
        store.put_file(path, key, piece)

    _asked(store, put, f"uploading {url}", url, refused="the write", progress=lambda: last[0])

    def info():
        client = store.client()
        client.invalidate_cache(key)
        return client.info(key)

    entry = _asked(store, info, f"checking {url}", url)
    if not _holds(store, entry, path, local[name]):
        raise PublishError(
            f"{url}: once uploaded, the store holds {entry.get('size')} bytes (checksum "
            f"{store.checksum(key, entry)}), not those of {path} ({local[name][0]} bytes, "
            f"checksum {local[name][1]}); publish again"
        )
    return local[name][0]


def _read_back(store: ObjectStore, key: str, path: str) -> bool:
    """Whether object `key` holds the bytes of local file `path` (for a store that keeps
    no checksum): both hashed as they stream."""
    with store.client().open(key, "rb") as remote, open(path, "rb") as f:
        digests = [hashlib.file_digest(opened, "sha256").digest() for opened in (remote, f)]
    return digests[0] == digests[1]


def _delete(store: ObjectStore, url: str) -> None:
    def remove() -> None:
        with contextlib.suppress(FileNotFoundError):
            store.client().rm_file(store.key(url))

    _asked(store, remove, f"removing {url}", url, refused="to remove it")


def _asked(
    store: ObjectStore,
    call: Callable[[], Any],
    what: str,
    url: str,
    *,
    refused: str | None = None,
    progress: Callable[[], float] | None = None,
) -> Any:
    """`call()` within the read timeout (without progress, where `progress` says when it
    last made some), a failure as one line: what the store said, and where it `refused`
    a write (the write, to remove it), that these credentials may not write there."""
    timeout = timeout_s()
    try:
        return within(call, timeout, "fast_tfds-publish", progress=progress)
    except NoAnswer:
        raise PublishError(
            f"{what}: no answer within {timeout:g} s (the store is unreachable or too slow); "
            f"check that it can be reached from here (`{store.check_command(url)}`), or allow "
            f"a slow store more time with {TIMEOUT_ENV}=SECONDS"
        ) from None
    except Exception as error:  # noqa: BLE001  (one line: what the store said)
        if refused is not None:
            raise PublishError(
                f"{url}: the store refused {refused} ({said_of(error)}); check that these "
                "credentials may write there"
            ) from None
        raise PublishError(
            f"{what} failed ({said_of(error)}); check that it can be read from here "
            f"(`{store.check_command(url)}`)"
        ) from None
