"""MixUp / CutMix of a batch and its labels, as timm's `Mixup(mode="batch")`, in numpy:
the public `fast_tfds.Mix`, which both back ends apply to each finished batch.

Per batch, seeded by (seed, epoch, batch index) alone: with probability `prob`, mix;
when both alphas are on, CutMix with probability `switch_prob`, else MixUp; lambda
drawn from Beta(alpha, alpha) of the one chosen. Every picture i is mixed with picture
B - 1 - i of the same batch (timm's `x.flip(0)`):

- MixUp: lambda * x_i + (1 - lambda) * x_(B-1-i).
- CutMix: a box of (1 - lambda) of the area (sides int(H sqrt(1 - lambda)) and
  int(W sqrt(1 - lambda)), centered on a uniform pixel, clipped to the picture) is
  pasted from x_(B-1-i); lambda then becomes 1 - the clipped box's area / H W (timm's
  `correct_lam`), so the label weights are the pasted area's.

Labels become float32 one-hot rows [B, num_classes], smoothed (off = smoothing / C, on =
1 - smoothing + off) and mixed with the same lambda: each row sums to 1.
`label_smoothing` without alphas gives smoothed one-hot rows and leaves the pictures.

An odd batch (a last partial one): timm refuses it; here its middle picture pairs with
itself, so it stays as it is and keeps its own label (weights lambda and 1 - lambda on
the same class). A batch of one is left unmixed, its label one-hot (smoothed).
uint8 pictures: MixUp rounds the blend to whole levels (a quantization
of at most half a level, invisible to a model that normalizes its input); pass
`dtype=np.float32` for unquantized values. CutMix copies pixels: exact in either.
"""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np

from fast_tfds.augment import draws, kernels
from fast_tfds.augment.spec import Augment
from fast_tfds.core.options import check_number

# The batch's key in `draws.uniforms`: a different epoch stream than the examples'
# (bit 62 set), so batch b never shares draws with example b.
_BATCH_STREAM = 1 << 62


