"""Hostile image bytes: `normalize_image` either returns a JPEG that decodes completely
(in Pillow and in TensorFlow) or raises UndecodableImage; it never raises anything else,
never hangs, and refuses decompression bombs before decoding them."""

from __future__ import annotations

import io
import signal
import struct
import zlib
from datetime import timedelta

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from fast_tfds.building import images
from fast_tfds.samples import photos

# Per example: far above the few milliseconds a small image takes (and the seconds
# TensorFlow's first decode takes on a loaded machine), far below a hang.
HANG_SECONDS = 60


def _seeds() -> dict[str, bytes]:
    photo = photos.random_photo(np.random.default_rng(7), (48, 40))
    return {
        "jpeg": photos.jpeg_bytes(photo),
        "progressive_jpeg": photos.jpeg_bytes(photo, progressive=True),
        "cmyk_jpeg": photos.jpeg_bytes(photo.convert("CMYK")),
        "exif_jpeg": photos.exif_only_jpeg(photo),
        "png": photos.encoded(photo, "PNG"),
        "rgba_png": photos.encoded(photo.convert("RGBA"), "PNG"),
        "grey16_png": photos.encoded(Image.new("I;16", (24, 20), 300), "PNG"),
        "gif": photos.encoded(photo, "GIF"),
        "bmp": photos.encoded(photo, "BMP"),
    }


SEEDS = _seeds()


@st.composite
def mutated_images(draw) -> bytes:
    """A valid small image of some format, with 1-4 byte flips, cuts, insertions or deletions."""
    data = bytearray(SEEDS[draw(st.sampled_from(sorted(SEEDS)))])
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        # Hypothesis favours small numbers: scrambled, they land all over the file
        # instead of mostly on the format's magic bytes.
        where = draw(st.integers(0, len(data) - 1)) * 7919 % len(data)
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if kind == "flip":
            data[where] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":  # header fields: lengths and sizes to 0x00 or 0xff
            data[where] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80]))
        elif kind == "cut":
            del data[where:]
        elif kind == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[where : where + draw(st.integers(1, 64))]
    return bytes(data)


class Hang(Exception):
    pass


def _raise_hang(signum, frame):
    raise Hang(f"normalize_image ran over {HANG_SECONDS} s")


def assert_decodes_completely(jpeg: bytes) -> None:
    with Image.open(io.BytesIO(jpeg)) as image:
        assert image.format == "JPEG" and image.mode == "RGB"
        image.load()  # raises on truncated or corrupt data
        width, height = image.size
    decoded = tf.io.decode_jpeg(jpeg, channels=3)
    assert tuple(decoded.shape) == (height, width, 3)


@settings(
    max_examples=300,
    deadline=timedelta(seconds=HANG_SECONDS),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=mutated_images(), resize=st.booleans())
@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow's notes on mangled EXIF
def test_mutated_images_decode_completely_or_raise_undecodable(data, resize):
    previous = signal.signal(signal.SIGALRM, _raise_hang)
    signal.alarm(HANG_SECONDS)  # Pillow decodes in chunks from Python: the alarm gets in.
    try:
        result = images.normalize_image(data, (32, 32) if resize else None)
    except images.UndecodableImage as err:
        assert err.reason and "\n" not in err.reason
        return
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert_decodes_completely(result.jpeg)


# -- decompression bombs: a tiny file declaring a huge image ------------------------


def _jpeg_declaring(width: int, height: int) -> bytes:
    data = bytearray(photos.jpeg_bytes(Image.new("RGB", (16, 16))))
    sof = data.index(b"\xff\xc0")  # baseline frame header: length, precision, height, width
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def _gif_declaring(width: int, height: int) -> bytes:
    data = bytearray(photos.encoded(Image.new("P", (16, 16)), "GIF"))
    data[6:10] = struct.pack("<HH", width, height)  # logical screen
    frame = data.index(b"\x2c")  # image descriptor: left, top, width, height
    data[frame + 5 : frame + 9] = struct.pack("<HH", width, height)
    return bytes(data)


def _bmp_declaring(width: int, height: int) -> bytes:
    data = bytearray(photos.encoded(Image.new("RGB", (16, 16)), "BMP"))
    data[18:26] = struct.pack("<ii", width, height)  # BITMAPINFOHEADER width, height
    return bytes(data)


def _png_declaring(width: int, height: int) -> bytes:
    data = bytearray(photos.encoded(Image.new("RGB", (16, 16)), "PNG"))
    data[16:24] = struct.pack(">II", width, height)  # IHDR width, height
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))  # and its CRC
    return bytes(data)


@pytest.mark.parametrize("make", [_jpeg_declaring, _gif_declaring, _bmp_declaring, _png_declaring])
@pytest.mark.parametrize("size", [(30000, 30000), (7000, 7000)])
def test_headers_declaring_huge_images_are_refused_as_bombs(make, size):
    # 30000^2 is over Pillow's own bomb limit; 7000^2 (49 Mpx) only over ours.
    data = make(*size)
    assert len(data) < 2000
    with pytest.raises(images.UndecodableImage, match="decompression bomb") as excinfo:
        images.normalize_image(data)
    assert "\n" not in excinfo.value.reason
