"""What both dataset builders share.

- `ImageConfig`: the `224` (default) and `original` configs.
- Sources: a file of the archive's name in the manual dir wins over a download.
- Shards: at least `MIN_SHARDS_PER_SPLIT` per split, so that interleave and up
  to 16 input pipelines each get their own files.
- Skips: what a build leaves out is counted, logged and kept in the metadata.
- `as_fast_dataset()`: the shared fast reader, as a builder method.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.resources
from collections.abc import Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds
from absl import logging
from etils import epath
from tensorflow_datasets.core.utils import shard_utils

from fast_tfds import images, parallel

MIN_SHARDS_PER_SPLIT = 16
SIZE_224 = 224


class ImageConfig(tfds.core.BuilderConfig):
    """A config is the size images are stored at: square `image_size` or original."""

    def __init__(self, *, image_size: int | None, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size

    @property
    def stored_shape(self) -> tuple[int | None, int | None, int]:
        return (self.image_size, self.image_size, 3)


def image_configs(resize_note: str = "") -> list[ImageConfig]:
    return [
        ImageConfig(
            name="224",
            image_size=SIZE_224,
            description=(
                "Images resized to 224x224 at build time (Pillow bilinear with "
                "antialiasing, aspect ratio not kept, as the seeds' tf.image.resize "
                "does at read time), stored as RGB baseline JPEG quality 90." + resize_note
            ),
        ),
        ImageConfig(
            name="original",
            image_size=None,
            description=(
                "Images at their original resolution, re-encoded once as RGB "
                "baseline JPEG quality 90."
            ),
        ),
    ]


@dataclasses.dataclass(frozen=True)
class AtLeastShards(shard_utils.ShardConfig):
    """TFDS's size rule, but never fewer than `min_num_shards` (clamped to the examples).

    TFDS picks 4-8 shards for these datasets (it aims at 64 MiB-1 GiB per
    shard); parallel reading and input sharding want more files than that.
    """

    min_num_shards: int = MIN_SHARDS_PER_SPLIT

    def get_number_shards(
        self, total_size: int, num_examples: int, uses_precise_sharding: bool = True
    ) -> int:
        if self.num_shards:  # The user asked for an exact count.
            return self.num_shards
        by_size = self.calculate_number_shards(total_size, num_examples, uses_precise_sharding)
        return max(by_size, min(self.min_num_shards, num_examples))


@dataclasses.dataclass(eq=False)
class _AtLeastShardsDownloadConfig(tfds.download.DownloadConfig):
    min_num_shards: int = MIN_SHARDS_PER_SPLIT

    def get_shard_config(self) -> shard_utils.ShardConfig:
        return AtLeastShards(
            num_shards=self.num_shards,
            min_shard_size=self.min_shard_size,
            max_shard_size=self.max_shard_size,
            min_num_shards=self.min_num_shards,
        )


class SkipReport:
    """Counts the files a split leaves out, and why."""

    def __init__(self, dataset: str, split: str):
        self.dataset = dataset
        self.split = split
        self.kept = 0
        self.skipped: list[dict[str, str]] = []

    def skip(self, filename: str, reason: str) -> None:
        self.skipped.append({"file": filename, "reason": reason})

    def by_reason(self) -> dict[str, int]:
        return dict(collections.Counter(s["reason"] for s in self.skipped).most_common())

    def log_summary(self) -> None:
        if not self.skipped:
            logging.info(
                "%s/%s: kept %d images, skipped none.", self.dataset, self.split, self.kept
            )
            return
        reasons = "; ".join(f"{n} x {reason}" for reason, n in self.by_reason().items())
        logging.warning(
            "%s/%s: kept %d images, skipped %d files (%s). The list is in the "
            "dataset's metadata.json under 'skipped'.",
            self.dataset,
            self.split,
            self.kept,
            len(self.skipped),
            reasons,
        )

    def as_metadata(self) -> dict[str, Any]:
        return {"count": len(self.skipped), "by_reason": self.by_reason(), "files": self.skipped}


class FastImageBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Base of both builders. Subclasses set VERSION, BUILDER_CONFIGS and the TFDS methods."""

    MIN_SHARDS_PER_SPLIT = MIN_SHARDS_PER_SPLIT
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Optional. Without a manual dir the archives are downloaded from their
    official URLs and checked against the registered sha256. To build from a
    copy instead (a mirror, a sample, a machine without internet), put files of
    the same names in a folder and pass it with `tfds build --manual_dir DIR` or
    `tfds.download.DownloadConfig(manual_dir=DIR)`; their checksums are not
    checked.
    """

    @tfds.core.utils.classproperty
    @classmethod
    def _checksums_path(cls) -> epath.Path:
        # The registered checksums live in the repository's top-level checksums/
        # folder, installed as the fast_tfds.checksums package.
        return epath.Path(str(importlib.resources.files("fast_tfds.checksums"))) / f"{cls.name}.tsv"

    # -- sources ---------------------------------------------------------------

    def source_path(self, dl_manager: tfds.download.DownloadManager, url: str) -> epath.Path:
        """The manual dir's file of the URL's name if there is one, else the download."""
        filename = url.rsplit("/", 1)[-1]
        try:
            manual = dl_manager.manual_dir / filename
        except (AssertionError, ValueError):  # No manual dir, or an empty one.
            manual = None
        if manual is not None and manual.exists():
            logging.warning(
                "%s: using %s from the manual dir instead of downloading %s; its "
                "checksum is not checked against the registered one.",
                self.name,
                manual,
                url,
            )
            return manual
        return epath.Path(dl_manager.download(url))

    # -- shards ----------------------------------------------------------------

    def _generate_splits(self, dl_manager, download_config):
        fields = {
            f.name: getattr(download_config, f.name) for f in dataclasses.fields(download_config)
        }
        fields["min_num_shards"] = self.MIN_SHARDS_PER_SPLIT
        return super()._generate_splits(dl_manager, _AtLeastShardsDownloadConfig(**fields))

    # -- images ----------------------------------------------------------------

    @property
    def stored_size(self) -> tuple[int, int] | None:
        size = self.builder_config.image_size
        return None if size is None else (size, size)

    def image_feature(self) -> tfds.features.Image:
        return tfds.features.Image(shape=self.builder_config.stored_shape, encoding_format="jpeg")

    def normalize_all(
        self, members: Iterable[tuple[str, bytes, Any]], report: SkipReport
    ) -> Iterator[tuple[str, images.NormalizedImage, Any]]:
        """Normalizes (filename, bytes, extra) items in parallel, in order.

        Files that do not decode completely are recorded in `report` and left out.
        """
        size = self.stored_size

        def work(member):
            filename, data, extra = member
            try:
                return filename, images.normalize_image(data, size), extra
            except images.UndecodableImage as err:
                return filename, err, extra

        for filename, result, extra in parallel.ordered_thread_map(work, members):
            if isinstance(result, images.UndecodableImage):
                report.skip(filename, result.reason)
                continue
            report.kept += 1
            yield filename, result, extra

    def record_skips(self, report: SkipReport) -> None:
        report.log_summary()
        skipped = dict(self.info.metadata.get("skipped", {}))
        skipped[report.split] = report.as_metadata()
        self.info.metadata["skipped"] = skipped

    # -- reading ---------------------------------------------------------------

    def as_fast_dataset(self, split: str = "train", **options):
        """The split through the shared fast reader; see `fast_tfds.reader.read_split`."""
        from fast_tfds import reader

        return reader.read_split(self, split, **options)
