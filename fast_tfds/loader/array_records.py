"""Where the loader's records come from: a split's ArrayRecord files, via TFDS.

TFDS's own `as_data_source` picks the ArrayRecord files (also when they sit next to
TFRecords after `tfds convert_format`) and resolves slices such as 'train[:80%]'.
The loader asks it for the raw serialized examples and decodes them itself.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

import tensorflow_datasets as tfds
from tensorflow_datasets.core import file_adapters

from fast_tfds.core import sizes, splits
from fast_tfds.core.builder_lookup import DatasetNotBuilt

ARRAY_RECORD = file_adapters.FileFormat.ARRAY_RECORD


class NoArrayRecordFiles(ValueError):
    """The dataset is built, but only as TFRecords; the message gives the command to convert."""


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
    selected = splits.split_info(info, split)
    raw = builder.as_data_source(
        split=split,
        file_format=ARRAY_RECORD,
        deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES,
    )
    # The array_record source underneath: what is pickled to worker processes is
    # then file names and record ranges, not the builder's DatasetInfo, whose
    # unpickling imports the dataset's builder module in every worker.
    records = raw.data_source
    features = info.features
    return SplitSource(
        records=records,
        dataset=info.full_name,
        split=split,
        stored_size=sizes.stored_size(features["image"].shape),
        label_names=tuple(features["label"].names),
        shard_files=tuple(str(fi.filename) for fi in selected.file_instructions),
    )


__all__ = ["ARRAY_RECORD", "DatasetNotBuilt", "NoArrayRecordFiles", "SplitSource", "split_source"]
