"""The warp kernel: crop + flip + geometric ops + pixel ops of a batch, one warp per picture.

For each example a `Plan` holds one affine map from its output pixels to its cached
picture's (`affine`), whether it has any geometry beyond crop and flip, and its steps
in the recipe's order: pixel ops, and the fills that geometric ops leave.

- No geometry (the crop and flip of today's kernel, and a policy that drew only pixel
  ops): the window is cut and resized exactly as `kernels` does (bilinear, the area
  filter past a 2x shrink), then flipped, so those pictures are today's to the bit.
- Geometry: one `cv2.warpAffine` (bilinear) from the picture's window straight to the
  output's size (through a 4-channel copy whose 4th channel carries the frame: see
  `warp_into`).
  Bilinear sampling aliases when it shrinks by more than about 2x, so a crop that
  shrinks more is first cut and resized to the output size as `kernels` does (the
  area filter), and the warp applies the flip and the geometric ops to that: two
  passes at the output's size, the reference's own order (crop + resize, then ops).
- Fill: where a geometric op brings in pixels from outside its frame, the reference
  paints the fill colour, and later pixel ops act on it. A fill step paints exactly
  the pixels whose nearest source falls outside the frame (torchvision's default
  NEAREST interpolation has that edge, and PIL's bilinear transform), at the point of
  the recipe where that op ran. The first fill step's frame is the window itself, so
  its pixels come with the warp: the 4-channel copy holds 255 in its 4th channel over
  the window and 0 in a ring of one pixel around it (the window's edge is rarely on
  a pixel's edge: its outermost pixels and the ring hold the levels that put the
  half-way crossing of the interpolated channel on the window's exact edge), and the
  warped 4th channel is below one half exactly where the source lies past the edge
  (to OpenCV's 1/32 pixel; at the corners the interpolation of two edges rounds
  them). Each later fill step is found by warping a blank frame with the map of the
  geometric ops from that step on.

- Whole-pixel translations (torchvision truncates its translations to whole pixels):
  where the geometric ops of a picture add up to one, the window is cut and resized
  as without geometry and shifted into place, and its fill painted by slices: a
  resize and a copy instead of a warp.

Pixel ops run on the warped output, in order. Where a pixel op came before a
geometric op in the recipe, it runs here on the final framing rather than the
intermediate one: exact for per-pixel ops up to the interpolation's rounding; for ops
that read statistics of the picture (contrast's mean, autocontrast's range, equalize's
histogram) the statistics come from the same scene at the final framing.

Everything per picture is OpenCV (the GIL released), in the threads of `kernels`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence

import cv2
import numpy as np

from fast_tfds.augment import affine, erasing, kernels, ops
from fast_tfds.augment.windows import Windows

# Past this shrink, bilinear sampling aliases: the same threshold as kernels' area filter.
AREA_SHRINK = 2.0


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

    warped: bool [n], geometry beyond crop and flip.
    boxes: [n, 4] (y0, y1, x0, x1) whole-pixel windows, for the unwarped path.
    flip: bool [n]. steps: per example, its `Step`s in order. fill: the RGB fill.
    erase: the boxes random erasing fills last, or None.
    shifts: int64 [n, 2] (x, y): where the geometry is a whole-pixel translation,
    output pixel q shows pixel q + shift of the crop; `shifted` bool [n] says where.
    opencv: [n, 2, 3], the warp's map (OpenCV's coordinates, output pixel -> the
    4-channel copy of `warp_into`), made for the batch at once; shrunk: bool [n],
    the window resized first (`AREA_SHRINK`); edges: uint8 [n, 8], the copy's 4th
    channel in the ring and in the outermost pixels at the left, right, top and bottom
    (`_copy_maps`). A fill step whose `remaining` is None paints the warp's own
    frame mask.
    """

    warped: np.ndarray
    boxes: np.ndarray
    flip: np.ndarray
    steps: list[list[Step]]
    fill: tuple[int, int, int]
    erase: erasing.Boxes | None = None
    shifts: np.ndarray | None = None
    shifted: np.ndarray | None = None
    opencv: np.ndarray | None = None
    shrunk: np.ndarray | None = None
    edges: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.flip)


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
    base = affine.window_matrices(windows, output_size, scale_y, scale_x)
    totals = np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
    warped = np.zeros(n, bool)
    shifted = np.zeros(n, bool)
    shifts = np.zeros((n, 2), np.int64)
    steps: list[list[Step]] = []
    for i, recipe in enumerate(recipes):
        maps = []
        own: list[Step] = []
        fills: list[Step] = []
        for name, argument in recipe:
            if callable(name):
                own.append(Step(name, float(argument)))
            elif name in ops.GEOMETRIC:
                maps.append(ops.GEOMETRIC[name](argument, height, width))
                fills.append(Step(None))
                own.append(fills[-1])
            elif name in ops.PIXEL:
                if name != "identity":
                    own.append(Step(ops.PIXEL[name], float(argument)))
            else:
                raise ValueError(f"op {name!r}: must be one of {', '.join(ops.NAMES)}")
        if maps:
            warped[i] = True
            totals[i] = total = maps[0] if len(maps) == 1 else affine.chain(maps)
            shift = _whole_shift(total)
            if shift is not None:
                shifted[i], shifts[i] = True, shift
            # Each fill step's map: the geometric ops from it to the end. The first
            # one's is the whole geometry, whose fill the warp itself finds (a
            # shifted crop is not warped: it paints its fills by slices).
            for k, step in enumerate(fills):
                if k or shift is not None:
                    rest = maps[k] if k == len(maps) - 1 else affine.chain(maps[k:])
                    step.remaining = affine.to_opencv(rest)
        steps.append(own)
    matrices = base @ totals
    scales = np.abs(np.stack([base[:, 0, 0], base[:, 1, 1]], axis=1))
    boxes = kernels.source_boxes(pictures, windows, scale_y, scale_x)
    shrunk = scales.max(axis=1) > AREA_SHRINK
    opencv, edges = _copy_maps(matrices, base, boxes, shrunk, output_size)
    return Plan(
        warped=warped,
        boxes=boxes,
        flip=np.asarray(windows.flip, bool),
        steps=steps,
        fill=tuple(int(v) for v in fill),
        erase=erase,
        shifts=shifts,
        shifted=shifted,
        opencv=opencv,
        shrunk=shrunk,
        edges=edges,
    )


