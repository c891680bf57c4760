"""Augmentation for both back ends, without TensorFlow: random-resized and center
crops, flips and colour jitter, drawn per example from (seed, epoch, example).

- `spec.Augment`: what to do (the public `fast_tfds.Augment`).
- `windows`: each example's crop window, flip and colour factors, vectorized.
- `kernels`: the windows applied to a batch of decoded pictures, in threads.
- `step`: the serving step both back ends call: a batch cut from the picture store
  (`fast_tfds.cache.pictures`, persisted by `fast_tfds.cache.persisted`), or decoded
  without one, windows drawn, cropped, resized, flipped and jittered into the batch.
- `mixing`: MixUp / CutMix of a finished batch and its labels (the public `fast_tfds.Mix`,
  `mix=` of both back ends).

The stronger recipes (`Augment`'s rotate=, auto_augment=, erase=), served by the same
step (`step`) when a recipe has any of them:

- `ops`: the policies' ops, grouped by what they compute (pixel ops, and geometric ops
  as matrices).
- `policies`: torchvision's TrivialAugmentWide / RandAugment, timm's RandAugment strings.
- `affine`, `warp`: crop + flip + geometric ops as one warp per picture, then pixel ops.
- `erasing`: timm's random erasing.
- `draws`: the counter-based uniforms every draw reads, and which of their columns each
  draw of the stronger recipes reads.
- `recipe`: all of it applied to a batch.
"""

from fast_tfds.augment.spec import Augment

__all__ = ["Augment"]
