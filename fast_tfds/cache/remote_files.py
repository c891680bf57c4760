"""What a persistent cache's key holds of shard files in a bucket (`gs://`): each object's
size, generation and CRC32C, from its metadata, never its bytes.

GCS gives a rewritten object a new generation (and its new bytes a new CRC32C), so a key
made of these changes whenever a shard does, as a local file's size and modification
time do; a run whose key matches serves from the local decoded file without reading
the bucket's shard bytes at all.

The metadata comes from one listing of the shards' folder through gcsfs (the `[gcs]`
extra), which TensorFlow's and array_record's clients cannot give without TensorFlow
here. It is found through fsspec's registry of protocols (fsspec comes with TFDS), so a
process without gcsfs gets a reason to log, not an ImportError. A listing that fails or
does not answer within a bounded time (`timeout_s`) is a reason too: the caller then
caches in memory, as for any key it cannot make.
"""

from __future__ import annotations

import importlib.util
import os
import threading

SCHEME = "gs://"
# The setting the loader's bucket reads take; a listing waits as long, at most.
TIMEOUT_ENV = "FAST_TFDS_BUCKET_READ_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 60.0
INSTALL = "pip install gcsfs"


class NotKeyed(Exception):
    """Why the objects' metadata could not be had (one line, for the log)."""


def is_remote(path: str) -> bool:
    return "://" in path


def timeout_s() -> float:
    """How long a listing may take: FAST_TFDS_BUCKET_READ_TIMEOUT_S, else 60 s."""
    try:
        seconds = float(os.environ.get(TIMEOUT_ENV, "") or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return seconds if seconds > 0 else DEFAULT_TIMEOUT_S


def fingerprints(folder: str, keep) -> list[list]:
    """[[url, size, generation, crc32c]] of the objects in `folder` (gs://bucket/path)
    whose name `keep(name)` accepts, sorted by url, from one listing; `NotKeyed` where
    that cannot be had (no gcsfs, another scheme, an error, no answer in time)."""
    if not folder.startswith(SCHEME):
        scheme = folder.split("://", 1)[0]
        raise NotKeyed(f"{scheme}:// objects have no metadata a key can use, only gs:// ones")
    listed = _list_within(folder.rstrip("/"), timeout_s())
    found = []
    for entry in listed:
        if entry.get("type") != "file":
            continue
        url = SCHEME + entry["name"]
        if not keep(url.rsplit("/", 1)[-1]):
            continue
        generation, size = entry.get("generation"), entry.get("size")
        if generation in (None, "") or size is None:
            raise NotKeyed(f"the bucket gave no generation or size for {url}")
        found.append([url, int(size), str(generation), entry.get("crc32c")])
    return sorted(found)


def _list_within(folder: str, timeout: float) -> list[dict]:
    """gcsfs's detailed listing of `folder`, in a daemon thread waited for at most
    `timeout` seconds: making the client (finding credentials) and its retries can
    each take long where the bucket does not answer."""
    outcome: dict = {}

    def run():
        try:
            outcome["listed"] = _list(folder)
        except BaseException as error:  # noqa: BLE001  (reported to the caller)
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True, name="fast_tfds-bucket-listing")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise NotKeyed(f"listing {folder} gave no answer within {timeout:g} s")
    error = outcome.get("error")
    if isinstance(error, ImportError):
        raise NotKeyed(f"reading the objects' metadata needs gcsfs ({INSTALL})")
    if error is not None:
        said = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        raise NotKeyed(f"listing {folder} failed ({said})")
    return outcome["listed"]


def filesystem():
    """gcsfs's client (fsspec's shared instance in this process); ImportError without gcsfs."""
    import fsspec

    return fsspec.filesystem("gs")


def has_gcsfs() -> bool:
    """Whether gcsfs can be imported, without importing it (its import, aiohttp's
    included, is a few tenths of a second: a reader that opens a dataset asks this,
    and imports it with the first copy, in the copying thread)."""
    try:
        return importlib.util.find_spec("gcsfs") is not None
    except (ImportError, ValueError):
        return False


def _list(folder: str) -> list[dict]:
    import fsspec

    # A client of our own with no listings cache: a listing must see a rewrite made
    # since the process last looked.
    fs = fsspec.filesystem("gs", skip_instance_cache=True, use_listings_cache=False)
    return fs.ls(folder.removeprefix(SCHEME), detail=True)