def _copy_maps(matrices: np.ndarray, base: np.ndarray, boxes: np.ndarray, shrunk, output_size):
    """The 4-channel copy that `warp_into` warps: the window's box (resized to the
    output's size where `shrunk`) behind a ring of one pixel. Returns its maps, [n, 2, 3]
    (each output pixel -> the copy, OpenCV's coordinates, from `matrices`: output ->
    picture), and its edges' levels, uint8 [n, 8]: for the left, right, top and bottom
    edges of each window, the 4th channel's level in the copy's ring and in its
    outermost pixels, such that the bilinear interpolation between them crosses one half
    at the window's edge.

    `base` (output -> picture, the window alone) gives the window's edges in picture
    pixels; its box holds the pixels whose centres lie inside, so each edge is within
    half a pixel of the box's. Between the ring's centre (level a) and the outermost
    pixel's (level b), one pixel apart, the edge lies at 1/2 + u from the ring's centre,
    u the edge's distance inward from the box's edge: u >= 0: a = 0, b = 1 / (1 + 2u);
    u < 0: a = -2u / (1 - 2u), b = 1 (levels of 255)."""
    height, width = output_size
    y0, y1, x0, x1 = (boxes[:, k].astype(np.float64) for k in range(4))
    # The factors by which the copy scales the box: to the output's size where shrunk.
    fx = np.where(shrunk, width / (x1 - x0), 1.0)
    fy = np.where(shrunk, height / (y1 - y0), 1.0)
    to_copy = np.zeros((len(boxes), 3, 3))
    to_copy[:, 0, 0], to_copy[:, 1, 1], to_copy[:, 2, 2] = fx, fy, 1.0
    # Picture pixel p -> (p - x0) * fx, then + 1 for the ring.
    to_copy[:, 0, 2], to_copy[:, 1, 2] = 1.0 - x0 * fx, 1.0 - y0 * fy
    xa, xb = base[:, 0, 2], base[:, 0, 2] + base[:, 0, 0] * width
    ya, yb = base[:, 1, 2], base[:, 1, 2] + base[:, 1, 1] * height
    inward = np.stack(
        [
            (np.minimum(xa, xb) - x0) * fx,
            (x1 - np.maximum(xa, xb)) * fx,
            (np.minimum(ya, yb) - y0) * fy,
            (y1 - np.maximum(ya, yb)) * fy,
        ],
        axis=1,
    )
    u = np.clip(inward, -0.5, 0.5)
    inward, outward = np.maximum(u, 0.0), np.minimum(u, 0.0)  # finite in both branches
    ring = -2 * outward / (1 - 2 * outward)
    outermost = 1 / (1 + 2 * inward)
    levels = np.empty((len(boxes), 8), np.uint8)
    # Strictly below and at least one half, whatever the rounding.
    levels[:, 0::2] = np.minimum(np.floor(ring * 255), 127)
    levels[:, 1::2] = np.maximum(np.ceil(outermost * 255), 128)
    return affine.to_opencv(to_copy @ matrices), levels


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


