"""Each op of the automatic-augmentation policies against PIL, which torchvision's
functional ops call for PIL pictures and timm calls directly.

Bounds (max abs difference in uint8 levels, on photo-like pictures): brightness, color,
contrast, sharpness 1 (PIL truncates its blends, OpenCV rounds); posterize, solarize,
solarize_add, invert, autocontrast, equalize 0 (the same integer tables); geometric ops
1 against PIL's bilinear `Image.transform(AFFINE)`, fill included.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from fast_tfds.augment import Augment, ops, warp, windows
from fast_tfds.samples import photos


def _solarize_add(image, add):
    lut = [min(255, i + int(add)) if i < 128 else i for i in range(256)]
    return image.point(lut * 3)


REFERENCES = {
    "brightness": (lambda im, f: ImageEnhance.Brightness(im).enhance(f), [0.01, 0.5, 1.5, 1.99], 1),
    "color": (lambda im, f: ImageEnhance.Color(im).enhance(f), [0.01, 0.4, 1.9], 1),
    "contrast": (lambda im, f: ImageEnhance.Contrast(im).enhance(f), [0.01, 0.5, 1.99], 1),
    "sharpness": (lambda im, f: ImageEnhance.Sharpness(im).enhance(f), [0.01, 0.5, 1.99], 1),
    "posterize": (lambda im, b: ImageOps.posterize(im, int(b)), [0, 2, 4, 7, 8], 0),
    "solarize": (lambda im, t: ImageOps.solarize(im, t), [0, 100.5, 128, 255, 256], 0),
    "solarize_add": (_solarize_add, [0, 33, 110], 0),
    "invert": (lambda im, _: ImageOps.invert(im), [0], 0),
    "autocontrast": (lambda im, _: ImageOps.autocontrast(im), [0], 0),
    "equalize": (lambda im, _: ImageOps.equalize(im), [0], 0),
    "identity": (lambda im, _: im, [0], 0),
}


@pytest.fixture(scope="module")
def pictures():
    rng = np.random.default_rng(0)
    pics = [np.asarray(photos.random_photo(rng, (120, 96))) for _ in range(4)]
    # A flat channel and a narrow range: autocontrast's and equalize's special cases.
    flat = pics[0].copy()
    flat[..., 2] = 77
    flat[..., 1] = 100 + flat[..., 1] % 3
    return [*pics, flat]


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_pixel_op_matches_pil(name, pictures):
    reference, arguments, bound = REFERENCES[name]
    worst = 0
    for picture in pictures:
        for argument in arguments:
            ours = picture.copy()
            ops.PIXEL[name](ours, argument)
            theirs = np.asarray(reference(Image.fromarray(picture), argument))
            worst = max(worst, int(np.abs(ours.astype(int) - theirs).max()))
    assert worst <= bound


def test_every_op_has_a_module_and_a_kind():
    assert set(ops.NAMES) == set(ops.PIXEL) | set(ops.GEOMETRIC)
    assert not set(ops.PIXEL) & set(ops.GEOMETRIC)


def _warped(picture, recipe, fill=(0, 0, 0)):
    h, w = picture.shape[:2]
    drawn = windows.sample(windows.Draw(Augment(crop=None, flip=False), 0, 0, [0]), [h], [w])
    plan = warp.plan([picture], drawn, [recipe], (h, w), fill=fill)
    out = np.zeros((1, h, w, 3), np.uint8)
    return warp.apply_into([picture], plan, out)[0]


@pytest.mark.parametrize(
    "name, argument",
    [
        ("rotate", 30.0),
        ("rotate", -135.0),
        ("rotate", 0.5),
        ("shear_x", 0.5),
        ("shear_x", -0.99),
        ("shear_y", -0.99),
        ("shear_y", 0.3),
        ("translate_x", 17),
        ("translate_y", -32),
    ],
)
def test_geometric_op_matches_pil_affine_transform(name, argument, pictures):
    picture = pictures[1]
    h, w = picture.shape[:2]
    coefficients = tuple(ops.GEOMETRIC[name](argument, h, w)[:2].reshape(-1))
    fill = (124, 116, 104)
    theirs = Image.fromarray(picture).transform(
        (w, h), Image.AFFINE, coefficients, Image.BILINEAR, fillcolor=fill
    )
    ours = _warped(picture, [(name, argument)], fill)
    assert np.abs(ours.astype(int) - np.asarray(theirs)).max() <= 1
    if name == "rotate":  # what torchvision's F.rotate and timm's rotate call
        rotated = Image.fromarray(picture).rotate(argument, Image.BILINEAR, fillcolor=fill)
        assert np.array_equal(np.asarray(rotated), np.asarray(theirs))


def test_two_geometric_ops_fill_like_two_pil_transforms(pictures):
    """Rotate then translate: the first op's fill moves with the second, and the second
    adds its own; a pixel op between them acts on the first fill only."""
    picture = pictures[2]
    h, w = picture.shape[:2]
    image = Image.fromarray(picture)
    for name, argument in [("rotate", 20.0), ("translate_x", -25)]:
        coefficients = tuple(ops.GEOMETRIC[name](argument, h, w)[:2].reshape(-1))
        image = image.transform((w, h), Image.AFFINE, coefficients, Image.NEAREST)
        if name == "rotate":
            image = ImageOps.invert(image)
    ours = _warped(picture, [("rotate", 20.0), ("invert", 0), ("translate_x", -25)])
    theirs = np.asarray(image)
    white, black = (theirs == 255).all(-1), (theirs == 0).all(-1)
    assert white.sum() > 100 and black.sum() > 100
    assert (ours[white] == 255).all() and (ours[black] == 0).all()
