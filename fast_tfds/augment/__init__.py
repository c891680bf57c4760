"""Augmentation for both back ends, without TensorFlow: random-resized and center
crops, flips and colour jitter, drawn per example from (seed, epoch, example).

- `spec.Augment`: what to do (the public `fast_tfds.Augment`).
- `windows`: each example's crop window, flip and colour factors, vectorized.
- `kernels`: the windows applied to a batch of decoded pictures, in threads.
- `ragged`: pictures of different sizes in one flat buffer (the crop cache).
- `cached`: a batch served from that cache: windows drawn, cropped, resized,
  flipped and jittered into the output batch.
- `persisted`: that cache in a persistent file (`persist=True`), one for both back ends.

The stronger recipes (`Augment`'s rotate=, auto_augment=, erase=), served by the same
step (`step`) when a recipe has any of them:

- `ops`: the policies' ops, one per module (pixel ops, and geometric ops as matrices).
- `policies`: torchvision's TrivialAugmentWide / RandAugment, timm's RandAugment strings.
- `affine`, `warp`: crop + flip + geometric ops as one warp per picture, then pixel ops.
- `erasing`, `mixing`: timm's random erasing; MixUp / CutMix of a batch and its labels.
- `counters`: the counter-based uniforms every draw reads.
- `draws`: which of their columns each draw of the stronger recipes reads.
- `recipe`: all of it applied to a batch.
"""

from fast_tfds.augment.spec import Augment

__all__ = ["Augment"]
