"""Progressive resizing: a smaller output size in early epochs, growing to the final one.

FFCV's recipe (as its `ProgressiveResizing`): train the first epochs on small pictures,
which are cheaper for the model, and ramp the resolution up linearly to the final size.
With `augment=`, the cache keeps each picture at a resolution chosen for the largest
size, and every epoch cuts its crops out of it at that epoch's size: a new size costs
no refill and no decode. The size is a function of the epoch number alone, so both back
ends, a resumed loader and a repeated run give every epoch the same size.
"""

from __future__ import annotations

import dataclasses

from fast_tfds.core.sizes import check_image_size, is_int


@dataclasses.dataclass(frozen=True)
class ProgressiveResize:
    """Square output size per epoch, passed as `image_size=` with `augment=`.

    Epochs up to `start_epoch` are `start` px; between `start_epoch` and `end_epoch` the
    size changes linearly, rounded to the nearest multiple of `step` (ties to the even
    one, as numpy's and FFCV's rounding) and kept between `start` and `end`; from
    `end_epoch` on it is `end` px. Epochs count from 0, as the readers number them
    (`Augment` draws its windows per epoch the same way).

    Attributes:
      start: the first epochs' size, px.
      end: the final size, px. The cache's resolution is chosen for the larger of
        `start` and `end`.
      start_epoch: the epoch the ramp starts at.
      end_epoch: the epoch the final size is reached at (after `start_epoch`).
      step: sizes are multiples of it on the ramp (32, as FFCV's, suits strided models).
    """

    start: int = 160
    end: int = 224
    start_epoch: int = 0
    end_epoch: int = 10
    step: int = 32

    def __post_init__(self) -> None:
        for names, least, what in (
            (("start", "end", "step"), 1, "a positive int (pixels)"),
            (("start_epoch", "end_epoch"), 0, "an epoch number, 0 or more"),
        ):
            for name in names:
                value = getattr(self, name)
                if not is_int(value) or value < least:
                    raise ValueError(f"ProgressiveResize({name}={value!r}): must be {what}")
        if self.end_epoch <= self.start_epoch:
            raise ValueError(
                f"ProgressiveResize(start_epoch={self.start_epoch}, end_epoch="
                f"{self.end_epoch}): end_epoch must come after start_epoch"
            )

    @property
    def largest(self) -> tuple[int, int]:
        """The largest size of any epoch, (height, width)."""
        side = max(self.start, self.end)
        return side, side

    def size(self, epoch: int) -> tuple[int, int]:
        """(height, width) of the batches of `epoch` (0-based)."""
        epoch = int(epoch)
        if epoch <= self.start_epoch:
            side = self.start
        elif epoch >= self.end_epoch:
            side = self.end
        else:
            fraction = (epoch - self.start_epoch) / (self.end_epoch - self.start_epoch)
            ramp = self.start + fraction * (self.end - self.start)
            side = int(round(ramp / self.step)) * self.step
            side = min(max(side, min(self.start, self.end)), max(self.start, self.end))
        return side, side


def largest(image_size):
    """The size the cache is laid out for: a schedule's largest, else `image_size`."""
    return image_size.largest if isinstance(image_size, ProgressiveResize) else image_size


def check_progressive(image_size, augment, *, caller: str) -> None:
    """`image_size` of either back end: a size (`fast_tfds.core.sizes.check_image_size`),
    or a schedule, which needs an augmentation that crops: the cache then keeps each
    picture at a resolution that serves any size up to the largest."""
    if not isinstance(image_size, ProgressiveResize):
        check_image_size(image_size)
        return
    if augment is None or augment.crop is None:
        raise ValueError(
            f"{caller}(image_size={image_size!r}): progressive resizing cuts each epoch's "
            "crops at its own size, so it needs augment= with a crop (Augment() or "
            "Augment.eval())"
        )
