"""The ops of the automatic-augmentation policies, on uint8 [h, w, 3] RGB, grouped by
what they compute: `enhance` (PIL's ImageEnhance), `levels` (a map of each value),
`histograms` (each channel's histogram or range), `geometric`.

Pixel ops (`op(image, argument)`, in place, OpenCV calls that release the GIL):
identity, brightness, color, contrast, sharpness, posterize, solarize, solarize_add,
invert, autocontrast, equalize. Their argument is the reference's own (PIL's
`ImageEnhance` factor, posterize's bits, solarize's threshold, ...): each policy maps
its magnitude to it (`fast_tfds.augment.policies`).

Geometric ops (`op(argument, height, width)`): shear_x, shear_y, translate_x,
translate_y, rotate. They do not touch pixels: each gives the 3x3 inverse map of the
output frame (output pixel -> input pixel, PIL's pixel-corner coordinates), and
`fast_tfds.augment.affine` folds them with the crop and the flip into one warp.
"""

from __future__ import annotations

from fast_tfds.augment.ops import enhance, geometric, histograms, levels

PIXEL = {
    "identity": levels.identity,
    "brightness": enhance.brightness,
    "color": enhance.color,
    "contrast": enhance.contrast,
    "sharpness": enhance.sharpness,
    "posterize": levels.posterize,
    "solarize": levels.solarize,
    "solarize_add": levels.solarize_add,
    "invert": levels.invert,
    "autocontrast": histograms.autocontrast,
    "equalize": histograms.equalize,
}
GEOMETRIC = {
    "shear_x": geometric.shear_x,
    "shear_y": geometric.shear_y,
    "translate_x": geometric.translate_x,
    "translate_y": geometric.translate_y,
    "rotate": geometric.rotate,
}
NAMES = tuple(PIXEL) + tuple(GEOMETRIC)
# PIL's ImageEnhance ops (`enhance`), whose argument is a factor (1: unchanged).
ENHANCE = ("brightness", "color", "contrast", "sharpness")
