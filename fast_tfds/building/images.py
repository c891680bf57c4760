"""Turn whatever a source archive holds into a clean 3-channel baseline JPEG.

Both datasets contain files that are not what their name says: PNGs, GIFs and
BMPs named .jpg, CMYK and greyscale JPEGs, empty or truncated files. Every file
that decodes completely is kept and re-encoded once at build time, so that the
reader can always use the fast `tf.io.decode_jpeg(channels=3)` path and never
sees a libjpeg warning. Anything else raises `UndecodableImage` with a short
reason that the builders count and report.
"""

from __future__ import annotations

import dataclasses
import io
import threading
import warnings

from PIL import Image, UnidentifiedImageError

# Baseline (not progressive) at 90: progressive JPEGs and higher qualities decode
# slower for no visible gain at 224x224 (docs/design.md, "Figures behind the code").
JPEG_QUALITY = 90

# The photos in both datasets are a few megapixels at most. Anything declaring
# more than this is treated as a decompression bomb rather than allocated.
MAX_PIXELS = 40_000_000


class UndecodableImage(ValueError):
    """The bytes are not an image that decodes completely; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class NormalizedImage:
    jpeg: bytes
    # Size of the source image, before any resize: boxes are relative to it.
    source_width: int
    source_height: int
    source_format: str


def normalize_image(data: bytes, size: tuple[int, int] | None = None) -> NormalizedImage:
    """Decodes `data` completely and re-encodes it as an RGB baseline JPEG.

    Args:
      data: the file's bytes, whatever their real format.
      size: (height, width) to resize to, or None to keep the source size.

    Raises:
      UndecodableImage: empty, not an image, truncated, corrupt or too large.
    """
    if not data:
        raise UndecodableImage("empty file")
    try:
        image = _open(data)
        source_format = image.format or "unknown"
        width, height = image.size
        if width * height > MAX_PIXELS:
            raise UndecodableImage(
                f"declares {width}x{height} pixels, over the {MAX_PIXELS:,} limit "
                "(decompression bomb?)"
            )
        if size is not None and source_format == "JPEG":
            # Let libjpeg decode at 1/2, 1/4 or 1/8 scale when the target is
            # small enough: several times faster and still >= the target.
            image.draft("RGB", (size[1], size[0]))
        image.load()
        rgb = _to_rgb(image)
        if size is not None and rgb.size != (size[1], size[0]):
            rgb = rgb.resize((size[1], size[0]), Image.Resampling.BILINEAR)
        out = io.BytesIO()
        rgb.save(out, format="JPEG", quality=JPEG_QUALITY, progressive=False)
    except UndecodableImage:
        raise
    except UnidentifiedImageError:
        raise UndecodableImage("not an image") from None
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as err:
        message = str(err) or type(err).__name__
        if "truncated" in message:
            raise UndecodableImage("truncated image") from None
        raise UndecodableImage(f"corrupt image: {message}") from None
    return NormalizedImage(out.getvalue(), width, height, source_format)


# Image.open is serialized (see _open): it only reads the header, a small part of the work.
_OPEN_LOCK = threading.Lock()


def _open(data: bytes) -> Image.Image:
    """Image.open, without Pillow's warning about images over its own pixel limit.

    Pillow warns between its limit and twice that (and raises above); our
    MAX_PIXELS is lower, so we refuse those images ourselves. Silencing the
    warning changes the process-wide warnings filters for a moment: the lock
    keeps the builders' threads from interleaving there, so each puts back
    exactly what it found.
    """
    with _OPEN_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return Image.open(io.BytesIO(data))


def _to_rgb(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        # Transparent pixels become white, not the black of a plain convert.
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit greyscale: scale to 8 bits instead of clipping.
        import numpy as np

        array = np.asarray(image, dtype=np.float64)
        peak = array.max() or 1.0
        return Image.fromarray((array * (255.0 / peak)).astype("uint8")).convert("RGB")
    return image.convert("RGB")