@dataclasses.dataclass(frozen=True)
class Mix:
    """MixUp / CutMix of each training batch and its labels: timm's `Mixup` arguments,
    in its batch mode (one draw per batch, `correct_lam`).

    Pass it as `mix=` to `as_fast_dataset()` or `as_fast_loader()`: labels become
    float32 one-hot rows [batch, num_classes] that sum to 1, and the pictures of each
    batch are mixed with those of the batch flipped (picture i with B - 1 - i).

    Attributes:
      mixup_alpha: MixUp's Beta(alpha, alpha) for lambda; 0 = no MixUp.
      cutmix_alpha: CutMix's Beta(alpha, alpha); 0 = no CutMix. The labels are weighted
        by the pasted area (the box clipped to the picture).
      prob: the probability that a batch is mixed at all.
      switch_prob: with both alphas on, the probability of CutMix rather than MixUp.
      label_smoothing: timm's smoothing of the one-hot rows (off = smoothing /
        num_classes, on = 1 - smoothing + off); alone, it smooths the labels and
        leaves the pictures. Do not smooth again in the loss.
    """

    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    prob: float = 1.0
    switch_prob: float = 0.5
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
        for name in ("mixup_alpha", "cutmix_alpha"):
            check_number(name, getattr(self, name), lambda v: v >= 0, "a number >= 0 (0 = off)")
        for name in ("prob", "switch_prob", "label_smoothing"):
            check_number(name, getattr(self, name), lambda v: 0 <= v <= 1, "a number in [0, 1]")

    @property
    def mixes(self) -> bool:
        """Whether any batch gets its pictures mixed (else labels only)."""
        return (self.mixup_alpha > 0 or self.cutmix_alpha > 0) and self.prob > 0

    def draw(self, seed: int, epoch: int, batch: int, height: int, width: int):
        """(lambda, box or None): box (y0, y1, x0, x1) for CutMix; lambda corrected."""
        key = draws.uniforms(seed, epoch ^ _BATCH_STREAM, [batch], 4)[0]
        if not self.mixes or key[0] >= self.prob:
            return 1.0, None
        rng = np.random.Generator(np.random.Philox(int(key[1] * 2.0**53)))
        if self.mixup_alpha > 0 and self.cutmix_alpha > 0:
            cutmix = key[2] < self.switch_prob
        else:
            cutmix = self.cutmix_alpha > 0
        alpha = self.cutmix_alpha if cutmix else self.mixup_alpha
        lam = float(rng.beta(alpha, alpha))
        if not cutmix:
            return lam, None
        ratio = np.sqrt(1 - lam)
        cut_h, cut_w = int(height * ratio), int(width * ratio)
        cy, cx = int(rng.integers(0, height)), int(rng.integers(0, width))
        y0, y1 = np.clip([cy - cut_h // 2, cy + cut_h // 2], 0, height)
        x0, x1 = np.clip([cx - cut_w // 2, cx + cut_w // 2], 0, width)
        lam = 1.0 - float((y1 - y0) * (x1 - x0)) / (height * width)
        return lam, (int(y0), int(y1), int(x0), int(x1))


def check_mix(mix, *, shuffle: bool, augment) -> None:
    """`mix` is a `Mix` or None (the option of both back ends), on a training read:
    an evaluation read (shuffle=False, or `Augment.eval()`) mixing its batches would
    score blends, so that is a one-line error rather than a silent no-op."""
    if mix is None:
        return
    if not isinstance(mix, Mix):
        raise ValueError(f"mix={mix!r}: must be a fast_tfds.Mix(...) or None")
    if shuffle is False:
        raise ValueError(
            "mix=: mixes training batches, and shuffle=False reads in record order, as for "
            "evaluation (each picture would always meet the same partner); drop mix= there"
        )
    if isinstance(augment, Augment) and augment == Augment.eval(augment.crop_fraction):
        raise ValueError(
            "mix=: mixes training batches, and augment= is the evaluation recipe "
            "(Augment.eval()); drop mix= for evaluation"
        )


def one_hot(labels, num_classes: int, smoothing: float = 0.0) -> np.ndarray:
    """float32 [B, num_classes], timm's smoothed one-hot."""
    labels = np.asarray(labels, np.int64).reshape(-1)
    if num_classes < 1 or ((labels < 0) | (labels >= num_classes)).any():
        raise ValueError(f"num_classes={num_classes!r}: every label must be in [0, num_classes)")
    off = smoothing / num_classes
    rows = np.full((len(labels), num_classes), off, np.float32)
    rows[np.arange(len(labels)), labels] = 1.0 - smoothing + off
    return rows


def mix(
    images: np.ndarray,
    labels,
    num_classes: int,
    mixing: Mix,
    *,
    seed: int,
    epoch: int,
    batch: int,
    dtype=None,
    num_threads: int = 1,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """(images, targets, lambda) of batch `batch` of `epoch`. `images` [B, H, W, C] is
    mixed in place when it has the output's dtype (`dtype`, default: its own), else a
    new array of `dtype` is returned. uint8 `images` with `out` (an array of their
    shape, e.g. when `images` may not be written): mixed into `out`, read-only
    `images` left as they are; an unmixed batch is then returned as `images` itself."""
    into = out is not None  # reading `images` only (no copy first)
    if into and (images.dtype != np.uint8 or out.shape != images.shape or out.dtype != np.uint8):
        raise ValueError(f"out: must be uint8 of the images' shape {images.shape}")
    if not into:
        dtype = np.dtype(images.dtype if dtype is None else dtype)
        out = images if images.dtype == dtype else images.astype(dtype)
    targets = one_hot(labels, num_classes, mixing.label_smoothing)
    if len(targets) != len(images):
        raise ValueError(f"{len(images)} images and {len(targets)} labels: one label per image")
    lam, box = mixing.draw(seed, epoch, batch, images.shape[1], images.shape[2])
    if lam == 1.0:
        return images if into else out, targets, lam
    pairs = len(out) // 2  # an odd batch's middle picture pairs with itself: unchanged
    last = len(out) - 1
    if box is not None and into:
        # Two whole-batch copies (numpy's per-picture assignments cost twice as much).
        y0, y1, x0, x1 = box
        np.copyto(out, images)
        out[:, y0:y1, x0:x1] = images[::-1, y0:y1, x0:x1]
    elif box is not None:
        y0, y1, x0, x1 = box
        top, bottom = out[:pairs, y0:y1, x0:x1], out[len(out) - pairs :, y0:y1, x0:x1][::-1]
        swapped = top.copy()
        top[...] = bottom
        bottom[...] = swapped
    elif into:
        kernels._parallel(
            len(images),
            num_threads,
            lambda i: cv2.addWeighted(images[i], lam, images[last - i], 1 - lam, 0, dst=out[i]),
        )
    elif dtype == np.uint8:
        # cv2.addWeighted rounds to the nearest level and releases the GIL; pairs in threads.
        kernels._parallel(pairs, num_threads, lambda i: _blend_pair(out, i, lam))
    else:
        partner = out[::-1].copy()
        out *= dtype.type(lam)
        out += partner * dtype.type(1 - lam)
    # Each row lam of itself and 1 - lam of its partner's (row B - 1 - i).
    return out, targets * np.float32(lam) + targets[::-1] * np.float32(1 - lam), lam


def _blend_pair(out: np.ndarray, i: int, lam: float) -> None:
    """Pictures i and B - 1 - i, each lam of itself and 1 - lam of the other."""
    a, b = out[i], out[len(out) - 1 - i]
    blended = kernels.scratch("blend", a.shape, a.dtype)
    cv2.addWeighted(b, lam, a, 1 - lam, 0, dst=blended)
    cv2.addWeighted(a, lam, b, 1 - lam, 0, dst=a)
    np.copyto(b, blended)
