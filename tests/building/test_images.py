"""Image normalization: what is kept, what is skipped and why, and that the output is clean."""

import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from fast_tfds.building import images
from fast_tfds.samples import cats_vs_dogs as cats_archive
from fast_tfds.samples import photos


@pytest.fixture(scope="module")
def quirks():
    return cats_archive.quirk_files(np.random.default_rng(0), image_size=(120, 90))


@pytest.mark.parametrize("kind", cats_archive.KEPT_QUIRKS)
@pytest.mark.parametrize("size", [None, (224, 224)])
def test_every_decodable_format_becomes_an_rgb_baseline_jpeg(quirks, kind, size):
    result = images.normalize_image(quirks[kind], size)
    out = Image.open(io.BytesIO(result.jpeg))
    assert out.format == "JPEG" and out.mode == "RGB"
    assert not out.info.get("progressive") and not out.info.get("progression")
    assert out.size == ((120, 90) if size is None else (224, 224))
    assert (result.source_width, result.source_height) == (120, 90)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("empty", "empty file"),
        ("truncated_jpeg", "truncated image"),
        ("text_named_jpg", "not an image"),
    ],
)
def test_undecodable_files_raise_with_a_reason(quirks, kind, reason):
    with pytest.raises(images.UndecodableImage) as excinfo:
        images.normalize_image(quirks[kind], (224, 224))
    assert excinfo.value.reason == reason


def test_decompression_bomb_is_refused_before_decoding():
    # A valid PNG header declaring 20000 x 20000 pixels; the data is tiny.
    bomb = photos.encoded(Image.new("L", (20000, 20000)), "PNG")
    assert len(bomb) < 1_000_000
    with pytest.raises(images.UndecodableImage, match="decompression bomb"):
        images.normalize_image(bomb)


def test_transparent_pixels_become_white():
    rgba = Image.new("RGBA", (8, 8), (10, 20, 30, 0))
    out = images.normalize_image(photos.encoded(rgba, "PNG"))
    pixels = np.asarray(Image.open(io.BytesIO(out.jpeg)))
    assert pixels.min() > 240


_DECODE_ALL = textwrap.dedent(
    """
    import sys, tensorflow as tf
    for path in sys.argv[1:]:
        data = open(path, "rb").read()
        image = tf.io.decode_jpeg(data, channels=3)
        h, w = int(image.shape[0]), int(image.shape[1])
        tf.image.decode_and_crop_jpeg(data, [h // 4, w // 4, h // 2, w // 2], channels=3)
    print("decoded", len(sys.argv) - 1)
    """
)


def _tf_decode_stderr(paths) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}
    done = subprocess.run(
        [sys.executable, "-c", _DECODE_ALL, *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,  # a child that imports TensorFlow, on a loaded machine
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"decoded {len(paths)}" in done.stdout
    return done.stderr


def test_stored_jpegs_decode_in_tensorflow_without_warnings(quirks, tmp_path):
    good = photos.jpeg_bytes(photos.random_photo(np.random.default_rng(1), (64, 48)))
    # Control: a data segment cut short (end marker kept) makes libjpeg warn.
    corrupt = good[: len(good) * 3 // 4] + b"\xff\xd9"
    control = tmp_path / "control.jpg"
    control.write_bytes(corrupt)
    paths = []
    for kind in cats_archive.KEPT_QUIRKS:
        for size in (None, (224, 224)):
            path = tmp_path / f"{kind}_{size is None}.jpg"
            path.write_bytes(images.normalize_image(quirks[kind], size).jpeg)
            paths.append(path)
    assert "Corrupt JPEG data" in _tf_decode_stderr([control]), "the control should warn"
    stderr = _tf_decode_stderr(paths)
    for marker in ("Corrupt JPEG", "Premature end", "extraneous bytes", "Invalid"):
        assert marker not in stderr, stderr[-2000:]
