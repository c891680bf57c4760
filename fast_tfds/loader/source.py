"""Where the loader's records come from: a split's ArrayRecord files, via TFDS.

TFDS's own `as_data_source` picks the ArrayRecord files (also when they sit next to
TFRecords after `tfds convert_format`) and resolves slices such as 'train[:80%]'.
The loader asks it for the raw serialized examples and decodes them itself.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import tensorflow_datasets as tfds
from tensorflow_datasets.core import file_adapters

ARRAY_RECORD = file_adapters.FileFormat.ARRAY_RECORD


class NoArrayRecordFiles(ValueError):
    """The dataset is built, but only as TFRecords; the message gives the command to convert."""


class DatasetNotBuilt(ValueError):
    """The dataset is not in the data dir and building it was not asked for."""


@dataclasses.dataclass(frozen=True)
class SplitSource:
    """A split's records (a picklable random-access source of bytes) and what they hold."""

    records: Any  # len() and [i] -> serialized tf.train.Example bytes
    dataset: str  # e.g. 'cats_vs_dogs_fast/224/1.0.0'
    split: str
    stored_size: tuple[int, int] | None  # None: each image keeps its own size
    has_boxes: bool
    label_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.records)


def builder_for(
    name: str,
    *,
    data_dir: str | os.PathLike | None = None,
    config: str | None = None,
    builder_dir: str | os.PathLike | None = None,
    download_and_prepare: bool = True,
    download_config: tfds.download.DownloadConfig | None = None,
) -> tfds.core.DatasetBuilder:
    """The dataset's builder, built in ArrayRecord first if it is missing and that is allowed."""
    if builder_dir is not None:
        return tfds.builder_from_directory(os.fspath(builder_dir))
    full_name = f"{name}/{config}" if config else name
    builder = tfds.builder(full_name, data_dir=data_dir)
    if builder.is_prepared():
        return builder
    if not download_and_prepare:
        raise DatasetNotBuilt(
            f"{full_name} is not built in {builder.data_dir}: build it with `tfds build "
            f"{name} --file_format array_record`, or pass download_and_prepare=True"
        )
    builder.download_and_prepare(download_config=download_config, file_format=ARRAY_RECORD)
    return builder


def split_source(builder: tfds.core.DatasetBuilder, split: str) -> SplitSource:
    """The split (or slice) of a built dataset as raw records, from its ArrayRecord files."""
    info = builder.info
    if ARRAY_RECORD not in info.available_file_formats():
        raise NoArrayRecordFiles(
            f"{info.full_name} in {builder.data_dir} has only {info.file_format.value} "
            "files; the loader reads ArrayRecord. Add ArrayRecord files next to them with "
            f"`tfds convert_format --dataset_version_dir {builder.data_dir} "
            "--out_file_format array_record`, or build with `--file_format array_record`"
        )
    known = list(info.splits)
    base = split.split("[", 1)[0]
    if base not in known:
        raise ValueError(f"unknown split {split!r} of {info.full_name}; it has {known}")
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
    shape = features["image"].shape
    stored_size = None if None in shape[:2] else (shape[0], shape[1])
    return SplitSource(
        records=records,
        dataset=info.full_name,
        split=split,
        stored_size=stored_size,
        has_boxes="objects" in features and "bbox" in features["objects"].feature,
        label_names=tuple(features["label"].names),
    )
