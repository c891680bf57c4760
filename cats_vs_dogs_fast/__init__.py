"""cats_vs_dogs_fast: `import cats_vs_dogs_fast` registers the TFDS dataset.

import cats_vs_dogs_fast
ds = cats_vs_dogs_fast.as_fast_dataset("train", batch_size=64)
loader = cats_vs_dogs_fast.as_fast_loader("train", batch_size=64, seed=0)  # JAX, PyTorch
"""

from cats_vs_dogs_fast.cats_vs_dogs_fast_dataset_builder import Builder

# The readers are imported when used: TensorFlow for as_fast_dataset, Grain for
# as_fast_loader. So `import cats_vs_dogs_fast` in a JAX or PyTorch script (and in
# the loader's worker processes, which re-import the main script) loads neither.

NAME = Builder.name


def as_fast_dataset(split: str = "train", **options):
    """`split` of cats_vs_dogs_fast as fast batches; see `fast_tfds.as_fast_dataset`.

    Builds the dataset first if needed (pass download_config= with a manual_dir
    to build from a local copy of the archive).
    """
    from fast_tfds.read import reader

    return reader.as_fast_dataset(NAME, split, **options)


def as_fast_loader(split: str = "train", **options):
    """`split` of cats_vs_dogs_fast as numpy uint8 batches (images, labels), without
    TensorFlow; see `fast_tfds.loader.as_fast_loader`.

    Reads the ArrayRecord files (`tfds build cats_vs_dogs_fast --file_format
    array_record`, or `tfds convert_format` next to TFRecords); builds them first if
    the dataset is missing. Needs the [loader] extra.
    """
    from fast_tfds import loader  # Grain and friends: imported only when used.

    return loader.as_fast_loader(NAME, split, **options)


__all__ = ["NAME", "Builder", "as_fast_dataset", "as_fast_loader"]
