"""The stronger recipes' kernel against today's crop + flip, on pictures at cache resolution.

    python benchmarks/experiments/strong_recipes.py [--photos 512] [--rounds 3] [--threads 2]

Photo-like pictures (`fast_tfds.samples.photos`, 220-500 px a side) are made in memory
and resized to the cache's resolution (shorter side 256, aspect kept, area filter), as
the augmentation cache holds them. Then, in interleaved rounds (so that the CPU's swings
hit every row alike), each row serves every picture `--passes` times in batches of 64
at 224 px into a preallocated uint8 batch, with `--threads` threads, best round kept:

- crop + flip: today's kernel (`kernels.apply_into`), random-resized crop + flip;
- + rotation: the warp kernel with a uniform rotation in [-15, 15] degrees;
- TrivialAugmentWide + erasing: torchvision's policy, timm's random erasing with 0.25;
- RandAugment: torchvision's (2 ops, bin 9 of 31);
- timm rand-m9-mstd0.5-inc1 + erasing 0.25;
- crop + flip + MixUp/CutMix: timm's recipe (0.8 / 1.0, switch 0.5, smoothing 0.1) on
  each uint8 batch after today's kernel;
- the floor of rotation's cost, OpenCV's calls alone on every picture's window: its
  resize to 224 x 224 as the kernel resizes (what crop + flip costs at least), against
  the three calls of a one-warp rotation in [-15, 15] degrees: the window to 4 channels,
  one bilinear `warpAffine`, back to 3 (OpenCV's 3-channel warp is not vectorized: about
  2.4x slower than these three); no fill, no mask;
- PIL per picture: what torchvision's transforms run on PIL pictures for RandomResizedCrop
  + flip + TrivialAugmentWide + RandomErasing(0.25) (PIL crop, bilinear resize, flip, the
  op by ImageOps / ImageEnhance / `Image.transform` with torchvision's NEAREST, erasing in
  numpy), same draws as ours, one picture at a time in this thread: the per-core peer.

Each row gives images/s, images per CPU-second of this process (user + system, less
distorted by other work on a shared machine), and both as a ratio to crop + flip.
The draws (windows, policies, boxes) are timed with the batch: they are part of serving.
"""

from __future__ import annotations

import argparse
import platform
import resource
import threading
import time

import cv2
import numpy as np

BATCH, SIZE = 64, 224


