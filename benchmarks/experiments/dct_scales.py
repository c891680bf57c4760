"""Which of libjpeg-turbo's n/8 DCT scales pay, on the benchmark's photos, one thread.

The figures behind the any-size decoder's choice of scale (docs/design.md), from the
root of the repository:

    python benchmarks/experiments/dct_scales.py --photos 48 --rounds 3

The photos are made as the benchmark's sample makes them (`fast_tfds.samples.photos`:
crops of scikit-image's photographs, 220-500 px a side, JPEG quality 75-95). Every
figure is CPU time of this process (`time.process_time`, TensorFlow held to one
thread), the best of the interleaved rounds, so that other processes on the machine
count less than they would in wall time. Sections:

1. decode only, at each scale n/8 (forced through simplejpeg's min_height/min_width);
2. per output size, decode + resize by each strategy, and its mean absolute distance
   (0-255) to `tf.io.decode_jpeg` + `tf.image.resize(antialias=True)`;
3. past 2x after the 1/8 scale (photos 4-8x larger): the filter for the rest;
4. a crop window (random-resized crops, area 0.08-1): TensorFlow's decode of the
   crop region alone (`tf.io.decode_and_crop_jpeg`) against its decode of the whole,
   at each ratio, and our whole decode at the crop-aware scale then crop;
5. our decoder against TensorFlow's decode + resize (plain and antialiased) in a
   one-thread tf.data map over the same bytes.
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2
import numpy as np
import simplejpeg
import tensorflow as tf
from PIL import Image

from fast_tfds.core import jpeg_blocks
from fast_tfds.samples import photos

SIZES = (96, 160, 224, 299)
ALLOWED = (1, 2, 4, 8)  # The scales (n/8) with a SIMD inverse DCT in libjpeg-turbo.


def sample(n: int, seed: int = 0, scale: float = 1.0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        photo = photos.random_photo(rng)
        if scale != 1.0:
            w, h = photo.size
            photo = photo.resize((round(w * scale), round(h * scale)), Image.Resampling.BICUBIC)
        out.append(photos.jpeg_bytes(photo, int(rng.integers(75, 96))))
    return out


def decode_at(data: bytes, eighths: int) -> np.ndarray:
    h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    return simplejpeg.decode_jpeg(
        data,
        colorspace="RGB",
        fastdct=True,
        min_height=math.ceil(h * eighths / 8),
        min_width=math.ceil(w * eighths / 8),
    )


def covering(h: int, w: int, size: int, scales) -> int:
    for n in scales:
        if h * n / 8 >= size and w * n / 8 >= size:
            return n
    return 8


def integer_area_then_linear(image: np.ndarray, size: int) -> np.ndarray:
    """Averages k x k pixels (OpenCV's fast path, an exact multiple of k), then bilinear < 2x."""
    k = min(image.shape[0], image.shape[1]) // size
    if k >= 2:
        h, w = image.shape[0] // k, image.shape[1] // k
        exact = np.ascontiguousarray(image[: h * k, : w * k])
        image = cv2.resize(exact, (w, h), interpolation=cv2.INTER_AREA)
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)


def pyr_then_linear(image: np.ndarray, size: int) -> np.ndarray:
    while image.shape[0] >= 2 * size and image.shape[1] >= 2 * size:
        image = cv2.pyrDown(image)
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)


def linear(image, size):
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)


def blur_then_linear(image, size):
    """A 3x3 Gaussian blur first where the shrink left is past 1.5x (not past 2x here)."""
    if max(image.shape[:2]) > 1.5 * size:
        image = cv2.GaussianBlur(image, (3, 3), 0)
    return linear(image, size)


def area(image, size):
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_AREA)


def strategies(size: int) -> dict:
    def scaled(scales, rest):
        def run(data):
            h, w, _, _ = simplejpeg.decode_jpeg_header(data)
            return rest(decode_at(data, covering(h, w, size, scales)), size)

        return run

    def ours(data):
        return jpeg_blocks.decode_resized_into(data, np.empty((size, size, 3), np.uint8))

    return {
        "full + bilinear (plain resize)": lambda d: linear(decode_at(d, 8), size),
        "full + area": lambda d: area(decode_at(d, 8), size),
        "any n/8 + bilinear": scaled(range(1, 9), linear),
        "any n/8 + area": scaled(range(1, 9), area),
        "1,2,4,8/8 + bilinear": scaled(ALLOWED, linear),
        "1,2,4,8/8 + area": scaled(ALLOWED, area),
        "1,2,4,8/8 + 3x3 blur past 1.5x + bilinear": scaled(ALLOWED, blur_then_linear),
        "jpeg_blocks.decode_resized_into": ours,
    }


