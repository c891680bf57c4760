"""The metadata of a build in an object store, copied to a local folder, from which TFDS
loads its builder (`core.builder_lookup.load_builder`).

TFDS reads a version folder through etils, which reads a bucket through TensorFlow's file
systems: gs:// only (TensorFlow's S3 support left for tensorflow-io, which does not load on
TensorFlow 2.18+; it never read Azure), and switching etils to fsspec (EPATH_USE_TF) is
process-wide. For the stores TensorFlow cannot read, the metadata (a few small files:
dataset_info.json, features.json, a label file) is copied through the store's fsspec
client into a temporary folder, the builder is loaded from that copy, and its splits then
name the shard objects in the store, which the readers copy whole (`copies`). TFDS keeps
reading gs:// builds itself.

A folder without dataset_info.json is not built, or not published yet: a publisher
uploads the metadata last, so a reader never opens a half-published build.
"""

from __future__ import annotations

import atexit
import os
import re
import tempfile

from fast_tfds.cache.remote.copies import remove_owned
from fast_tfds.cache.remote.object_stores import (
    NoAnswer,
    ObjectStore,
    said_of,
    store_of,
    timeout_s,
    within,
)

# The shard files of a version folder, as TFDS names them
# (`NAME-SPLIT.FORMAT-00003-of-00016`): every other file is metadata that TFDS may read to
# open the build (features.json, *.labels.txt, metadata.json, ...), copied here.
SHARD = re.compile(r".+-\d{5}-of-\d{5}")
INFO = "dataset_info.json"  # a build is published once this is there
PREFIX = "fast_tfds-metadata-"


class NotPublished(FileNotFoundError):
    """The folder in the store holds no build's metadata (one line)."""


def copy(folder: str) -> str | None:
    """A local folder holding the metadata files of version folder `folder` (a url), for
    `tfds.builder_from_directory`; removed when the process ends. None where `folder` is
    not in a store, or in one TensorFlow reads (gs://): TFDS reads it itself there, as it
    always has (through TensorFlow, or gcsfs with EPATH_USE_TF=false), and a slow listing
    is the persistent cache's to tell, not a failed opening. An ImportError naming the
    extra where the client is missing; `NotPublished` where the folder has no
    dataset_info.json; a one-line `BucketReadError` where the store does not answer."""
    store = store_of(folder)
    if store is None or store.tensorflow_reads:
        return None
    missing = store.needs_client(folder)
    if missing is not None:
        raise missing
    folder = folder.rstrip("/")
    timeout = timeout_s()
    try:
        return within(lambda: _copy(store, folder), timeout, "fast_tfds-metadata-copy")
    except NoAnswer:
        raise store.gave_nothing(f"{folder}/{INFO}", timeout) from None
    except (NotPublished, ImportError):
        raise
    except Exception as error:  # noqa: BLE001  (one line naming the folder)
        raise store.read_failed(f"{folder}/{INFO}", said_of(error)) from None


def _copy(store: ObjectStore, folder: str) -> str:
    try:
        listed = store.listing(folder)
    except FileNotFoundError:
        listed = {}
    metadata = {n: entry for n, entry in listed.items() if not SHARD.fullmatch(n)}
    if INFO not in metadata:
        raise NotPublished(f"{folder} has no {INFO}")
    local = tempfile.mkdtemp(prefix=PREFIX)
    atexit.register(remove_owned, local, os.getpid())  # the builder reads it while it lives
    client = store.client()
    for name, entry in metadata.items():
        client.get_file(entry["name"], os.path.join(local, name))
    return local
