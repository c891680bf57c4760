"""The base of both dataset builders.

- `ImageConfig`: the `224` (default) and `original` configs.
- Sources: a file of the archive's name in the manual dir wins over a download
  (`sources`); a download that cannot work fails in seconds, in one line.
- Builds: one at a time per data dir and dataset; a full disk is one line (`guard`).
- Shards: at least `MIN_SHARDS_PER_SPLIT` per split (`shards`).
- Skips: what a build leaves out is counted, logged and kept in the metadata
  (`examples.SkipReport`).
- Examples: `generate_examples` runs the pure per-example function
  (`examples.image_example`, with the dataset's own features) over archive
  members, in local threads or on Apache Beam workers (`beam`), so the
  dataset builders never branch on where they run.
- `as_fast_dataset()`: the shared fast reader, as a builder method.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import tensorflow_datasets as tfds
from etils import epath

from fast_tfds.building import archive_sources, errors, guard, parallel
from fast_tfds.building.examples import ExampleFeatures, Skipped, SkipReport, image_example
from fast_tfds.building.shards import MIN_SHARDS_PER_SPLIT, AtLeastShardsDownloadConfig
from fast_tfds.core import commands

SIZE_224 = 224

# (filename, where the bytes are, what else the example needs): a zip member's
# name or a tar member's (offset, size), read by a `build.archives` reader.
Member = tuple[str, Any, Any]


class ImageConfig(tfds.core.BuilderConfig):
    """A config is the size images are stored at: square `image_size` or original."""

    def __init__(self, *, image_size: int | None, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size


def image_configs(resize_note: str = "") -> list[ImageConfig]:
    return [
        ImageConfig(
            name="224",
            image_size=SIZE_224,
            description=(
                "Images resized to 224x224 at build time (Pillow bilinear with "
                "antialiasing, aspect ratio not kept, as tf.image.resize(image, (224, 224)) "
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

    def __init__(self, **kwargs):
        # Under `tfds build`, our BuildErrors print as one line (see `errors`).
        errors.install_excepthook_under_tfds_cli()
        super().__init__(**kwargs)
        restore_alternative_file_formats(self.info)

    @tfds.core.utils.classproperty
    @classmethod
    def _checksums_path(cls) -> epath.Path:
        # The registered checksums live in the repository's top-level checksums/
        # folder, installed as the fast_tfds.checksums package.
        return epath.Path(str(importlib.resources.files("fast_tfds.checksums"))) / f"{cls.name}.tsv"

    def download_and_prepare(self, **kwargs):
        """TFDS's, one build of this dataset per data dir at a time; a full disk is one line.

        A second build started meanwhile waits for the first, then finds the
        dataset built (TFDS logs "Reusing dataset") and reads its info from disk.
        """
        # data_dir is <data_dir>/<dataset>/<config>/<version>: both datasets have configs.
        dataset_dir = self.data_path.parent.parent
        # What a failed build would leave behind (TFDS removes only its incomplete.*
        # folder); build_lock removes the lock file and the dataset folder. The data
        # dir and its downloads/ stay: every dataset's build shares them.
        made_by_tfds = (dataset_dir / ".config", dataset_dir / ".config" / "metadata.json")
        with guard.build_lock(dataset_dir, f"{self.name}/{self.builder_config.name}") as waited:
            if waited and self.data_path.exists():
                self.info.read_from_directory(self.data_dir)
            with (
                guard.removed_on_failure(*made_by_tfds, self.data_path.parent),
                guard.disk_full_as_error(self.name, dataset_dir.parent),
            ):
                return super().download_and_prepare(**kwargs)

    def source_path(self, dl_manager: tfds.download.DownloadManager, url: str) -> epath.Path:
        """The manual dir's file of the URL's name if there is one, else the download."""
        return archive_sources.source_path(
            dl_manager,
            url,
            dataset=self.name,
            url_infos=self.url_infos,
            build_command=self.tfds_build_command(),
        )

    def tfds_build_command(self) -> str:
        """The `tfds build` command that builds this dataset into this builder's data dir,
        from any folder; error messages suggest it."""
        # data_path is <data_dir>/<dataset>/<config>/<version>: both datasets have configs.
        data_dir = self.data_path.parent.parent.parent
        return commands.tfds_build_command(
            self.name, module=type(self).__module__, data_dir=os.fspath(data_dir)
        )

    # TFDS private API (a test names it, see tests/building/test_tfds_internals.py):
    # `_generate_splits` is where TFDS makes the split builder from the
    # download config, the one place to give it our shard policy.
    def _generate_splits(self, dl_manager, download_config):
        # `tfds build --beam_pipeline_options=...` sets beam_options, the API
        # either; then `generate_examples` returns Beam transforms.
        self.on_beam = (download_config.beam_runner, download_config.beam_options) != (None, None)
        self._beam_reports: list[tuple[SkipReport, epath.Path]] = []
        config = AtLeastShardsDownloadConfig.from_config(
            download_config, min_num_shards=self.MIN_SHARDS_PER_SPLIT
        )
        try:
            split_infos = super()._generate_splits(dl_manager, config)
            # The pipeline has run: the workers' skips are in their files.
            for report, path in self._beam_reports:
                from fast_tfds.building import beam  # Imports Apache Beam: only for Beam builds.

                beam.add_worker_skips(report, path)
                self.record_skips(report)
            return split_infos
        finally:
            if self.on_beam and self._beam_skips_dir.exists():
                self._beam_skips_dir.rmtree()

    # -- images ----------------------------------------------------------------

    def image_feature(self) -> tfds.features.Image:
        size = self.builder_config.image_size
        return tfds.features.Image(shape=(size, size, 3), encoding_format="jpeg")

    def record_skips(self, report: SkipReport) -> None:
        report.log_summary()
        skipped = dict(self.info.metadata.get("skipped", {}))
        skipped[report.split] = report.as_metadata()
        self.info.metadata["skipped"] = skipped

    # -- examples: one pure function, run locally or on Beam ---------------------

    def generate_examples(
        self,
        features: ExampleFeatures,
        members: Iterable[Member],
        read_member: Callable[[Any], bytes],
        report: SkipReport,
    ):
        """`examples.image_example` over each member's bytes, at the config's size, with the
        dataset's `features`: what `_generate_examples` returns.

        Locally, a generator: members are read in order in this thread and
        `make_example` runs in threads (Pillow releases the GIL). On Beam, a
        transform whose workers read and make the examples. Either way the
        `Skipped` results are recorded in `report`, and the report in the
        metadata, once the split is complete. Both callables must pickle for
        Beam: module-level functions (or partials of them) and `archives` readers.
        """
        size = self.builder_config.image_size
        make_example = functools.partial(
            image_example, size=None if size is None else (size, size), features=features
        )
        if self.on_beam:
            from fast_tfds.building import beam  # Imports Apache Beam: only for Beam builds.

            path = self._beam_skips_dir / f"{report.split}.json"
            self._beam_reports.append((report, path))
            return beam.examples_transform(list(members), read_member, make_example, path)
        return self._examples_in_threads(make_example, members, read_member, report)

    def _examples_in_threads(self, make_example, members, read_member, report) -> Iterator:
        with_bytes = ((name, read_member(where), extra) for name, where, extra in members)
        for result in parallel.ordered_thread_map(make_example, with_bytes):
            if isinstance(result, Skipped):
                report.skip(result.file, result.reason)
                continue
            report.kept += 1
            yield result
        self.record_skips(report)

    def _process_pipeline_result(self, pipeline_result) -> None:
        from fast_tfds.building import beam  # Imports Apache Beam: only for Beam builds.

        beam.log_counters(self.name, pipeline_result)

    @property
    def _beam_skips_dir(self) -> epath.Path:
        # Inside the (incomplete) build folder: the workers and this process both
        # reach it, as they must reach the output (gs:// on Dataflow).
        return self.data_path / "_beam_skips"

    # -- reading ---------------------------------------------------------------

    def as_fast_dataset(self, split: str = "train", **options):
        """The split through the shared fast reader; see `fast_tfds.read.reader.read_split`."""
        from fast_tfds.read import reader  # build/ and read/ are siblings: no import at load.

        return reader.read_split(self, split, **options)


def restore_alternative_file_formats(info: tfds.core.DatasetInfo) -> None:
    """Makes the files `tfds convert_format` added next to a build visible to this builder.

    TFDS 4.9.10 restores `alternative_file_formats` from dataset_info.json into
    the info proto but not into the list that `available_file_formats()` and
    `as_data_source()` read, so a registered builder (ours, once imported) would
    not see the ArrayRecord files next to its TFRecords; a read-only builder
    (`tfds.builder_from_directory`) does.
    """
    formats = info.alternative_file_formats  # TFDS's own list, updated in place
    for value in info.as_proto.alternative_file_formats:
        file_format = tfds.core.file_adapters.FileFormat.from_value(value)
        if file_format not in formats:
            formats.append(file_format)