def warp_into(
    picture: np.ndarray, matrix: np.ndarray, scales, out: np.ndarray, box, mask=None
) -> None:
    """out <- picture sampled at matrix (3x3, output -> picture, PIL coordinates) by one
    bilinear warp, where the crop's whole-pixel window is `box` (y0, y1, x0, x1). When
    the crop shrinks by more than `AREA_SHRINK` (scales: (x, y) picture pixels per
    output pixel), the window is first resized to the output size exactly as `kernels`
    does (the area filter), and the warp applies the rest of the map (flip and geometry)
    to that. mask: an [H, W] uint8 array, set to 255 where the source lies outside the
    window's box (the nearest source pixel is not the window's), else 0."""
    box = np.asarray(box, np.int64)[None]
    shrunk = np.array([max(scales) > AREA_SHRINK])
    matrix = np.asarray(matrix, np.float64)[None]
    opencv, edges = _copy_maps(matrix, matrix, box, shrunk, out.shape[:2])
    _warp(picture, opencv[0], bool(shrunk[0]), box[0].tolist(), edges[0].tolist(), out, mask)


def _outside_into(warped: np.ndarray, mask: np.ndarray) -> None:
    """mask <- 255 where the 4th channel of `warped` ([H, W, 4] uint8) is below 128.

    Read as one int32 per pixel, the 4th byte is the top one on a little-endian
    machine, and below 128 exactly where that int32 is >= 0: one vectorized compare
    (OpenCV's 4-channel inRange and its channel extraction are scalar loops, 4-8 times
    slower)."""
    if sys.byteorder == "little":
        cv2.compare(warped.view(np.int32)[..., 0], 0, cv2.CMP_GE, dst=mask)
    else:
        cv2.compare(np.ascontiguousarray(warped[..., 3]), 128, cv2.CMP_LT, dst=mask)