def reference(data: bytes, size: int) -> np.ndarray:
    image = tf.image.resize(tf.io.decode_jpeg(data, channels=3), (size, size), antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8).numpy()


def distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def timed(fn, items, rounds_out: list) -> None:
    start = time.process_time()
    for item in items:
        fn(item)
    rounds_out.append((time.process_time() - start) / len(items))


def best_rates(variants: dict, items, rounds: int) -> dict:
    """{name: images/s of CPU time}, best of interleaved rounds."""
    times = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            timed(fn, items, times[name])
    return {name: 1 / min(t) for name, t in times.items()}


def section_scales(jpegs, rounds):
    print("\n1. decode only, one thread (images/s of CPU time, best of rounds)")
    variants = {f"{n}/8": (lambda d, n=n: decode_at(d, n)) for n in range(8, 0, -1)}
    rates = best_rates(variants, jpegs, rounds)
    full = rates["8/8"]
    for name, rate in rates.items():
        print(f"  {name:<6} {rate:8,.0f}/s  {rate / full:5.2f}x of a full decode")


def section_sizes(jpegs, rounds):
    print("\n2. decode + resize to each size: images/s, and distance to the antialiased reference")
    for size in SIZES:
        variants = strategies(size)
        refs = [reference(d, size) for d in jpegs]
        rates = best_rates(variants, jpegs, rounds)
        plain = rates["full + bilinear (plain resize)"]
        print(f"  -> {size}:")
        for name, fn in variants.items():
            dist = np.mean([distance(fn(d), r) for d, r in zip(jpegs, refs, strict=True)])
            print(
                f"    {name:<42} {rates[name]:7,.0f}/s {rates[name] / plain:5.2f}x of plain"
                f"   distance {dist:5.2f}"
            )


def section_past_2x(jpegs, rounds):
    print("\n3. past 2x after the 1/8 scale (photos enlarged 6x): the filter for the rest")
    decode = best_rates({"1/8": lambda d: decode_at(d, 1)}, jpegs, rounds)["1/8"]
    print(f"  (decoding these photos at 1/8: {decode:,.0f}/s)")
    for size in (48, 96):
        scaled = [decode_at(d, 1) for d in jpegs]
        refs = [reference(d, size) for d in jpegs]
        shrink = np.mean([s.shape[0] / size for s in scaled])
        variants = {
            "bilinear": lambda im, size=size: linear(im, size),
            "area": lambda im, size=size: area(im, size),
            "k x k average + bilinear": lambda im, size=size: integer_area_then_linear(im, size),
            "pyrDown steps + bilinear": lambda im, size=size: pyr_then_linear(im, size),
        }
        rates = best_rates(variants, scaled, rounds)
        print(f"  -> {size} (mean shrink left {shrink:.1f}x; resize only):")
        for name, fn in variants.items():
            dist = np.mean([distance(fn(s), r) for s, r in zip(scaled, refs, strict=True)])
            print(f"    {name:<26} {rates[name]:8,.0f}/s   distance {dist:5.2f}")


