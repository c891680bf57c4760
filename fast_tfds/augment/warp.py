"""The warp kernel: crop + flip + geometric ops + pixel ops of a batch, one warp per picture.

For each example a `Plan` holds one affine map from its output pixels to its cached
picture's (`affine`), whether it has any geometry beyond crop and flip, and its steps
in the recipe's order: pixel ops, and the fills that geometric ops leave.

- No geometry (the crop and flip of today's kernel, and a policy that drew only pixel
  ops): the window is cut and resized exactly as `kernels` does (bilinear, the area
  filter past a 2x shrink), then flipped, so those pictures are today's to the bit.
- Geometry: one `cv2.warpAffine` (bilinear) from the picture's window straight to the
  output's size (through a 4-channel copy: see `warp_into`).
  Bilinear sampling aliases when it shrinks by more than about 2x, so a crop that
  shrinks more is first cut and resized to the output size as `kernels` does (the
  area filter), and the warp applies the flip and the geometric ops to that: two
  passes at the output's size, the reference's own order (crop + resize, then ops).
- Fill: where a geometric op brings in pixels from outside its frame, the reference
  paints the fill colour, and later pixel ops act on it. A fill step paints exactly
  the pixels whose nearest source falls outside the frame (torchvision's default
  NEAREST interpolation has that edge), found by warping a blank frame with the map of
  the geometric ops from that step on, at the point of the recipe where that op ran.

- Whole-pixel translations (torchvision truncates its translations to whole pixels):
  where the geometric ops of a picture add up to one, the window is cut and resized
  as without geometry and shifted into place, and its fill painted by slices: a
  resize and a copy instead of a warp and a mask's warp.

Pixel ops run on the warped output, in order. Where a pixel op came before a
geometric op in the recipe, it runs here on the final framing rather than the
intermediate one: exact for per-pixel ops up to the interpolation's rounding; for ops
that read statistics of the picture (contrast's mean, autocontrast's range, equalize's
histogram) the statistics come from the same scene at the final framing.

Everything per picture is OpenCV (the GIL released), in the threads of `kernels`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence

import cv2
import numpy as np

from fast_tfds.augment import affine, erasing, kernels, ops
from fast_tfds.augment.windows import Windows

# Past this shrink, bilinear sampling aliases: the same threshold as kernels' area filter.
AREA_SHRINK = 2.0
_MARGIN = 2  # picture pixels around a window that the bilinear filter may read


@dataclasses.dataclass
class Step:
    """One step of an example's recipe, after the warp: a pixel op with its argument, or
    (`op` None) a fill where `remaining` (2x3, OpenCV coordinates: output pixel -> the
    frame of the geometric op that made the fill) leaves the frame."""

    op: Callable[[np.ndarray, float], None] | None
    argument: float = 0.0
    remaining: np.ndarray | None = None


@dataclasses.dataclass
class Plan:
    """A batch's per-example maps and steps (see the module's docstring).

    matrices: [n, 3, 3] output pixel -> cached picture pixel (PIL coordinates).
    scales: [n, 2] (x, y) cached picture pixels per output pixel of the crop.
    warped: bool [n], geometry beyond crop and flip.
    boxes: [n, 4] (y0, y1, x0, x1) whole-pixel windows, for the unwarped path.
    flip: bool [n]. steps: per example, its `Step`s in order. fill: the RGB fill.
    erase: the boxes random erasing fills last, or None.
    shifts: int64 [n, 2] (x, y): where the geometry is a whole-pixel translation,
    output pixel q shows pixel q + shift of the crop; `shifted` bool [n] says where.
    """

    matrices: np.ndarray
    scales: np.ndarray
    warped: np.ndarray
    boxes: np.ndarray
    flip: np.ndarray
    steps: list[list[Step]]
    fill: tuple[int, int, int]
    erase: erasing.Boxes | None = None
    shifts: np.ndarray | None = None
    shifted: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.matrices)


def plan(
    pictures: Sequence[np.ndarray],
    windows: Windows,
    recipes: Sequence[Sequence[tuple]],
    output_size: tuple[int, int],
    *,
    fill: tuple[int, int, int] = (0, 0, 0),
    scale_y=None,
    scale_x=None,
    erase: erasing.Boxes | None = None,
) -> Plan:
    """Each example's window and flip (`windows`), then its recipe: (op, argument) pairs
    in order, an op being a name of `ops.NAMES` (arguments as the op modules take them)
    or a pixel op's callable, in the output frame of `output_size` (height, width); then
    the erased boxes, if any."""
    n = len(windows)
    if len(recipes) != n or len(pictures) != n:
        raise ValueError(f"{len(pictures)} pictures, {n} windows, {len(recipes)} recipes")
    height, width = output_size
    base = affine.window_matrices(
        windows.top,
        windows.left,
        windows.height,
        windows.width,
        windows.flip,
        output_size,
        scale_y,
        scale_x,
    )
    matrices = base.copy()
    warped = np.zeros(n, bool)
    shifted = np.zeros(n, bool)
    shifts = np.zeros((n, 2), np.int64)
    steps: list[list[Step]] = []
    for i, recipe in enumerate(recipes):
        maps = []
        own: list[Step] = []
        for name, argument in recipe:
            if callable(name):
                own.append(Step(name, float(argument)))
            elif name in ops.GEOMETRIC:
                maps.append(ops.GEOMETRIC[name](argument, height, width))
                own.append(Step(None, remaining=None))
            elif name in ops.PIXEL:
                if name != "identity":
                    own.append(Step(ops.PIXEL[name], float(argument)))
            else:
                raise ValueError(f"op {name!r}: must be one of {', '.join(ops.NAMES)}")
        if maps:
            warped[i] = True
            total = affine.chain(maps)
            matrices[i] = base[i] @ total
            shift = _whole_shift(total)
            if shift is not None:
                shifted[i], shifts[i] = True, shift
            # Each fill step's map: the geometric ops from it to the end.
            k = 0
            for step in own:
                if step.op is None:
                    step.remaining = affine.to_opencv(affine.chain(maps[k:]))
                    k += 1
        steps.append(own)
    return Plan(
        matrices=matrices,
        scales=np.abs(np.stack([base[:, 0, 0], base[:, 1, 1]], axis=1)),
        warped=warped,
        boxes=kernels.source_boxes(pictures, windows, scale_y, scale_x),
        flip=np.asarray(windows.flip, bool),
        steps=steps,
        fill=tuple(int(v) for v in fill),
        erase=erase,
        shifts=shifts,
        shifted=shifted,
    )


def apply_into(
    pictures: Sequence[np.ndarray], batch: Plan, out: np.ndarray, *, num_threads: int = 1
) -> np.ndarray:
    """Each picture's output, cut by its plan into out[i] ([B, H, W, 3] uint8). Returns out."""
    n = len(batch)
    kernels.check_batch(pictures, n, out, "plan")
    fill = np.empty(out.shape[1:], np.uint8)
    fill[...] = batch.fill
    boxes = batch.boxes.tolist()
    kernels._parallel(n, num_threads, lambda i: _one(pictures[i], batch, i, boxes[i], out[i], fill))
    return out


