"""Sample source archives with the real layouts, for offline builds, tests and benchmarks.

The real archives cannot be downloaded everywhere (CI has no internet), so this
writes look-alikes: same member paths, same kinds of broken and disguised
files, and photo content cut from the real photographs that scikit-image ships,
so that decoding costs what real photos cost (mean size ~400x360 like the Kaggle
images; flat synthetic images would decode several times faster).
"""

from __future__ import annotations

import functools
import io
import struct
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

CATS_ZIP_NAME = "kagglecatsanddogs_5340.zip"

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
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, **kwargs)
    return out.getvalue()


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


def quirk_files(
    rng: np.random.Generator, image_size: tuple[int, int] | None = None
) -> dict[str, bytes]:
    """One file of each kind found in the real archives, by what it really is.

    Keys name the quirk; the builders must keep the first group and skip the rest.
    """
    photo = random_photo(rng, image_size)
    good = jpeg_bytes(photo)
    return {
        # Kept: they decode completely.
        "exif_jpeg": exif_only_jpeg(photo),
        "png_named_jpg": encoded(photo, "PNG"),
        "rgba_png": encoded(photo.convert("RGBA"), "PNG"),
        "gif_named_jpg": encoded(photo, "GIF"),
        "bmp_named_jpg": encoded(photo, "BMP"),
        "cmyk_jpeg": jpeg_bytes(photo.convert("CMYK")),
        "grey_jpeg": jpeg_bytes(photo.convert("L")),
        "progressive_jpeg": jpeg_bytes(photo, progressive=True),
        # Skipped: they do not.
        "empty": b"",
        "truncated_jpeg": good[: len(good) // 2],
        "text_named_jpg": b"<html>This is not an image</html>\n",
    }


KEPT_QUIRKS = (
    "exif_jpeg",
    "png_named_jpg",
    "rgba_png",
    "gif_named_jpg",
    "bmp_named_jpg",
    "cmyk_jpeg",
    "grey_jpeg",
    "progressive_jpeg",
)
SKIPPED_QUIRKS = ("empty", "truncated_jpeg", "text_named_jpg")


def write_cats_zip(
    path: str | Path,
    images_per_class: int = 100,
    *,
    seed: int = 0,
    quirks: bool = True,
    image_size: tuple[int, int] | None = None,
) -> dict[str, int]:
    """Writes a kagglecatsanddogs_5340.zip look-alike; returns what it holds.

    Layout as Microsoft's: PetImages/Cat/N.jpg, PetImages/Dog/N.jpg, a
    Thumbs.db in each folder, 'readme[1].txt' and the licence PDF at the root.
    With `quirks`, each class also gets one file of every quirk, numbered after
    the ordinary images. `image_size` (width, height) fixes the size of every
    image (tiny dummy data); by default sizes vary like the real photos'.
    """
    rng = np.random.default_rng(seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = {"images": 0, "kept_quirks": 0, "skipped_quirks": 0, "other_members": 0}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("CDLA-Permissive-2.0.pdf", b"%PDF-1.4\n% sample licence\n%%EOF\n")
        zf.writestr("readme[1].txt", b"Sample of the Kaggle Cats and Dogs layout.\n")
        counts["other_members"] += 2
        for label in ("Cat", "Dog"):
            for i in range(images_per_class):
                quality = int(rng.integers(75, 96))
                photo = random_photo(rng, image_size)
                zf.writestr(f"PetImages/{label}/{i}.jpg", jpeg_bytes(photo, quality))
                counts["images"] += 1
            if quirks:
                for j, (kind, data) in enumerate(quirk_files(rng, image_size).items()):
                    zf.writestr(f"PetImages/{label}/{images_per_class + j}.jpg", data)
                    counts["kept_quirks" if kind in KEPT_QUIRKS else "skipped_quirks"] += 1
            zf.writestr(f"PetImages/{label}/Thumbs.db", b"\xd0\xcf\x11\xe0" + bytes(60))
            counts["other_members"] += 1
    counts["expected_examples"] = counts["images"] + counts["kept_quirks"]
    return counts
