"""What an augmented example must be, computed apart from both readers: its window (and
flip, jitter) drawn by `fast_tfds.augment.windows` from (seed, epoch, example index), cut
out of TensorFlow's decode of its stored JPEG by the kernel."""

from __future__ import annotations

import dataclasses

import numpy as np

from fast_tfds import Augment
from fast_tfds.augment import kernels, recipe, windows

# Colour jitter on a random-resized crop.
JITTER = Augment(brightness=0.3, contrast=0.3, saturation=0.3, hue=0.05)
# Rotation, TrivialAugmentWide and random erasing: the warp kernel (`recipe`).
STRONG = Augment(rotate=15, auto_augment="trivial_augment_wide", erase=0.25)


def expected_images(augment, seed, epoch, indices, pictures, size=(224, 224), cache=True):
    """Examples `indices` of `epoch`, each cut out of its full picture (`pictures[i]`, the
    stored pixels of example i) by the kernel, as one uint8 batch.

    The kernel (the cache's path) jitters a crop smaller than the output before resizing
    it; decoding each JPEG (cache=False) jitters the resized picture."""
    indices = list(indices)
    n = len(indices)
    heights = [pictures[i].shape[0] for i in indices]
    widths = [pictures[i].shape[1] for i in indices]
    drawn = windows.sample(windows.Draw(augment, seed, epoch, indices), heights, widths, size)
    out = np.zeros((n, *size, 3), np.uint8)
    chosen = [pictures[i] for i in indices]
    if cache:
        return kernels.apply_into(chosen, drawn, out)
    ones = np.ones(n, np.float32)
    plain = dataclasses.replace(
        drawn, brightness=ones, contrast=ones, saturation=ones, hue=0 * ones
    )
    kernels.apply_into(chosen, plain, out)
    unflipped = dataclasses.replace(drawn, flip=np.zeros(n, bool))
    for i in range(n):
        kernels.finish_into(out[i], unflipped, i)
    return out


def expected_strong(augment, seed, epoch, indices, pictures, size=(224, 224)):
    """Examples `indices` of `epoch` cut out of their full pictures by the warp kernel
    (rotation, TrivialAugmentWide, random erasing: the stronger recipes)."""
    indices = list(indices)
    out = np.zeros((len(indices), *size, 3), np.uint8)
    return recipe.apply_into(
        [pictures[i] for i in indices], windows.Draw(augment, seed, epoch, indices), out
    )


def grain_order(n: int, seed: int, epoch: int, shard: tuple[int, int] = (0, 1)) -> list[int]:
    """The example indices of one epoch of the loader's shard (index, count) as Grain's own
    shuffle orders them."""
    import grain

    ds = grain.MapDataset.range(n)[shard[0] :: shard[1]]
    size = len(ds)
    ds = ds.shuffle(seed=seed).repeat()
    return [ds[epoch * size + k] for k in range(size)]
