"""`Augment`: what a training (or evaluation) recipe does to each picture, validated once.

The spec is plain data, without TensorFlow, so that both back ends take the same
object and draw the same randomness from it (`fast_tfds.augment.windows`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from fast_tfds.core.options import check_bool, check_number

CROPS = ("random_resized", "center", None)
# Fields added after saved loader states existed: left out of the repr (the state's
# key) where they are off.
_LATER = ("rotate", "auto_augment", "num_ops", "magnitude", "erase")
# Each number field: whether a value is in its range, and the error's words for the range.
_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "crop_fraction": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "brightness": (lambda v: v >= 0, "a number >= 0"),
    "contrast": (lambda v: v >= 0, "a number >= 0"),
    "saturation": (lambda v: v >= 0, "a number >= 0"),
    "hue": (lambda v: 0 <= v <= 0.5, "a number in [0, 0.5]"),
    "rotate": (lambda v: 0 <= v <= 180, "a number of degrees in [0, 180]"),
    "erase": (lambda v: 0 <= v <= 1, "a probability in [0, 1]"),
}


@dataclasses.dataclass(frozen=True)
class Augment:
    """Crop, flip, colour jitter, rotation, an automatic-augmentation policy and random
    erasing of every picture, new for each example and epoch.

    The order is torchvision's and timm's: crop (+ resize to the output size) -> flip
    -> colour jitter -> rotation -> the policy's ops -> erasing. Each example's random
    choices come from (seed, epoch, example index) alone, so a seeded run repeats
    exactly and a resumed one continues exactly, in either back end.

    Attributes:
      crop: "random_resized" (Inception / torchvision `RandomResizedCrop`, TF official
        models' `sample_distorted_bounding_box`): a window whose area is a fraction
        in `scale` of the picture's and whose aspect ratio (width / height) is drawn
        log-uniformly in `ratio`, at a uniform position, resized to the output size;
        up to 10 tries, then the central window of the picture clamped to `ratio`.
        "center" (evaluation, timm's `crop_pct`): the largest window with the
        output's aspect ratio, shrunk by `crop_fraction` and centered; for a square
        output, a square of `crop_fraction` of the shorter side, which equals an
        aspect-preserving resize to output / crop_fraction followed by a center
        crop. None: the whole picture, resized to the output size.
      scale: (min, max) area fraction of a random-resized crop, 0 < min <= max <= 1.
      ratio: (min, max) aspect ratio (width / height) of a random-resized crop.
      crop_fraction: the part of the picture a center crop keeps, in (0, 1].
      flip: mirror left-right with probability 1/2.
      brightness, contrast, saturation: torchvision `ColorJitter`'s definitions: a
        factor drawn uniformly in [max(0, 1 - v), 1 + v] for each picture;
        brightness multiplies the pixels, contrast blends them with the mean grey
        level of the picture, saturation with each pixel's grey level (factor 0:
        grey, 1: unchanged). 0 = off.
      hue: a shift of the hue drawn uniformly in [-hue, hue] of a full turn
        (0 <= hue <= 0.5, as torchvision); applied as a rotation of the chroma
        plane (YIQ), which keeps each pixel's luma. 0 = off.

      rotate: degrees; a rotation drawn uniformly in [-rotate, rotate] (counter-
        clockwise positive), 0 <= rotate <= 180, corners filled with black (the
        policy's fill where a policy is on). 0 = off.
      auto_augment: an automatic-augmentation policy, as timm names the option:
        torchvision's "trivial_augment_wide" (one op of 14 per picture at a uniform
        bin of 31) or "rand_augment" (`num_ops` ops, each at bin `magnitude` of 31),
        or a timm config string such as "rand-m9-mstd0.5-inc1" or "rand-m7-n2"
        (magnitude on timm's 0-10 scale; docs/training-recipes.md has the tables).
        None = off.
      num_ops, magnitude: torchvision's RandAugment's (default 2 and 9, a bin of 31);
        only with auto_augment="rand_augment" (a timm string holds its own, and
        TrivialAugmentWide draws them). None = the policy's default.
      erase: the probability of timm's random erasing (`RandomErasing(mode="pixel")`:
        one box of 2-33% of the picture, aspect 0.3-3.3, random pixel values), done
        last. 0 = off.

    The colour operations are one affine map of the RGB values, clipped to 0..255
    once at the end (torchvision clips after each): the same picture where no
    channel leaves the range between two steps. The last five fields are left out of
    the repr where they are off, so a recipe without them has the repr (and a saved
    loader state the key) that it had before they existed.
    """

    crop: str | None = "random_resized"
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    crop_fraction: float = 0.875
    flip: bool = True
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    hue: float = 0.0
    rotate: float = 0.0
    auto_augment: str | None = None
    num_ops: int | None = None
    magnitude: int | None = None
    erase: float = 0.0

    def __post_init__(self) -> None:
        if self.crop not in CROPS:
            raise ValueError(f"crop={self.crop!r}: must be 'random_resized', 'center' or None")
        object.__setattr__(self, "scale", _pair("scale", self.scale, 0.0, 1.0))
        object.__setattr__(self, "ratio", _pair("ratio", self.ratio, 0.0, math.inf))
        check_bool("flip", self.flip)
        for name, (fits, must) in _RANGES.items():
            value = getattr(self, name)
            number = _number(name, value)
            check_number(name, value, fits, must)
            object.__setattr__(self, name, number)
        # auto_augment names a policy; num_ops and magnitude only where it takes them.
        from fast_tfds.augment import policies  # policies' draws import this module

        policies.check_options(self.auto_augment, self._policy_options())
        self.policy()  # the policy's own one-line errors

    @property
    def strong(self) -> bool:
        """Whether rotation, a policy or erasing is on (served by the warp kernel)."""
        return bool(self.rotate or self.auto_augment is not None or self.erase)

    def policy(self):
        """The automatic-augmentation policy (`fast_tfds.augment.policies`), or None."""
        if self.auto_augment is None:
            return None
        from fast_tfds.augment import policies  # policies' draws import this module

        return policies.parse(self.auto_augment, **self._policy_options())

    def _policy_options(self) -> dict[str, int]:
        """num_ops= and magnitude=, where given."""
        options = {k: getattr(self, k) for k in ("num_ops", "magnitude")}
        return {k: v for k, v in options.items() if v is not None}

    def __repr__(self) -> str:
        shown = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name not in _LATER or getattr(self, f.name) != f.default
        ]
        return f"Augment({', '.join(shown)})"

    @classmethod
    def train(cls, **changes: Any) -> Augment:
        """The ImageNet training recipe: random-resized crop (0.08-1, 3/4-4/3) + flip."""
        return cls(**changes)

    @classmethod
    def eval(cls, crop_fraction: float = 0.875) -> Augment:
        """The evaluation recipe: a center crop of `crop_fraction`, no randomness."""
        return cls(crop="center", crop_fraction=crop_fraction, flip=False)

    @property
    def jitter(self) -> bool:
        """Whether any colour jitter is on."""
        return any((self.brightness, self.contrast, self.saturation, self.hue))

    @property
    def random(self) -> bool:
        """Whether the output depends on the seed and the epoch."""
        return self.crop == "random_resized" or self.flip or self.jitter or self.strong

    def replace(self, **changes: Any) -> Augment:
        return dataclasses.replace(self, **changes)


def check_augment(augment: Any) -> None:
    """`augment` is an `Augment` or None (the option of both back ends)."""
    if augment is not None and not isinstance(augment, Augment):
        raise ValueError(f"augment={augment!r}: must be a fast_tfds.Augment(...) or None")


def _number(name: str, value: Any) -> float:
    check_number(name, value, math.isfinite, "a finite number")
    return float(value)


def _pair(name: str, value: Any, low: float, high: float) -> tuple[float, float]:
    """(min, max) with low < min <= max <= high."""
    bounds = f"(min, max) with {low:g} < min <= max" + ("" if high == math.inf else f" <= {high:g}")
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name}={value!r}: must be a pair {bounds}")
    try:
        first, second = (_number(name, v) for v in value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: must be a pair {bounds}") from None
    if not low < first <= second <= high:
        raise ValueError(f"{name}={value!r}: must be a pair {bounds}")
    return first, second
