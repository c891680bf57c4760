"""What both dataset builders share.

- `ImageConfig`: the `224` (default) and `original` configs.
- Sources: a file of the archive's name in the manual dir wins over a download.
- Shards: at least `MIN_SHARDS_PER_SPLIT` per split, so that interleave and up
  to 16 input pipelines each get their own files.
- Skips: what a build leaves out is counted, logged and kept in the metadata.
- Examples: each dataset's pure per-example function runs in threads here, or
  on Apache Beam workers when the build is given Beam options (`beam_support`).
- `as_fast_dataset()`: the shared fast reader, as a builder method.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.resources
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds
from absl import logging
from etils import epath
from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError
from tensorflow_datasets.core.utils import shard_utils

from fast_tfds import images, parallel

KeyExample = tuple[str, dict[str, Any]]

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


@dataclasses.dataclass(frozen=True)
class Skipped:
    """What a per-example function returns for a file the build leaves out."""

    file: str
    reason: str


def normalize_or_skip(
    filename: str, data: bytes, size: tuple[int, int] | None
) -> images.NormalizedImage | Skipped:
    """The image step of every per-example function: a clean JPEG, or why not."""
    try:
        return images.normalize_image(data, size)
    except images.UndecodableImage as err:
        return Skipped(filename, err.reason)


def _add_worker_skips(report: SkipReport, path: epath.Path) -> None:
    from fast_tfds import beam_support  # Imports Apache Beam: only for Beam builds.

    beam_support.add_worker_skips(report, path)


class SourceChecksumError(NonMatchingChecksumError):
    """A downloaded archive is not the registered one; the message says what to do instead.

    TFDS's own error spans several lines of UrlInfo reprs and points to a web
    page; this one is a single line with the way out: a manual-dir copy.
    """

    def __init__(self, dataset: str, url: str, err: NonMatchingChecksumError, expected=None):
        message = str(err)
        filename = url.rsplit("/", 1)[-1]
        # TFDS's message: "Artifact URL, downloaded to PATH, has wrong checksum:
        # * Expected: UrlInfo(size=..., checksum='...') * Got: UrlInfo(...)".
        checksums = re.findall(r"checksum='([0-9a-f]+)'", message)
        downloaded = re.search(r"downloaded to (.+?), has wrong checksum", message)
        path = epath.Path(downloaded.group(1)) if downloaded else None
        details = []
        if expected is not None:
            details.append(
                f"expected {int(expected.size):,} bytes, sha256 {expected.checksum[:12]}..."
            )
        if path is not None and path.exists() and len(checksums) == 2:
            details.append(f"got {os.path.getsize(path):,} bytes, sha256 {checksums[1][:12]}...")
        details = f" ({'; '.join(details)})" if details else ""
        removed = _remove_failed_download(path)
        super().__init__(
            f"{dataset}: the download of {url} does not match its registered checksum"
            f"{details}{removed}: the server or a proxy changed the file, or the download "
            f"was cut short. Get the file another way, put it in a folder as {filename} "
            f"and build with `tfds build {dataset} --manual_dir FOLDER` (or "
            "tfds.download.DownloadConfig(manual_dir=FOLDER)); a manual-dir file's "
            "checksum is not checked."
        )


def _remove_failed_download(path: epath.Path | None) -> str:
    """Deletes the rejected file if TFDS left it in its temporary download folder."""
    # TFDS downloads into '<name>.tmp.<uuid>/' and leaves it there on a mismatch.
    if path is None or ".tmp." not in path.parent.name or not path.exists():
        return ""
    path.parent.rmtree()
    return "; the rejected download was deleted"


class FastImageBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Base of both builders. Subclasses set VERSION, BUILDER_CONFIGS and the TFDS methods."""

    MIN_SHARDS_PER_SPLIT = MIN_SHARDS_PER_SPLIT
    on_beam = False  # Whether the build running now runs on Apache Beam.
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
        try:
            return epath.Path(dl_manager.download(url))
        except NonMatchingChecksumError as err:
            expected = self.url_infos.get(url) if self.url_infos else None
            raise SourceChecksumError(self.name, url, err, expected) from None

    # -- shards ----------------------------------------------------------------

    def _generate_splits(self, dl_manager, download_config):
        fields = {
            f.name: getattr(download_config, f.name) for f in dataclasses.fields(download_config)
        }
        fields["min_num_shards"] = self.MIN_SHARDS_PER_SPLIT
        # `tfds build --beam_pipeline_options=...` sets beam_options, the API
        # either; then `_split_generators` returns Beam transforms.
        self.on_beam = (download_config.beam_runner, download_config.beam_options) != (None, None)
        self._beam_reports: list[tuple[SkipReport, epath.Path]] = []
        try:
            split_infos = super()._generate_splits(
                dl_manager, _AtLeastShardsDownloadConfig(**fields)
            )
            # The pipeline has run: the workers' skips are in their files.
            for report, path in self._beam_reports:
                _add_worker_skips(report, path)
                self.record_skips(report)
            return split_infos
        finally:
            if self.on_beam and self._beam_skips_dir.exists():
                self._beam_skips_dir.rmtree()

    # -- images ----------------------------------------------------------------

    @property
    def stored_size(self) -> tuple[int, int] | None:
        size = self.builder_config.image_size
        return None if size is None else (size, size)

    def image_feature(self) -> tfds.features.Image:
        return tfds.features.Image(shape=self.builder_config.stored_shape, encoding_format="jpeg")

    def record_skips(self, report: SkipReport) -> None:
        report.log_summary()
        skipped = dict(self.info.metadata.get("skipped", {}))
        skipped[report.split] = report.as_metadata()
        self.info.metadata["skipped"] = skipped

    # -- examples: one pure function, run locally or on Beam ---------------------

    def examples_in_threads(
        self,
        make_example: Callable[[tuple[str, bytes, Any]], KeyExample | Skipped],
        members: Iterable[tuple[str, bytes, Any]],
        report: SkipReport,
    ) -> Iterator[KeyExample]:
        """make_example over (filename, bytes, extra) members in threads, in order.

        Its `Skipped` results are recorded in `report` and left out.
        """
        for result in parallel.ordered_thread_map(make_example, members):
            if isinstance(result, Skipped):
                report.skip(result.file, result.reason)
                continue
            report.kept += 1
            yield result

    def examples_on_beam(
        self,
        make_example: Callable[[tuple[str, bytes, Any]], KeyExample | Skipped],
        members: list[tuple[str, Any, Any]],
        read_member: Callable[[Any], bytes],
        report: SkipReport,
    ):
        """The same, as a Beam transform: workers read each (filename, location,
        extra) member's bytes with `read_member(location)` and run make_example.

        Their skips are added to `report`, and recorded, once the pipeline ends.
        Both callables are pickled to the workers: module-level functions (or
        partials of them) and `beam_support` readers.
        """
        from fast_tfds import beam_support  # Imports Apache Beam: only for Beam builds.

        path = self._beam_skips_dir / f"{report.split}.json"
        self._beam_reports.append((report, path))
        return beam_support.examples_transform(members, read_member, make_example, path)

    def _process_pipeline_result(self, pipeline_result) -> None:
        from fast_tfds import beam_support  # Imports Apache Beam: only for Beam builds.

        counters = beam_support.counters(pipeline_result)
        logging.info(
            "%s: Beam workers kept %d images and skipped %d files (all splits).",
            self.name,
            counters.get("kept", 0),
            counters.get("skipped", 0),
        )

    @property
    def _beam_skips_dir(self) -> epath.Path:
        # Inside the (incomplete) build folder: the workers and this process both
        # reach it, as they must reach the output (gs:// on Dataflow).
        return self.data_path / "_beam_skips"

    # -- reading ---------------------------------------------------------------

    def as_fast_dataset(self, split: str = "train", **options):
        """The split through the shared fast reader; see `fast_tfds.reader.read_split`."""
        from fast_tfds import reader

        return reader.read_split(self, split, **options)
