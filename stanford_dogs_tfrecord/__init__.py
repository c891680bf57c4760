"""stanford_dogs_tfrecord: `import stanford_dogs_tfrecord` registers the TFDS dataset.

import stanford_dogs_tfrecord
ds = stanford_dogs_tfrecord.as_fast_dataset("train", batch_size=64)
ds = stanford_dogs_tfrecord.as_fast_dataset("train", crop_to_box=True)
loader = stanford_dogs_tfrecord.as_fast_loader("train", crop_to_box=True, seed=0)  # JAX, PyTorch
"""

from fast_tfds.core import dataset_hooks
from stanford_dogs_tfrecord.hook import StanfordDogsHook
from stanford_dogs_tfrecord.stanford_dogs_tfrecord_dataset_builder import Builder

# The readers are imported when used (TensorFlow for as_fast_dataset, Grain for
# as_fast_loader), so `import stanford_dogs_tfrecord` loads neither.

NAME = Builder.name

# crop_to_box, with_boxes and max_boxes, for these functions and for the generic
# fast_tfds.as_fast_dataset / as_fast_loader of this dataset alike.
dataset_hooks.register(NAME, StanfordDogsHook())


def as_fast_dataset(
    split: str = "train",
    *,
    with_boxes: bool = False,
    crop_to_box: bool = False,
    as_supervised: bool = True,
    **options,
):
    """`split` of stanford_dogs_tfrecord as fast batches; see `fast_tfds.as_fast_dataset`.

    Builds the dataset first if needed (pass download_config= with a manual_dir
    to build from local copies of the archives).

    Args:
      split: a split or a slice of one ('train', 'test[:50%]').
      with_boxes: with as_supervised, yield (image, {'label': label, 'bbox':
        boxes}) instead of (image, label). Batched, boxes are a float32
        tf.RaggedTensor [batch, (boxes), 4] (ymin, xmin, ymax, xmax, in [0, 1]);
        with batch_size=None, a dense [boxes, 4] tensor. Without as_supervised
        the example dicts always hold the boxes, in that form, as
        example['objects']['bbox'], and this option changes nothing.
      crop_to_box: return the image cropped to its first box (the annotated
        dog): the decoder is given that window and resizes it to `image_size`
        like any image (aspect ratio not kept). Images without a
        box are returned whole. Returned boxes stay relative to the whole image.
      as_supervised: (image, label) tuples (see with_boxes), else dicts of all
        features.
      **options: see `fast_tfds.as_fast_dataset` and `read_split`, e.g.
        batch_size, image_size, cache, data_dir, config, download_config. The
        crop and the boxes are computed before the cache, so a cached pipeline
        caches them too.
    """
    from fast_tfds.read import reader

    return reader.as_fast_dataset(
        NAME,
        split,
        with_boxes=with_boxes,
        crop_to_box=crop_to_box,
        as_supervised=as_supervised,
        **options,
    )


def as_fast_loader(
    split: str = "train",
    *,
    with_boxes: bool = False,
    crop_to_box: bool = False,
    max_boxes: int = 16,
    **options,
):
    """`split` of stanford_dogs_tfrecord as numpy batches, without TensorFlow; see
    `fast_tfds.loader.as_fast_loader` for the other options. Needs the [loader] extra.

    Args:
      split: a split or a slice of one ('train', 'test[:50%]').
      with_boxes: yield (images, {"label": [B] int64, "bbox": [B, max_boxes, 4]
        float32, "num_boxes": [B] int32}) instead of (images, labels): each
        image's boxes (ymin, xmin, ymax, xmax, in [0, 1]) first, zero rows after,
        so that batches have one shape (what jax.jit wants).
      crop_to_box: the image cropped to its first box (the annotated dog), in
        the same pixel window as `as_fast_dataset(crop_to_box=True)`, then resized
        to `image_size` (aspect ratio not kept). Images without a box stay whole.
        Returned boxes stay relative to the whole image.
      max_boxes: rows of the padded boxes; an image with more raises an error
        that says so.
    """
    from fast_tfds import loader  # Grain and friends: imported only when used.

    return loader.as_fast_loader(
        NAME,
        split,
        with_boxes=with_boxes,
        crop_to_box=crop_to_box,
        max_boxes=max_boxes,
        **options,
    )


__all__ = ["NAME", "Builder", "as_fast_dataset", "as_fast_loader"]