def scaled_box(box, r):
    top, left, height, width = box
    return [top // r, left // r, max(1, height // r), max(1, width // r)]


def section_crops(jpegs, rounds, size=224):
    print(f"\n4. random-resized crop windows -> {size}: region decode vs whole decode")
    rng = np.random.default_rng(1)
    items = []
    for data in jpegs:
        h, w, _, _ = simplejpeg.decode_jpeg_header(data)
        for _ in range(10):
            area_ = rng.uniform(0.08, 1.0) * h * w
            ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
            ch = min(h, round(math.sqrt(area_ / ratio)))
            cw = min(w, round(math.sqrt(area_ * ratio)))
            if ch >= 1 and cw >= 1:
                break
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        items.append((data, (top, left, ch, cw)))

    def ours(item):
        data, box = item
        return jpeg_blocks.decode_resized_into(
            data, np.empty((size, size, 3), np.uint8), lambda h, w: box
        )

    variants = {"ours: whole at the crop's scale, crop, resize": ours}
    for ratio in (1, 2, 4, 8):
        variants[f"TF decode_jpeg whole, ratio {ratio}"] = lambda it, r=ratio: tf.io.decode_jpeg(
            it[0], channels=3, ratio=r, dct_method="INTEGER_FAST"
        )
        variants[f"TF decode_and_crop_jpeg, ratio {ratio}"] = lambda it, r=ratio: (
            # The window is in the pixels of the scaled image.
            tf.io.decode_and_crop_jpeg(
                it[0], scaled_box(it[1], r), channels=3, ratio=r, dct_method="INTEGER_FAST"
            )
        )
    mean_area = np.mean([b[2] * b[3] for _, b in items]) / np.mean(
        [np.prod(simplejpeg.decode_jpeg_header(d)[:2]) for d, _ in items]
    )
    rates = best_rates(variants, items, rounds)
    print(f"  (crops keep {mean_area:.0%} of the pixels on average)")
    for name, rate in rates.items():
        print(f"    {name:<46} {rate:8,.0f}/s")
    for ratio in (1, 2, 4, 8):
        whole = rates[f"TF decode_jpeg whole, ratio {ratio}"]
        crop = rates[f"TF decode_and_crop_jpeg, ratio {ratio}"]
        print(f"    ratio {ratio}: decode_and_crop / decode whole = {crop / whole:.2f}x")


def section_tensorflow(jpegs, rounds):
    print("\n5. against TensorFlow: tf.data map over the same bytes, one thread, per CPU-second")
    for size in (160, 224):

        def tf_rows(antialias, size=size):
            ds = tf.data.Dataset.from_tensor_slices(jpegs).map(
                lambda d: tf.image.resize(
                    tf.io.decode_jpeg(d, channels=3), (size, size), antialias=antialias
                )
            )
            options = tf.data.Options()
            options.threading.private_threadpool_size = 1
            options.autotune.enabled = False
            ds = ds.with_options(options)
            return lambda _: sum(1 for _ in ds)

        def ours(_, size=size):
            out = np.empty((size, size, 3), np.uint8)
            for data in jpegs:
                jpeg_blocks.decode_resized_into(data, out)

        def without_blur(_, size=size):
            # The decoder with its blur before the bilinear resize turned off (a private
            # hook of the module: this script follows it when it changes).
            blur_taps = jpeg_blocks._blur_taps
            jpeg_blocks._blur_taps = lambda shrink: 1
            try:
                ours(None, size)
            finally:
                jpeg_blocks._blur_taps = blur_taps

        variants = {
            "TF decode + plain resize": tf_rows(False),
            "TF decode + antialiased resize": tf_rows(True),
            "jpeg_blocks.decode_resized_into": ours,
            "the same without the blur": without_blur,
        }
        # Each variant runs over all the photos once per round: rates are per photo.
        times = {name: [] for name in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                start = time.process_time()
                fn(None)
                times[name].append((time.process_time() - start) / len(jpegs))
        rates = {name: 1 / min(t) for name, t in times.items()}
        plain = rates["TF decode + plain resize"]
        print(f"  -> {size}:")
        for name, rate in rates.items():
            print(
                f"    {name:<34} {rate:7,.0f}/s  {rate / plain:5.2f}x of TF decode + plain resize"
            )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--photos", type=int, default=48)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--only", choices=("scales", "sizes", "past2x", "crops", "tensorflow"), action="append"
    )
    args = p.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    cv2.setNumThreads(1)
    jpegs = sample(args.photos)
    sides = [simplejpeg.decode_jpeg_header(d)[:2] for d in jpegs]
    print(
        f"{len(jpegs)} photos, {np.mean([h for h, _ in sides]):.0f} x "
        f"{np.mean([w for _, w in sides]):.0f} px on average; {args.rounds} rounds"
    )
    only = set(args.only or ("scales", "sizes", "past2x", "crops", "tensorflow"))
    if "scales" in only:
        section_scales(jpegs, args.rounds)
    if "sizes" in only:
        section_sizes(jpegs, args.rounds)
    if "past2x" in only:
        section_past_2x(sample(max(8, args.photos // 4), seed=1, scale=6.0), args.rounds)
    if "crops" in only:
        section_crops(jpegs, args.rounds)
    if "tensorflow" in only:
        section_tensorflow(jpegs, args.rounds)


if __name__ == "__main__":
    main()