def _warp(
    picture, opencv: np.ndarray, shrunk: bool, box, edges, out: np.ndarray, mask, blank=False
) -> None:
    """`warp_into` with the map and the edges' levels made (`_copy_maps`).

    The warp reads a 4-channel copy of the window (OpenCV's bilinear warp is
    vectorized for 4 channels and not for 3: about twice as fast, the two conversions
    included) behind a ring of one pixel: the window's edge pixels repeated, as
    today's resize of the cut window repeats them, with about 0 in the 4th channel,
    which is about 255 over the window (see `_copy_maps`). The warped 4th channel
    is then below one half where the output pixel's source lies outside the window:
    the frame's fill, for free."""
    height, width = out.shape[:2]
    y0, y1, x0, x1 = box
    if shrunk:
        region = kernels.scratch("shrunk", (height, width, 3))
        kernels._resize_into(picture[y0:y1, x0:x1], region)
    else:
        region = picture[y0:y1, x0:x1]
    h, w = region.shape[:2]
    source = kernels.scratch("source", (h + 2, w + 2, 4))
    cv2.cvtColor(region, cv2.COLOR_RGB2RGBA, dst=source[1:-1, 1:-1])
    source[0, 1:-1], source[-1, 1:-1] = source[1, 1:-1], source[-2, 1:-1]
    source[:, 0], source[:, -1] = source[:, 1], source[:, -2]
    left, left_in, right, right_in, top, top_in, bottom, bottom_in = edges
    alpha = source[..., 3]
    alpha[:, 0], alpha[:, -1] = left, right
    if left_in < 255:
        alpha[:, 1] = left_in
    if right_in < 255:
        alpha[:, -2] = right_in
    # Rows after columns: where two edges meet, the lower level.
    np.minimum(alpha[0], top, out=alpha[0])
    np.minimum(alpha[-1], bottom, out=alpha[-1])
    if top_in < 255:
        np.minimum(alpha[1], top_in, out=alpha[1])
    if bottom_in < 255:
        np.minimum(alpha[-2], bottom_in, out=alpha[-2])
    warped = kernels.scratch("warped", (height, width, 4))
    # Past the ring: every such pixel is filled, and OpenCV samples it 6-14 times faster
    # as a constant than by repeating the edge (a sheared picture: 0.11 against 0.21 ms).
    # Repeated where a pixel op reads the picture before its fill is painted (`blank`
    # False), so that it reads no black.
    border = cv2.BORDER_CONSTANT if blank else cv2.BORDER_REPLICATE
    _warp_affine(source, opencv, warped, cv2.INTER_LINEAR, border)
    if mask is not None:
        _outside_into(warped, mask)
    cv2.cvtColor(warped, cv2.COLOR_RGBA2RGB, dst=out)


def _one(picture, batch: Plan, i: int, box, out: np.ndarray, fill: np.ndarray) -> None:
    y0, y1, x0, x1 = box
    steps = batch.steps[i]
    if batch.shifted[i]:
        crop = kernels.scratch("shifted", out.shape)
        kernels._resize_into(picture[y0:y1, x0:x1], crop)
        if batch.flip[i]:
            cv2.flip(crop, 1, dst=crop)
        _shift_into(crop, *batch.shifts[i].tolist(), out, fill)
        if steps[0].op is None:
            # The first fill step, first: its bands are those just painted.
            steps = steps[1:]
    elif batch.warped[i]:
        mask = kernels.scratch("mask", out.shape[:2])
        edges = batch.edges[i].tolist()
        blank = steps[0].op is None  # the fill comes first
        _warp(picture, batch.opencv[i], bool(batch.shrunk[i]), box, edges, out, mask, blank)
    else:
        kernels._resize_into(picture[y0:y1, x0:x1], out)
        if batch.flip[i]:
            cv2.flip(out, 1, dst=out)
    for step in steps:
        if step.op is not None:
            step.op(out, step.argument)
        elif step.remaining is None:
            cv2.copyTo(fill, mask, out)  # the warp's own frame
        else:
            _fill(out, step.remaining, fill)
    if batch.erase is not None:
        erasing.erase_into(out, batch.erase, i)


def _whole_shift(total: np.ndarray) -> tuple[int, int] | None:
    """(x, y) if the 3x3 map `total` is a translation by whole pixels, else None."""
    # Plain floats: numpy's comparisons cost more than the rest of a picture's plan.
    (a, b, x), (c, d, y) = total[:2].tolist()
    if (a, b, c, d) != (1.0, 0.0, 0.0, 1.0) or x != round(x) or y != round(y):
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
    mask = kernels.scratch("fill mask", (height, width))
    blank = kernels.scratch("blank frame", (height, width))  # never written: all zeros
    _warp_affine(blank, remaining, mask, cv2.INTER_NEAREST, cv2.BORDER_CONSTANT, 255)
    cv2.copyTo(fill, mask, out)


def _warp_affine(source, opencv: np.ndarray, dst: np.ndarray, interpolation, border, value=0):
    """dst <- source at `opencv` (2x3, OpenCV's coordinates: dst pixel -> source pixel),
    `border` (with `value` where constant) past the source's edges."""
    flags = interpolation | cv2.WARP_INVERSE_MAP
    size = (dst.shape[1], dst.shape[0])
    cv2.warpAffine(source, opencv, size, dst=dst, flags=flags, borderMode=border, borderValue=value)
