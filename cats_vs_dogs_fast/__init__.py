"""cats_vs_dogs_fast: `import cats_vs_dogs_fast` registers the TFDS dataset.

import cats_vs_dogs_fast
ds = cats_vs_dogs_fast.as_fast_dataset("train", batch_size=64)
"""

from cats_vs_dogs_fast.cats_vs_dogs_fast_dataset_builder import Builder
from fast_tfds.read import reader as _reader

NAME = Builder.name


def as_fast_dataset(split: str = "train", **options):
    """`split` of cats_vs_dogs_fast as fast batches; see `fast_tfds.as_fast_dataset`.

    Builds the dataset first if needed (pass download_config= with a manual_dir
    to build from a local copy of the archive).
    """
    return _reader.as_fast_dataset(NAME, split, **options)


__all__ = ["NAME", "Builder", "as_fast_dataset"]
