"""Augmentation for both back ends, without TensorFlow: random-resized and center
crops, flips and colour jitter, drawn per example from (seed, epoch, example).

- `spec.Augment`: what to do (the public `fast_tfds.Augment`).
- `windows`: each example's crop window, flip and colour factors, vectorized.
- `kernels`: the windows applied to a batch of decoded pictures, in threads.
- `ragged`: pictures of different sizes in one flat buffer (the crop cache).
- `cached`: a batch served from that cache: windows drawn, cropped, resized,
  flipped and jittered into the output batch.
- `persisted`: that cache in a persistent file (`persist=True`), one for both back ends.
"""

from fast_tfds.augment.spec import Augment

__all__ = ["Augment"]
