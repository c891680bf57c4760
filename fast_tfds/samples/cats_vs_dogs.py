"""The Cats vs Dogs sample: a look-alike of Microsoft's kagglecatsanddogs_5340.zip.

The real archives cannot be downloaded everywhere (CI has no internet), so this
writes look-alikes: same member paths, same kinds of broken and disguised
files, and photo content cut from the real photographs that scikit-image ships,
so that decoding costs what real photos cost (mean size ~400x360 like the Kaggle
images; flat synthetic images would decode several times faster).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from fast_tfds.samples.photos import encoded, exif_only_jpeg, jpeg_bytes, random_photo

CATS_ZIP_NAME = "kagglecatsanddogs_5340.zip"


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
