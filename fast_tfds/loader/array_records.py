"""Where the loader's records come from: a split's ArrayRecord files, via TFDS.

TFDS's own `as_data_source` picks the ArrayRecord files (also when they sit next to
TFRecords after `tfds convert_format`) and resolves slices such as 'train[:80%]'.
The loader asks it for the raw serialized examples and decodes them itself. Shards in a
bucket are read from whole local copies (`fast_tfds.cache.remote`), or record by record
through array_record's own GCS client where gcsfs is not installed (`BucketRecords`).
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import os
import shlex
from typing import Any

import tensorflow_datasets as tfds
from tensorflow_datasets.core import file_adapters

from fast_tfds.cache.remote.copies import ShardCopies, reader_copies
from fast_tfds.cache.remote.object_stores import ObjectStore, store_of, timeout_s, within
from fast_tfds.core import sizes, splits

ARRAY_RECORD = file_adapters.FileFormat.ARRAY_RECORD
# array_record's data source opens its readers so, for random access (no readahead).
READER_OPTIONS = "readahead_buffer_size:0"


def open_reader(local: str):
    """An ArrayRecord reader of a shard's local copy (made in the copying thread)."""
    from array_record.python import array_record_module

    return array_record_module.ArrayRecordReader(
        local, options=READER_OPTIONS, file_reader_buffer_size=32768
    )


class NoArrayRecordFiles(ValueError):
    """The dataset is built, but only as TFRecords; the message gives the command to convert."""


@dataclasses.dataclass(frozen=True)
class BucketRecords:
    """The records of shards in an object store, read record by record through
    array_record's GCS client within a bounded time: read instead of `ShardCopies` where
    gcsfs is not installed.

    Each read is waited for at most `timeout_s` (`object_stores.within`): a read that
    array_record's client keeps retrying becomes a `BucketReadError` that names the
    object, and so does a read it gives up on (array_record's own message is a
    multi-part 'Permanent error, ...').
    """

    records: Any  # array_record's source of the split
    store: ObjectStore
    files: tuple[str, ...]
    ends: tuple[int, ...]  # the split's record count after each file
    timeout_s: float

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, key):
        return self._read(self.records.__getitem__, key, int(key))

    def __getitems__(self, keys):
        keys = list(keys)
        return self._read(self.records.__getitems__, keys, int(keys[0]) if keys else 0)

    def __repr__(self) -> str:
        return f"BucketRecords({self.records!r}, timeout_s={self.timeout_s})"

    def file_of(self, key: int) -> str:
        return self.files[min(bisect.bisect_right(self.ends, key), len(self.files) - 1)]

    def _read(self, read, keys, first: int):
        try:
            return within(lambda: read(keys), self.timeout_s, "fast_tfds-bucket-read")
        except TimeoutError:
            raise self.store.gave_nothing(self.file_of(first), self.timeout_s) from None
        except RuntimeError as error:
            said = " ".join(str(error).split())
            # A batch of keys can span files: array_record's message names the one.
            named = [f for f in self.files if f in said]
            raise self.store.read_failed(named[0] if named else self.file_of(first), said) from None


def check_emulator_settings(filename: str) -> None:
    """gcsfs and TensorFlow's tools take `STORAGE_EMULATOR_HOST`; array_record's GCS
    client takes only `CLOUD_STORAGE_EMULATOR_ENDPOINT`, and without it would go to
    Google's servers and retry there for minutes: one line instead."""
    host = os.environ.get("STORAGE_EMULATOR_HOST")
    if host and not os.environ.get("CLOUD_STORAGE_EMULATOR_ENDPOINT"):
        raise ValueError(
            f"STORAGE_EMULATOR_HOST={host!r} is set but CLOUD_STORAGE_EMULATOR_ENDPOINT is "
            f"not: array_record would read {filename} from Google's servers, not from the "
            f"emulator; set CLOUD_STORAGE_EMULATOR_ENDPOINT={host} too"
        )


@dataclasses.dataclass(frozen=True)
class SplitSource:
    """A split's records (a picklable random-access source of bytes) and what they hold."""

    records: Any  # len() and [i] -> serialized tf.train.Example bytes
    dataset: str  # e.g. 'cats_vs_dogs_fast/224/1.0.0'
    split: str
    stored_size: tuple[int, int] | None  # None: each image keeps its own size
    label_names: tuple[str, ...]
    # The split's shard files (TFDS's file instructions): what a persistent cache's key
    # fingerprints, with the other formats' files beside them.
    shard_files: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.records)


def split_source(builder: tfds.core.DatasetBuilder, split: str) -> SplitSource:
    """The split (or slice) of a built dataset as raw records, from its ArrayRecord files."""
    info = builder.info
    if ARRAY_RECORD not in info.available_file_formats():
        convert = shlex.join(
            [
                *("tfds", "convert_format", "--dataset_version_dir", str(builder.data_dir)),
                *("--out_file_format", "array_record"),
            ]
        )
        raise NoArrayRecordFiles(
            f"{info.full_name} in {builder.data_dir} has only {info.file_format.value} "
            f"files; the loader reads ArrayRecord. Add ArrayRecord files next to them with "
            f"`{convert}`, or build with `--file_format array_record`"
        )
    splits.split_info(info, split)  # a one-line error for a split that is not there
    raw = builder.as_data_source(
        split=split,
        file_format=ARRAY_RECORD,
        deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES,
    )
    # Asked after `as_data_source`, which sets the info's file format to ArrayRecord: in a
    # build with both formats, the file names are then the ArrayRecord files' (before, the
    # TFRecord files', which a bucket's copies would open as ArrayRecord).
    selected = splits.split_info(info, split)
    # The array_record source underneath: what is pickled to worker processes is
    # then file names and record ranges, not the builder's DatasetInfo, whose
    # unpickling imports the dataset's builder module in every worker.
    records = raw.data_source
    files = tuple(str(fi.filename) for fi in selected.file_instructions)
    store = store_of(files[0]) if files else None
    if store is not None:
        check_emulator_settings(files[0])
        counts = tuple(int(fi.take) for fi in selected.file_instructions)
        skips = tuple(int(fi.skip) for fi in selected.file_instructions)
        without = "are read one record per request"
        copies = reader_copies(files, opener=open_reader, without=without)
        if copies is not None:
            records = ShardCopies(copies, skips, counts)
        else:
            ends = tuple(itertools.accumulate(counts))
            records = BucketRecords(records, store, files, ends, timeout_s())
    features = info.features
    return SplitSource(
        records=records,
        dataset=info.full_name,
        split=split,
        stored_size=sizes.stored_size(features["image"].shape),
        label_names=tuple(features["label"].names),
        shard_files=files,
    )
