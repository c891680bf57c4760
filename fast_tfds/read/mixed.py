"""`mix=` on the tf.data reader: each finished batch mixed by `fast_tfds.augment.mixing`.

It runs after a plan has made a batch and its position in the epoch is known
(`epochs.repeat_epochs`), so every plan, cached or not, augmented or not, gets it
alike, and the draw comes from (seed, epoch, batch index) alone: a repeated or resumed
epoch (`set_epoch`, `KerasEpochs`) gets the same mixes, whichever iterator reads it.

The plans then give uint8 pictures; the blend is made on them (rounded to whole
levels, as the loader's), and the conversion to float32, when asked, comes after.
The input tensor's buffer may not be written, so the blend goes into another array,
taken from a few kept for the purpose (`_Outputs`): a new 9.6 MB array per batch of
64 at 224 px cost its first-touch page faults, about 2 ms of CPU a batch.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from fast_tfds.augment import mixing
from fast_tfds.core import aligned
from fast_tfds.read.output import to_unit_float


def label_classes(builder, label_key: str) -> int:
    """The number of classes of the label feature `mix=` turns into one-hot rows."""
    feature = builder.info.features[label_key] if label_key in builder.info.features else None
    if not isinstance(feature, tfds.features.ClassLabel):
        raise ValueError(
            f"mix=: the label feature {label_key!r} of {builder.info.full_name} is not a "
            "ClassLabel, so it has no number of classes for one-hot rows"
        )
    return int(feature.num_classes)


def mixer(mix: mixing.Mix, seed: int, num_classes: int, dtype: tf.DType, keys):
    """fn(epoch, position, batch) -> the batch mixed, labels float32 [B, num_classes]
    and the images converted to `dtype`. `keys`: (image, label) of a dict batch, or
    None for (image, label[, index]) tuples."""

    outputs = _Outputs()

    def mix_arrays(epoch, position, images, labels):
        out = outputs.get(images.shape)  # taken by TensorFlow without a copy
        mixed, targets, _ = mixing.mix(
            images,
            labels,
            num_classes,
            mix,
            seed=seed,
            epoch=int(epoch),
            batch=int(position),
            out=out,
        )
        return mixed, targets

    def mixed(epoch, position, batch):
        if keys is None:
            images, labels, *rest = batch
        else:
            images, labels = batch[keys[0]], batch[keys[1]]
        new_images, targets = tf.numpy_function(
            mix_arrays, [epoch, position, images, labels], [tf.uint8, tf.float32], stateful=False
        )
        new_images = tf.ensure_shape(new_images, images.shape)
        targets = tf.ensure_shape(targets, [images.shape[0], num_classes])
        if dtype == tf.float32:
            new_images = to_unit_float(new_images)
        if keys is None:
            return (new_images, targets, *rest)
        return {**batch, keys[0]: new_images, keys[1]: targets}

    return mixed


class _Outputs:
    """Aligned uint8 arrays for the mixer's outputs, reused once no tensor holds them.

    TensorFlow takes an aligned output without a copy, holding a reference to the array
    for as long as the tensor lives (and a tensor's numpy view holds the tensor): an
    array that only this list references is free. Up to `keep` arrays are kept; past
    that (a caller holding many batches), a new array is made and not kept.
    """

    def __init__(self, keep: int = 8):
        self._arrays: list[np.ndarray] = []
        self._keep = keep
        self._lock = threading.Lock()  # the map runs several calls at once
        # What sys.getrefcount reports for an array that only the list holds, measured
        # rather than assumed (the count of the call's own reference varies by version).
        probe = [np.empty(0)]
        self._free = sys.getrefcount(probe[0])

    def get(self, shape) -> np.ndarray:
        shape = tuple(shape)
        with self._lock:
            spare = None
            for i in range(len(self._arrays)):
                if sys.getrefcount(self._arrays[i]) == self._free:
                    if self._arrays[i].shape == shape:
                        return self._arrays[i]
                    spare = i
            array = aligned.empty(shape, np.uint8)
            if spare is not None:
                self._arrays[spare] = array
            elif len(self._arrays) < self._keep:
                self._arrays.append(array)
            return array
