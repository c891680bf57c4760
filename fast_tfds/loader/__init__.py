"""A fast loader for JAX and PyTorch: ArrayRecord files read with Grain, numpy batches.

    import cats_vs_dogs_fast
    loader = cats_vs_dogs_fast.as_fast_loader("train[:80%]", batch_size=64, seed=0)
    for images, labels in loader:  # uint8 [64, 224, 224, 3], int64 [64]
        ...

It reads a dataset built with `tfds build ... --file_format array_record` (or
converted with `tfds convert_format`) without TensorFlow: importing this module
does not import it, and neither does reading, in threads or worker processes.
"""

from fast_tfds.loader import deps

deps.require()

from fast_tfds.loader.examples import BadRecord, DecodeExample  # noqa: E402
from fast_tfds.loader.pipeline import FastLoader, FastLoaderIterator  # noqa: E402
from fast_tfds.loader.source import (  # noqa: E402
    DatasetNotBuilt,
    NoArrayRecordFiles,
    builder_for,
    split_source,
)

DEFAULT_IMAGE_SIZE = 224


def as_fast_loader(
    name: str,
    split: str = "train",
    *,
    data_dir=None,
    config: str | None = None,
    builder_dir=None,
    batch_size: int = 32,
    image_size: int | tuple[int, int] | None = DEFAULT_IMAGE_SIZE,
    shuffle: bool = True,
    seed: int | None = None,
    num_epochs: int | None = 1,
    drop_remainder: bool = False,
    shard_index: int = 0,
    shard_count: int = 1,
    num_threads: int | None = None,
    num_workers: int = 0,
    worker_buffer_size: int = 2,
    crop_to_box: bool = False,
    with_boxes: bool = False,
    max_boxes: int = 16,
    download_and_prepare: bool = True,
    download_config=None,
) -> FastLoader:
    """`split` of dataset `name` as numpy batches, decoded in threads (and, with
    num_workers, in worker processes).

    Args:
      name: the TFDS name, e.g. 'cats_vs_dogs_fast'.
      split: a split or a slice of one ('train', 'train[:80%]').
      data_dir, config: where the dataset is and which config ('224' default,
        'original'); or builder_dir: a built version folder.
      batch_size: examples per batch.
      image_size: int or (height, width) every image is resized to, only when
        its size differs; None keeps the stored size (the '224' config).
      shuffle, seed: a new permutation of the shard every epoch; with a seed the
        orders repeat from run to run (without one a seed is drawn, and kept in
        the iterator's state).
      num_epochs: epochs per `iter(loader)`; None = endless (JAX style, with
        steps). Each `iter()` continues with the next epoch.
      drop_remainder: drop each epoch's last, partial batch.
      shard_index, shard_count: this process's share of the examples, for
        multi-host training (jax.process_index(), jax.process_count()):
        every shard_count-th example from shard_index; the shards are disjoint
        and together complete.
      num_threads: decoding threads per process (default: one per core);
        num_workers: decoding processes besides this one (0: decode in this
        process's threads, the fastest on 2 cores); worker_buffer_size:
        batches each process prepares ahead.
      crop_to_box, with_boxes, max_boxes: Stanford Dogs' boxes (see
        stanford_dogs_tfrecord.as_fast_loader).
      download_and_prepare: build the dataset, as ArrayRecord, if it is missing.
    """
    builder = builder_for(
        name,
        data_dir=data_dir,
        config=config,
        builder_dir=builder_dir,
        download_and_prepare=download_and_prepare,
        download_config=download_config,
    )
    source = split_source(builder, split)
    if (crop_to_box or with_boxes) and not source.has_boxes:
        raise ValueError(f"{source.dataset} has no boxes: crop_to_box and with_boxes need them")
    size = _image_size(image_size, source)
    decode = DecodeExample(
        image_size=size, crop_to_box=crop_to_box, with_boxes=with_boxes, max_boxes=max_boxes
    )
    return FastLoader(
        source,
        decode,
        batch_size=batch_size,
        shuffle=shuffle,
        seed=seed,
        num_epochs=num_epochs,
        drop_remainder=drop_remainder,
        shard_index=shard_index,
        shard_count=shard_count,
        num_threads=num_threads,
        num_workers=num_workers,
        worker_buffer_size=worker_buffer_size,
    )


def _image_size(image_size, source) -> tuple[int, int] | None:
    if image_size is None:
        if source.stored_size is None:
            raise ValueError(
                f"{source.dataset} keeps each image's own size: pass image_size= so "
                "that the images of a batch have one size"
            )
        return None
    if isinstance(image_size, int) and not isinstance(image_size, bool):
        image_size = (image_size, image_size)
    if (
        not isinstance(image_size, tuple | list)
        or len(image_size) != 2
        or not all(isinstance(v, int) and v > 0 for v in image_size)
    ):
        raise ValueError(f"image_size must be an int, (height, width) or None, got {image_size!r}")
    return tuple(image_size)


__all__ = [
    "BadRecord",
    "DatasetNotBuilt",
    "FastLoader",
    "FastLoaderIterator",
    "NoArrayRecordFiles",
    "as_fast_loader",
]
