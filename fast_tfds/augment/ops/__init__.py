"""The ops of the automatic-augmentation policies, one per module, on uint8 [h, w, 3] RGB.

Pixel ops (`apply(image, argument)`, in place, OpenCV calls that release the GIL):
identity, brightness, color, contrast, sharpness, posterize, solarize, solarize_add,
invert, autocontrast, equalize. Their argument is the reference's own (PIL's
`ImageEnhance` factor, posterize's bits, solarize's threshold, ...): each policy maps
its magnitude to it (`fast_tfds.augment.policies`).

Geometric ops (`matrix(argument, height, width)`): shear_x, shear_y, translate_x,
translate_y, rotate. They do not touch pixels: each gives the 3x3 inverse map of the
output frame (output pixel -> input pixel, PIL's pixel-corner coordinates), and
`fast_tfds.augment.affine` folds them with the crop and the flip into one warp.
"""

from __future__ import annotations

from fast_tfds.augment.ops import (
    autocontrast,
    brightness,
    color,
    contrast,
    equalize,
    identity,
    invert,
    posterize,
    rotate,
    sharpness,
    shear_x,
    shear_y,
    solarize,
    solarize_add,
    translate_x,
    translate_y,
)

PIXEL = {
    "identity": identity.apply,
    "brightness": brightness.apply,
    "color": color.apply,
    "contrast": contrast.apply,
    "sharpness": sharpness.apply,
    "posterize": posterize.apply,
    "solarize": solarize.apply,
    "solarize_add": solarize_add.apply,
    "invert": invert.apply,
    "autocontrast": autocontrast.apply,
    "equalize": equalize.apply,
}
GEOMETRIC = {
    "shear_x": shear_x.matrix,
    "shear_y": shear_y.matrix,
    "translate_x": translate_x.matrix,
    "translate_y": translate_y.matrix,
    "rotate": rotate.matrix,
}
NAMES = tuple(PIXEL) + tuple(GEOMETRIC)