def cached_pictures(count: int) -> list[np.ndarray]:
    from fast_tfds.samples import photos

    rng = np.random.default_rng(0)
    pictures = []
    for _ in range(count):
        p = np.asarray(photos.random_photo(rng))
        h, w = p.shape[:2]
        s = 256 / min(h, w)
        size = (round(w * s), round(h * s))
        pictures.append(cv2.resize(p, size, interpolation=cv2.INTER_AREA))
    return pictures


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rows(threads: int):
    """name -> serve(pictures, epoch, indices, out), one batch."""
    from fast_tfds.augment import Augment, kernels, mixing, policies, recipe, windows

    plain = Augment()

    def drawn_for(pictures, epoch, indices):
        """Today's crop + flip windows of a batch, in its pictures' pixels."""
        sizes = [p.shape[:2] for p in pictures]
        return windows.sample(windows.Draw(plain, 0, epoch, indices), *zip(*sizes, strict=True))

    def today(pictures, epoch, indices, out):
        kernels.apply_into(pictures, drawn_for(pictures, epoch, indices), out, num_threads=threads)

    def strong(r):
        def serve(pictures, epoch, indices, out):
            recipe.apply_into(
                pictures, windows.Draw(r, 0, epoch, indices), out, num_threads=threads
            )

        return serve

    mix = mixing.Mix(0.8, 1.0, switch_prob=0.5, label_smoothing=0.1)

    def mixed(pictures, epoch, indices, out):
        today(pictures, epoch, indices, out)
        labels = indices % 120
        batch = int(indices[0])
        mixing.mix(out, labels, 120, mix, seed=0, epoch=epoch, batch=batch, num_threads=threads)

    trivial = policies.parse("trivial_augment_wide")

    def pil_reference(pictures, epoch, indices, out):
        from fast_tfds.augment import erasing

        drawn = drawn_for(pictures, epoch, indices)
        ops = trivial.draw(0, epoch, indices, (SIZE, SIZE)).recipes()
        boxes = erasing.sample(0.25, 0, epoch, indices, (SIZE, SIZE))
        for i, picture in enumerate(pictures):
            out[i] = _pil_one(picture, drawn.window(i), drawn.flip[i], ops[i])
            erasing.erase_into(out[i], boxes, i)

    def floor_resize(pictures, epoch, indices, out):
        boxes = kernels.source_boxes(pictures, drawn_for(pictures, epoch, indices)).tolist()

        def one(i):
            y0, y1, x0, x1 = boxes[i]
            kernels._resize_into(pictures[i][y0:y1, x0:x1], out[i])

        kernels._parallel(len(boxes), threads, one)

    scratch = threading.local()

    def floor_warp(pictures, epoch, indices, out):
        boxes = kernels.source_boxes(pictures, drawn_for(pictures, epoch, indices)).tolist()
        angles = np.radians(recipe.angles(15.0, 0, epoch, indices)).tolist()

        def one(i):
            y0, y1, x0, x1 = boxes[i]
            if not hasattr(scratch, "warped"):
                scratch.warped = np.empty((SIZE, SIZE, 4), np.uint8)
                scratch.source = np.empty(512 * 512 * 4, np.uint8)
            window = pictures[i][y0:y1, x0:x1]
            source = scratch.source[: window.size // 3 * 4].reshape(*window.shape[:2], 4)
            cv2.cvtColor(window, cv2.COLOR_RGB2RGBA, dst=source)
            sx, sy = (x1 - x0) / SIZE, (y1 - y0) / SIZE
            c, s = np.cos(angles[i]), np.sin(angles[i])
            # About the window's centre, as the rotation turns the crop.
            a = np.array([[sx * c, -sx * s], [sy * s, sy * c]])
            t = np.array([(x1 - x0) / 2, (y1 - y0) / 2]) - a @ np.array([SIZE / 2, SIZE / 2])
            matrix = np.concatenate([a, t[:, None]], axis=1)
            cv2.warpAffine(
                source,
                matrix,
                (SIZE, SIZE),
                dst=scratch.warped,
                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_CONSTANT,
            )
            cv2.cvtColor(scratch.warped, cv2.COLOR_RGBA2RGB, dst=out[i])

        kernels._parallel(len(boxes), threads, one)

    return {
        "crop + flip (today's kernel)": today,
        "+ rotation 15 (warp kernel)": strong(plain.replace(rotate=15.0)),
        "TrivialAugmentWide + erasing 0.25": strong(
            plain.replace(auto_augment="trivial_augment_wide", erase=0.25)
        ),
        "RandAugment (2 ops, bin 9)": strong(plain.replace(auto_augment="rand_augment")),
        "timm rand-m9-mstd0.5-inc1 + erasing 0.25": strong(
            plain.replace(auto_augment="rand-m9-mstd0.5-inc1", erase=0.25)
        ),
        "crop + flip + MixUp/CutMix (timm)": mixed,
        "floor: OpenCV resize of each window alone": floor_resize,
        "floor: a one-warp rotation's OpenCV calls alone": floor_warp,
        "PIL per picture: TrivialAugmentWide + erasing": pil_reference,
    }


def _pil_one(picture, window, flip, ops) -> np.ndarray:
    """torchvision's PIL path for one picture (see the module's docstring)."""
    from PIL import Image, ImageEnhance, ImageOps

    from fast_tfds.augment import ops as our_ops

    top, left, height, width = window
    image = Image.fromarray(picture).crop((left, top, left + width, top + height))
    image = image.resize((SIZE, SIZE), Image.BILINEAR)
    if flip:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    enhance = {"brightness": ImageEnhance.Brightness, "color": ImageEnhance.Color}
    enhance |= {"contrast": ImageEnhance.Contrast, "sharpness": ImageEnhance.Sharpness}
    for name, argument in ops:
        if name in our_ops.GEOMETRIC:
            coefficients = tuple(our_ops.GEOMETRIC[name](argument, SIZE, SIZE)[:2].reshape(-1))
            image = image.transform(image.size, Image.AFFINE, coefficients, Image.NEAREST)
        elif name in enhance:
            image = enhance[name](image).enhance(argument)
        elif name == "posterize":
            image = ImageOps.posterize(image, int(argument))
        elif name == "solarize":
            image = ImageOps.solarize(image, argument)
        elif name == "autocontrast":
            image = ImageOps.autocontrast(image)
        elif name == "equalize":
            image = ImageOps.equalize(image)
    return np.asarray(image)


def timed(serve, pictures, passes: int) -> tuple[float, float]:
    n = len(pictures)
    out = np.empty((BATCH, SIZE, SIZE, 3), np.uint8)
    start, cpu = time.perf_counter(), cpu_seconds()
    count = 0
    for epoch in range(passes):
        order = np.random.default_rng(epoch).permutation(n)
        for s in range(0, n - BATCH + 1, BATCH):
            indices = order[s : s + BATCH]
            serve([pictures[i] for i in indices], epoch, indices, out)
            count += BATCH
    return count / (time.perf_counter() - start), count / (cpu_seconds() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=2, help="epochs per row and round")
    args = parser.parse_args()
    pictures = cached_pictures(args.photos)
    serving = rows(args.threads)
    for serve in serving.values():  # warm-up: pools, OpenCV's first calls
        timed(serve, pictures[:BATCH], 1)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in serving}
    for _ in range(args.rounds):
        for name, serve in serving.items():
            results[name].append(timed(serve, pictures, args.passes))
    best = {name: max(v[0] for v in values) for name, values in results.items()}
    per_cpu = {name: max(v[1] for v in values) for name, values in results.items()}
    base = next(iter(best))
    mb = sum(p.nbytes for p in pictures) / 2**20
    print(
        f"{args.photos} pictures at cache resolution (shorter side 256, {mb:.0f} MiB), batch "
        f"{BATCH}, {SIZE} px uint8, {args.threads} threads, {args.passes} passes per round, "
        f"best of {args.rounds} interleaved rounds; {platform.processor() or platform.machine()}"
        f", OpenCV {cv2.__version__}"
    )
    print(f"{'row':<44}{'images/s':>10}{'ratio':>8}{'img/CPU-s':>11}{'ratio':>8}")
    for name in serving:
        print(
            f"{name:<44}{best[name]:>10.0f}{best[name] / best[base]:>8.2f}"
            f"{per_cpu[name]:>11.0f}{per_cpu[name] / per_cpu[base]:>8.2f}"
        )
    print(f"ratios: to '{base}' in the same run")


if __name__ == "__main__":
    main()
