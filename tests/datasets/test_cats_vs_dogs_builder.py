"""TFDS's own builder checks on the dummy archive, for every config."""

import tensorflow_datasets as tfds

from cats_vs_dogs_fast import cats_vs_dogs_fast_dataset_builder
from fast_tfds.samples import cats_vs_dogs as cats_archive
from tests.helpers import not_collected

# dummy_data/kagglecatsanddogs_5340.zip: 2 images per class plus, per class,
# one file of each quirk; 8 kinds of quirk decode and are kept.
EXPECTED_TRAIN = 2 * (2 + len(cats_archive.KEPT_QUIRKS))


class CatsVsDogsFastTest(tfds.testing.DatasetBuilderTestCase):
    test_session = not_collected(tfds.testing.DatasetBuilderTestCase.test_session)
    DATASET_CLASS = cats_vs_dogs_fast_dataset_builder.Builder
    BUILDER_CONFIG_NAMES_TO_TEST = ["224", "original"]
    SPLITS = {"train": EXPECTED_TRAIN}
    # The dummy archive is found through the manual dir, as a mirror would be.
    DL_DOWNLOAD_RESULT = "kagglecatsanddogs_5340.zip"


if __name__ == "__main__":
    tfds.testing.test_main()