def warp_into(picture: np.ndarray, matrix: np.ndarray, scales, out: np.ndarray, box) -> None:
    """out <- picture sampled at matrix (3x3, output -> picture, PIL coordinates) by one
    bilinear warp, where the crop's whole-pixel window is `box` (y0, y1, x0, x1). When
    the crop shrinks by more than `AREA_SHRINK` (scales: (x, y) picture pixels per
    output pixel), the window is first resized to the output size exactly as `kernels`
    does (the area filter), and the warp applies the rest of the map (flip and geometry)
    to that.

    The warp reads only the window and a margin around it: every output pixel whose
    source lies further out is painted by a fill step. It runs on 4 channels (OpenCV's
    bilinear warp is vectorized for 4 channels and not for 3: about twice as fast, the
    two conversions included)."""
    height, width = out.shape[:2]
    y0, y1, x0, x1 = box
    if max(scales) > AREA_SHRINK:
        region = _scratch("shrunk", (height, width, 3))
        kernels._resize_into(picture[y0:y1, x0:x1], region)
        # The resized window's pixels: picture pixel p -> ((p - x0) * width / (x1 - x0), ...).
        fx, fy = width / (x1 - x0), height / (y1 - y0)
        matrix = np.array([[fx, 0, -x0 * fx], [0, fy, -y0 * fy], [0, 0, 1]]) @ matrix
    else:
        y0, x0 = max(0, y0 - _MARGIN), max(0, x0 - _MARGIN)
        y1, x1 = min(picture.shape[0], y1 + _MARGIN), min(picture.shape[1], x1 + _MARGIN)
        region = picture[y0:y1, x0:x1]
        matrix = np.array([[1.0, 0, -x0], [0, 1.0, -y0], [0, 0, 1]]) @ matrix
    source = _scratch("source", (*region.shape[:2], 4))
    cv2.cvtColor(region, cv2.COLOR_RGB2RGBA, dst=source)
    warped = _scratch("warped", (height, width, 4))
    cv2.warpAffine(
        source,
        affine.to_opencv(matrix),
        (width, height),
        dst=warped,
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REPLICATE,
    )
    cv2.cvtColor(warped, cv2.COLOR_RGBA2RGB, dst=out)


