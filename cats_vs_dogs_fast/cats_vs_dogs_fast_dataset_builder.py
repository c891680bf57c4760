"""cats_vs_dogs_fast: Microsoft's Kaggle Cats and Dogs as clean, sharded TFRecords."""

from __future__ import annotations

import functools
import re

import tensorflow_datasets as tfds

from fast_tfds import builder as fast_builder

_URL = (
    "https://download.microsoft.com/download/3/E/1/"
    "3E1C3F21-ECDB-4869-8368-6DEBA77B919F/kagglecatsanddogs_5340.zip"
)
_HOMEPAGE = "https://www.microsoft.com/en-us/download/details.aspx?id=54765"
_IMAGE_NAME = re.compile(r"^PetImages[\\/](Cat|Dog)[\\/]\d+\.jpg$")


class Builder(fast_builder.FastImageBuilder):
    """Cats vs Dogs: every image that decodes, as RGB JPEG, in >= 16 shards."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {
        "1.0.0": (
            "First release: keeps every file that decodes completely (JPEG, PNG, "
            "GIF, BMP, CMYK, greyscale) as RGB baseline JPEG; configs 224 and "
            "original; >= 16 shards per split; skipped files listed in metadata."
        ),
    }
    BUILDER_CONFIGS = fast_builder.image_configs()

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "image": self.image_feature(),
                    "image/filename": tfds.features.Text(),  # e.g. 'PetImages/Dog/0.jpg'
                    "label": tfds.features.ClassLabel(names=["cat", "dog"]),
                }
            ),
            supervised_keys=("image", "label"),
            homepage=_HOMEPAGE,
            metadata=tfds.core.MetadataDict(),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        archive = self.source_path(dl_manager, _URL)
        # No official split: everything is 'train'; slice it with 'train[:80%]'.
        return {"train": self._generate_examples(archive, dl_manager.iter_archive(archive))}

    def _generate_examples(self, archive_path, archive):
        """Local: a generator of examples. On Beam: a transform whose workers
        read the members from the zip themselves (see fast_tfds.beam_support)."""
        report = fast_builder.SkipReport(self.name, "train")
        make = functools.partial(make_example, size=self.stored_size)

        def image_members():  # (name, iter_archive's name, fobj, label) of the images
            for archive_name, fobj in archive:
                name = archive_name.replace("\\", "/")
                match = _IMAGE_NAME.match(name)
                if match:
                    yield name, archive_name, fobj, match.group(1).lower()
                else:  # Thumbs.db, the readme, the licence.
                    report.skip(name, "not an image member of PetImages/Cat or PetImages/Dog")

        if self.on_beam:
            from fast_tfds.beam_support import ZipMemberReader

            members = [(name, where, label) for name, where, _, label in image_members()]
            return self.examples_on_beam(make, members, ZipMemberReader(archive_path), report)
        return self._generate_locally(make, image_members(), report)

    def _generate_locally(self, make, image_members, report):
        members = ((name, fobj.read(), label) for name, _, fobj, label in image_members)
        yield from self.examples_in_threads(make, members, report)
        self.record_skips(report)


def make_example(
    member: tuple[str, bytes, str], size: tuple[int, int] | None
) -> fast_builder.KeyExample | fast_builder.Skipped:
    """(name, bytes, label) -> (key, example), or why the file is left out.

    The whole per-example work of a build, pure: the local build runs it in
    threads, a Beam build on its workers.
    """
    name, data, label = member
    image = fast_builder.normalize_or_skip(name, data, size)
    if isinstance(image, fast_builder.Skipped):
        return image
    return name, {"image": image.jpeg, "image/filename": name, "label": label}
