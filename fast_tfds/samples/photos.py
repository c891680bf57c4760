"""Photo-like images and their encodings, for the sample archives.

Content is cut from the real photographs that scikit-image ships, so that
decoding costs what real photos cost (flat synthetic images decode several
times faster).
"""

from __future__ import annotations

import functools
import io
import struct
from pathlib import Path

import numpy as np
from PIL import Image

# Colour photographs bundled inside the scikit-image wheel (no download needed).
_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "rocket.jpg",
    "hubble_deep_field.jpg",
    "retina.jpg",
    "ihc.png",
    "immunohistochemistry.png",
)
_GREY_PHOTOS = ("camera.png", "coins.png", "grass.png", "gravel.png", "brick.png", "moon.png")


@functools.lru_cache(maxsize=1)
def _source_photos() -> tuple[np.ndarray, ...]:
    import skimage

    folder = Path(skimage.__file__).parent / "data"
    photos = []
    for name in _PHOTOS + _GREY_PHOTOS:
        path = folder / name
        if path.exists():
            photos.append(np.asarray(Image.open(path).convert("RGB")))
    if len(photos) < 4:
        raise RuntimeError(f"scikit-image's bundled photos were not found in {folder}")
    return tuple(photos)


def random_photo(rng: np.random.Generator, size: tuple[int, int] | None = None) -> Image.Image:
    """A photo-like image: a random crop of a real photo, rescaled, flipped, tinted."""
    photos = _source_photos()
    src = photos[rng.integers(len(photos))]
    h, w = src.shape[:2]
    ch = int(rng.integers(min(h, 120), h + 1))
    cw = int(rng.integers(min(w, 120), w + 1))
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    crop = src[y : y + ch, x : x + cw].astype(np.float32)
    crop = crop * rng.uniform(0.8, 1.2, size=3) + rng.uniform(-20, 20)
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    image = Image.fromarray(np.clip(crop, 0, 255).astype(np.uint8))
    if size is None:
        # Kaggle's photos: mostly 300-500 px a side, mean ~400x360.
        size = (int(rng.integers(250, 500)), int(rng.integers(220, 500)))
    return image.resize(size, Image.Resampling.BILINEAR)


def jpeg_bytes(image: Image.Image, quality: int = 85, **kwargs) -> bytes:
    return encoded(image, "JPEG", quality=quality, **kwargs)


def encoded(image: Image.Image, fmt: str, **kwargs) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


def exif_only_jpeg(image: Image.Image) -> bytes:
    """A camera-style JPEG: an Exif APP1 header and no JFIF APP0 (TFDS drops these)."""
    data = jpeg_bytes(image, quality=88)
    assert data[2:4] == b"\xff\xe0", "expected Pillow to write a JFIF APP0 segment"
    app0_len = struct.unpack(">H", data[4:6])[0]
    exif = Image.Exif()
    exif[0x010F] = "SampleCam"  # Make
    payload = b"Exif\x00\x00" + exif.tobytes()
    app1 = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    return data[:2] + app1 + data[4 + app0_len :]