def _one(picture, batch: Plan, i: int, box, out: np.ndarray, fill: np.ndarray) -> None:
    y0, y1, x0, x1 = box
    if batch.shifted is not None and batch.shifted[i]:
        crop = _scratch("shifted", out.shape)
        kernels._resize_into(picture[y0:y1, x0:x1], crop)
        if batch.flip[i]:
            cv2.flip(crop, 1, dst=crop)
        _shift_into(crop, *batch.shifts[i].tolist(), out, fill)
    elif batch.warped[i]:
        warp_into(picture, batch.matrices[i], batch.scales[i], out, box)
    else:
        kernels._resize_into(picture[y0:y1, x0:x1], out)
        if batch.flip[i]:
            cv2.flip(out, 1, dst=out)
    for step in batch.steps[i]:
        if step.op is not None:
            step.op(out, step.argument)
        else:
            _fill(out, step.remaining, fill)
    if batch.erase is not None:
        erasing.erase_into(out, batch.erase, i)


_local = threading.local()


def _whole_shift(total: np.ndarray) -> tuple[int, int] | None:
    """(x, y) if the 3x3 map `total` is a translation by whole pixels, else None."""
    if not np.array_equal(total[:2, :2], np.eye(2)):
        return None
    x, y = total[0, 2], total[1, 2]
    if x != round(x) or y != round(y):
        return None
    return round(x), round(y)


def _spans(shift: int, size: int) -> tuple[slice, slice]:
    """(destination, source) of a shift by whole pixels along a side of `size`:
    destination pixel q shows source pixel q + shift."""
    shift = max(-size, min(size, shift))
    return slice(max(0, -shift), size - max(0, shift)), slice(max(0, shift), size + min(0, shift))


def _shift_into(crop: np.ndarray, x: int, y: int, out: np.ndarray, fill: np.ndarray) -> None:
    """out[q] = crop[q + (x, y)] where that lies inside, `fill` elsewhere (a fill step
    paints the same pixels again at its place in the recipe; until then they hold the
    fill rather than a stale picture)."""
    height, width = out.shape[:2]
    (dy, sy), (dx, sx) = _spans(y, height), _spans(x, width)
    out[dy, dx] = crop[sy, sx]
    _paint_outside(out, dy, dx, fill)


def _paint_outside(out: np.ndarray, rows: slice, columns: slice, fill: np.ndarray) -> None:
    """`fill` everywhere but out[rows, columns]."""
    out[: rows.start], out[rows.stop :] = fill[: rows.start], fill[rows.stop :]
    out[rows, : columns.start] = fill[rows, : columns.start]
    out[rows, columns.stop :] = fill[rows, columns.stop :]


def _fill(out: np.ndarray, remaining: np.ndarray, fill: np.ndarray) -> None:
    """Paints `fill` where the nearest pixel of remaining @ q lies outside the frame."""
    height, width = out.shape[:2]
    a, t = remaining[:, :2], remaining[:, 2]
    if np.array_equal(a, np.eye(2)) and np.array_equal(t, np.round(t)):
        # A whole-pixel translation: the pixels outside are bands, painted by slices.
        rows, columns = _spans(int(t[1]), height)[0], _spans(int(t[0]), width)[0]
        _paint_outside(out, rows, columns, fill)
        return
    frame = getattr(_local, "frame", None)
    if frame is None or frame.shape != (height, width):
        frame = _local.frame = np.zeros((height, width), np.uint8)
        _local.mask = np.empty((height, width), np.uint8)
    mask = _local.mask
    cv2.warpAffine(
        frame,
        remaining,
        (width, height),
        dst=mask,
        flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=255,
    )
    cv2.copyTo(fill, mask, out)


def _scratch(name: str, shape: tuple[int, int, int]) -> np.ndarray:
    """This thread's reused buffer `name` viewed as `shape` (a fresh allocation per
    picture would be a new mapping, whose page faults cost more than the work)."""
    size = shape[0] * shape[1] * shape[2]
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    buffer = buffers.get(name)
    if buffer is None or buffer.size < size:
        buffer = buffers[name] = np.empty(max(size, 264 * 352 * 4), np.uint8)
    return buffer[:size].reshape(shape)
