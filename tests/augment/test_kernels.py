"""The batch kernel: windows readable from pictures whose pixels are their coordinates,
flips, colour jitter against torchvision's definitions, and the center crop against
an aspect-preserving resize + center crop."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import simplejpeg

from fast_tfds.augment import Augment, kernels, windows
from fast_tfds.samples import photos


def coordinates(height: int, width: int) -> np.ndarray:
    """R = x, G = y (both below 256), B = 128."""
    y, x = np.mgrid[:height, :width]
    return np.stack([x, y, np.full_like(x, 128)], axis=-1).astype(np.uint8)


def corners(out: np.ndarray) -> tuple[float, float, float, float]:
    """(x at the left, x at the right, y at the top, y at the bottom) of a coordinate picture."""
    return (
        float(out[:, 0, 0].mean()),
        float(out[:, -1, 0].mean()),
        float(out[0, :, 1].mean()),
        float(out[-1, :, 1].mean()),
    )


@pytest.mark.parametrize("num_threads", [1, 3])
def test_windows_are_read_back_from_the_output(num_threads):
    pictures = [coordinates(200, 250), coordinates(240, 180), coordinates(160, 255)] * 6
    n = len(pictures)
    heights = [p.shape[0] for p in pictures]
    widths = [p.shape[1] for p in pictures]
    drawn = windows.sample(windows.Draw(Augment(), 4, 2, np.arange(n)), heights, widths)
    out = np.zeros((n, 64, 64, 3), np.uint8)
    kernels.apply_into(pictures, drawn, out, num_threads=num_threads)
    assert drawn.flip.any() and not drawn.flip.all()
    for i in range(n):
        top, left, height, width = drawn.window(i)
        x0, x1, y0, y1 = corners(out[i])
        if drawn.flip[i]:
            x0, x1 = x1, x0
        # An output pixel covers height/64 source pixels; its value is their mean.
        ty, tx = height / 64 / 2 + 1, width / 64 / 2 + 1
        assert abs(x0 - (left + (width / 64 - 1) / 2)) <= tx, (i, x0, drawn.window(i))
        assert abs(x1 - (left + width - 1 - (width / 64 - 1) / 2)) <= tx
        assert abs(y0 - (top + (height / 64 - 1) / 2)) <= ty
        assert abs(y1 - (top + height - 1 - (height / 64 - 1) / 2)) <= ty
        assert (out[i, ..., 2] == 128).all()


def test_scaled_windows_cut_the_same_part_of_a_smaller_picture():
    # The same window drawn for a 240 x 200 picture, applied to that picture at half size.
    drawn = windows.sample(
        windows.Draw(Augment(flip=False), 0, 0, np.arange(20)), [240] * 20, [200] * 20
    )
    full = coordinates(240, 200)
    half = cv2.resize(full, (100, 120), interpolation=cv2.INTER_AREA)
    a = kernels.apply_into([full] * 20, drawn, np.zeros((20, 32, 32, 3), np.uint8))
    b = kernels.apply_into(
        [half] * 20, drawn, np.zeros((20, 32, 32, 3), np.uint8), scale_y=0.5, scale_x=0.5
    )
    # Half-size pixels: a window edge moves by at most one of them (2 coordinate units).
    assert np.abs(a.astype(int) - b.astype(int))[..., :2].max() <= 3


def test_a_flipped_output_is_the_mirror_of_the_unflipped_one():
    pictures = [coordinates(100, 120)] * 40
    flipped = windows.sample(windows.Draw(Augment(), 1, 0, np.arange(40)), [100] * 40, [120] * 40)
    plain = windows.Windows(**{**vars(flipped), "flip": np.zeros(40, bool)})
    a = kernels.apply_into(pictures, flipped, np.zeros((40, 24, 24, 3), np.uint8))
    b = kernels.apply_into(pictures, plain, np.zeros((40, 24, 24, 3), np.uint8))
    assert flipped.flip.sum() > 5
    assert np.array_equal(a[flipped.flip], b[flipped.flip][:, :, ::-1])
    assert np.array_equal(a[~flipped.flip], b[~flipped.flip])


def torchvision_jitter(image, brightness, contrast, saturation):
    """torchvision's adjust_brightness, adjust_contrast, adjust_saturation in that order,
    in float (its uint8 path clips after each; this picture never leaves 0..255)."""
    grey = np.array([0.2989, 0.587, 0.114])
    x = image.astype(np.float64) * brightness
    mean = (x @ grey).mean()
    x = contrast * x + (1 - contrast) * mean
    g = (x @ grey)[..., None]
    x = saturation * x + (1 - saturation) * g
    return np.clip(np.round(x), 0, 255)


def test_brightness_contrast_saturation_follow_torchvision():
    rng = np.random.default_rng(0)
    image = rng.integers(90, 160, size=(50, 60, 3)).astype(np.uint8)  # stays in range
    for brightness, contrast, saturation in [
        (1.2, 1, 1),
        (1, 0.7, 1),
        (1, 1, 1.4),
        (0.9, 1.2, 0.6),
    ]:
        out = image.copy()
        jitter_into(out, brightness, contrast, saturation, 0.0)
        expected = torchvision_jitter(image, brightness, contrast, saturation)
        assert np.abs(out - expected).max() <= 1, (brightness, contrast, saturation)


def test_hue_rotates_the_chroma_and_keeps_the_luma():
    rng = np.random.default_rng(1)
    image = rng.integers(60, 190, size=(40, 40, 3)).astype(np.uint8)
    yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
    before = image.astype(np.float64) @ yiq.T
    out = image.copy()
    jitter_into(out, 1, 1, 1, 0.5)  # half a turn: chroma negated
    after = out.astype(np.float64) @ yiq.T
    inside = (out > 0).all(-1) & (out < 255).all(-1)
    assert inside.mean() > 0.9
    assert np.abs(after[inside, 0] - before[inside, 0]).max() < 1.0
    assert np.abs(after[inside, 1:] + before[inside, 1:]).max() < 1.5
    out = image.copy()
    jitter_into(out, 1, 1, 1, 0.0)
    assert np.array_equal(out, image)


def test_jitter_clips_to_uint8():
    out = np.full((4, 4, 3), 200, np.uint8)
    jitter_into(out, 1.5, 1, 1, 0)
    assert (out == 255).all()


def jitter_into(
    image: np.ndarray, brightness: float, contrast: float, saturation: float, hue: float
) -> None:
    """Colour jitter of one [h, w, 3] uint8 RGB picture, in place: the kernel's finish of
    one example whose draws are these factors."""
    one = windows.Windows(
        *(np.zeros(1, np.int64) for _ in range(4)),
        flip=np.zeros(1, bool),
        brightness=np.array([brightness], np.float32),
        contrast=np.array([contrast], np.float32),
        saturation=np.array([saturation], np.float32),
        hue=np.array([hue], np.float32),
    )
    kernels.finish_into(image, one, 0)


def smooth_photo(rng, height, width) -> np.ndarray:
    """A photo blurred so that a sub-pixel shift costs little, as a JPEG decoded."""
    image = cv2.GaussianBlur(np.asarray(photos.random_photo(rng, (width, height))), (0, 0), 2.0)
    jpeg = simplejpeg.encode_jpeg(np.ascontiguousarray(image), quality=90)
    return simplejpeg.decode_jpeg(jpeg, colorspace="RGB", fastdct=True)


# Sizes whose aspect-preserving resize to a 256 shorter side is whole pixels, and
# whose center crop then starts at a whole pixel: the reference has no rounding.
@pytest.mark.parametrize("height, width", [(320, 440), (384, 480), (512, 320), (256, 320)])
def test_center_crop_matches_a_resize_then_center_crop(height, width):
    # Stated bound: mean absolute difference <= 0.75 levels (the two filters differ by
    # <= 0.4 here; a window 3 px off is >= 1.3 away).
    rng = np.random.default_rng(height + width)
    for _ in range(3):
        picture = smooth_photo(rng, height, width)
        scale = 256 / min(height, width)
        resized = cv2.resize(
            picture,
            (round(width * scale), round(height * scale)),
            interpolation=cv2.INTER_AREA,
        )
        top, left = (resized.shape[0] - 224) // 2, (resized.shape[1] - 224) // 2
        reference = resized[top : top + 224, left : left + 224].astype(int)
        drawn = windows.sample(
            windows.Draw(Augment.eval(), 0, 0, [0]), [height], [width], (224, 224)
        )
        out = kernels.apply_into([picture], drawn, np.zeros((1, 224, 224, 3), np.uint8))
        assert np.abs(out[0] - reference).mean() <= 0.75


def test_a_wrong_batch_is_one_line():
    drawn = windows.sample(windows.Draw(Augment(), 0, 0, [0, 1]), [10, 10], [10, 10])
    with pytest.raises(ValueError, match="2 pictures and 2 windows for an output of uint8"):
        kernels.apply_into([coordinates(10, 10)] * 2, drawn, np.zeros((3, 8, 8, 3), np.uint8))


def test_jitter_on_the_crop_or_on_the_output_gives_the_same_picture():
    # Crops smaller than the output are jittered before the resize (fewer pixels),
    # larger ones after: either way within rounding of jittering the resized crop.
    rng = np.random.default_rng(3)
    picture = smooth_photo(rng, 300, 400)
    augment = Augment(brightness=0.3, contrast=0.3, saturation=0.3, hue=0.05)
    drawn = windows.sample(windows.Draw(augment, 0, 0, np.arange(40)), [300] * 40, [400] * 40)
    out = kernels.apply_into([picture] * 40, drawn, np.zeros((40, 160, 160, 3), np.uint8))
    smaller = 0
    for i in range(40):
        top, left, height, width = drawn.window(i)
        smaller += height * width < 160 * 160
        reference = cv2.resize(
            picture[top : top + height, left : left + width],
            (160, 160),
            interpolation=cv2.INTER_AREA if max(height, width) > 320 else cv2.INTER_LINEAR,
        )
        kernels.finish_into(reference, drawn, i)
        assert np.abs(out[i].astype(int) - reference).mean() <= 0.6, (
            i,
            np.abs(out[i].astype(int) - reference).mean(),
        )
    assert 5 < smaller < 35  # both orders ran
