"""The serving step: a batch of examples cut into the output batch, from the picture
store (`serve_into`) or straight from their JPEGs (`decode_into`, no cache).

For each example of the batch, its picture's window (drawn from (seed, epoch,
example) in the picture's reference size and scaled to the stored picture), resize,
flip and colour jitter, written straight into `out`, in threads that release the GIL
(`kernels`). A recipe with rotation, a policy or erasing (`Augment.strong`) is served
by the warp kernel instead (`recipe`: one warp per picture, then its pixel ops and
erasing), from the same windows and the same per-example draws. A plain read (no
augmentation, pictures stored at the output size) is its identity case, a gather of
whole rows.

Both back ends call this one function: the tf.data reader from one
`tf.numpy_function` per batch (`fast_tfds.read.augment_dataset`), the Grain loader
from its batch function (`fast_tfds.loader.augmented`). The store itself
(`fast_tfds.cache.pictures`) knows nothing of augmentation. Without a cache, the
same windows are drawn before decoding, so that the decoder picks its DCT scale for
the part kept, and the same flip and jitter follow. No TensorFlow.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fast_tfds.augment import kernels, recipe, windows
from fast_tfds.augment.spec import Augment
from fast_tfds.augment.windows import NO_AUGMENT, Draw
from fast_tfds.cache.pictures import PictureCache
from fast_tfds.core import jpeg_blocks


def serve_into(
    pictures: PictureCache, slots, draw: Draw, out: np.ndarray, *, num_threads: int = 1
) -> np.ndarray:
    """Batch `out[i]` from store slot `slots[i]`, augmented as example `draw.indices[i]`
    of `draw.epoch` (every slot must be written). Returns `out`."""
    slots = np.asarray(slots, np.int64).reshape(-1)
    if _is_identity(pictures, draw.augment, out):
        if len(slots) and not 0 <= slots.min() <= slots.max() < len(pictures):
            raise IndexError(f"slots {slots.min()}..{slots.max()} of a store of {len(pictures)}")
        unwritten = slots[~pictures.written[slots]]
        if len(unwritten):
            raise ValueError(f"picture {int(unwritten[0])} of the cache is not written yet")
        # mode='clip': the default ('raise') writes through a temporary, twice the copy
        # (the slots are checked above).
        np.take(pictures.rows(), slots, axis=0, out=out, mode="clip")
        return out
    # The windows are drawn in the reference sizes, and scaled to the stored pictures'.
    heights, widths = pictures.reference_heights[slots], pictures.reference_widths[slots]
    drawn = windows.sample(draw, heights, widths, out.shape[1:3])
    images = [pictures.image(int(s)) for s in slots]
    scale_y = pictures.heights[slots] / heights
    scale_x = pictures.widths[slots] / widths
    return recipe.apply_into(
        images, draw, out, scale_y=scale_y, scale_x=scale_x, num_threads=num_threads, drawn=drawn
    )


def decode_into(jpegs, references: np.ndarray, draw: Draw, out: np.ndarray) -> np.ndarray:
    """Batch `out[i]` decoded from `jpegs[i]`, augmented as example `draw.indices[i]` of
    `draw.epoch`.

    `references`: int64 [n, 4], (top, left, height, width) of the part of each stored
    picture that windows are drawn in (a hook's window, or the whole picture). The
    windows are drawn for the batch in one vectorized draw (a draw per picture costs a
    quarter of its decode). A JPEG that does not decode is a one-line ValueError naming
    its example. Returns `out`."""
    references = np.asarray(references, np.int64).reshape(-1, 4)
    drawn = windows.sample(draw, references[:, 2], references[:, 3], out.shape[1:3])
    # The windows moved from the reference to the stored picture's pixels.
    moved = dataclasses.replace(
        drawn, top=drawn.top + references[:, 0], left=drawn.left + references[:, 1]
    )
    if draw.augment is not None and draw.augment.strong:
        return _decode_strong_into(jpegs, draw, out, moved)
    jitter = kernels.Jitter(drawn) if drawn.jittered_mask.any() else None
    for i, data in enumerate(jpegs):
        crop = moved.window(i)
        try:
            jpeg_blocks.decode_resized_into(data, out[i], lambda _h, _w, crop=crop: crop)
        except (OSError, ValueError) as err:
            raise decode_error(draw.indices[i], err) from None
        kernels.finish_into(out[i], drawn, i, jitter)
    return out


def _decode_strong_into(jpegs, draw: Draw, out, drawn):
    """`decode_into` for a strong recipe: each picture decoded whole at the DCT scale at
    which its window covers the output, then the warp kernel cuts it as it cuts a
    stored picture (`drawn`: the windows in the stored picture's pixels, scaled to the
    decoded ones)."""
    n = len(jpegs)
    images = []
    scale_y, scale_x = np.ones(n), np.ones(n)
    for i, data in enumerate(jpegs):
        window = drawn.window(i)
        try:
            image, _, (height, width) = jpeg_blocks.decode_covering(
                data, out.shape[1:3], lambda _h, _w, window=window: window
            )
        except (OSError, ValueError) as err:
            raise decode_error(draw.indices[i], err) from None
        images.append(image)
        scale_y[i], scale_x[i] = image.shape[0] / height, image.shape[1] / width
    return recipe.apply_into(images, draw, out, scale_y=scale_y, scale_x=scale_x, drawn=drawn)


def _is_identity(pictures: PictureCache, augment: Augment | None, out: np.ndarray) -> bool:
    """Whether the batch is the stored rows as they are: fixed rows at the output size,
    and nothing drawn (no crop, flip or colour)."""
    return (
        (augment is None or augment == NO_AUGMENT)
        and pictures.uniform
        and tuple(out.shape[1:]) == (*pictures.output_size, 3)
        and out.dtype == np.uint8
    )


def decode_error(index, err: Exception) -> ValueError:
    """The one line for a picture that does not decode: which example, why, what to do."""
    return ValueError(
        f"fast_tfds: example {int(index)} does not decode ({err}). Check the files with "
        "`fast-tfds verify` and rebuild the dataset."
    )
