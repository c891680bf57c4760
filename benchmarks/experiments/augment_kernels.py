"""The augmentation kernel from a ragged cache against TF official random-resized crop.

    python benchmarks/experiments/augment_kernels.py [--photos 400] [--rounds 3] [--threads 2]
        [--data-dir DIR]

Photo-like JPEGs of the sample's sizes (`fast_tfds.samples.photos`, 220-500 px a
side) are made in memory; then, in interleaved rounds (so that the CPU's swings hit
every row alike), best round reported:

- ours: the photos decoded once into a `PictureCache` (shorter side 256, aspect
  kept), then batches of 64 served from it: random-resized crop (0.08-1, 3/4-4/3)
  + flip, resized to 224 into a preallocated uint8 batch, `--threads` threads
  (`step.serve_into`); and the same with colour jitter (brightness,
  contrast, saturation 0.4, hue 0.1);
- TF official: `tf.image.sample_distorted_bounding_box` (same ranges, 10 tries) +
  `tf.image.decode_and_crop_jpeg` + `tf.image.resize` (bilinear) to 224 + random
  flip, per example in `Dataset.map`, batch 64, uint8 out, on a private tf.data
  thread pool of `--threads` threads (TF's intra-op pool also `--threads`).

With `--data-dir` (cats_vs_dogs_fast 'original' built as ArrayRecord there), the
Grain loader with `augment=Augment(), cache=True` (batch 64, `--threads` threads)
is timed too: its first epoch (decodes into the cache) and its served epochs.

Ratios are against TF official; the jitter row is also given against ours without
jitter. Each row also gives images per CPU-second of this process (user + system),
which a machine shared with other work distorts less than the wall clock. The
cache's fill (one decode per photo) is not timed.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np


def make_jpegs(count: int) -> list[bytes]:
    from fast_tfds.samples import photos

    rng = np.random.default_rng(0)
    return [photos.jpeg_bytes(photos.random_photo(rng)) for _ in range(count)]


def filled_cache(jpegs):
    import simplejpeg

    from fast_tfds.cache.pictures import PictureCache
    from fast_tfds.core import jpeg_blocks

    sizes = [simplejpeg.decode_jpeg_header(j)[:2] for j in jpegs]
    cache = PictureCache(*zip(*sizes, strict=True), (224, 224), shorter_side=256)
    for i, jpeg in enumerate(jpegs):
        jpeg_blocks.decode_resized_into(jpeg, cache.view(i))
        cache.mark(i)
    return cache


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(run) -> tuple[float, float]:
    """(images per second, images per CPU-second) of `run()`, which returns its count."""
    start, cpu = time.perf_counter(), cpu_seconds()
    count = run()
    return count / (time.perf_counter() - start), count / (cpu_seconds() - cpu)


def ours(cache, augment, threads: int, passes: int, batch: int = 64) -> tuple[float, float]:
    """Served from the cache, `passes` epochs: `timed`'s pair."""
    from fast_tfds.augment import step, windows

    n = len(cache)
    out = np.empty((batch, 224, 224, 3), np.uint8)

    def run() -> int:
        for epoch in range(passes):
            order = np.random.default_rng(epoch).permutation(n)
            for s in range(0, n - batch + 1, batch):
                slots = order[s : s + batch]
                step.serve_into(
                    cache, slots, windows.Draw(augment, 0, epoch, slots), out, num_threads=threads
                )
        return passes * (n // batch) * batch

    return timed(run)


def tf_official(jpegs, threads: int, batch: int = 64):
    import tensorflow as tf

    def crop(jpeg):
        shape = tf.image.extract_jpeg_shape(jpeg)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4]),
            min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        y, x, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(size)
        image = tf.image.decode_and_crop_jpeg(jpeg, tf.stack([y, x, h, w]), channels=3)
        image = tf.image.resize(image, (224, 224), method="bilinear")
        image = tf.image.random_flip_left_right(image)
        return tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8)

    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    ds = (
        tf.data.Dataset.from_tensor_slices(jpegs)
        .map(crop, num_parallel_calls=threads)
        .batch(batch, drop_remainder=True)
        .prefetch(2)
        .with_options(options)
    )

    def epoch() -> tuple[float, float]:
        return timed(lambda: sum(int(images.shape[0]) for images in ds))

    return epoch


def grain_loader(data_dir: str, threads: int):
    """(epoch 1's `timed` pair, `served()`: the pair of 5 more epochs) of the Grain loader
    with random-resized crops + flips and its cache. Endless iteration: the loader
    prefetches a few batches ahead, across epochs, so several epochs are timed at once."""
    import cats_vs_dogs_fast
    from fast_tfds import Augment

    loader = cats_vs_dogs_fast.as_fast_loader(
        "train",
        data_dir=data_dir,
        config="original",
        image_size=224,
        download_and_prepare=False,
        batch_size=64,
        seed=0,
        num_threads=threads,
        augment=Augment(),
        cache=True,
        drop_remainder=True,
        num_epochs=None,
    )
    batches = iter(loader)

    def take(count: int) -> int:
        return sum(len(next(batches)[1]) for _ in range(count))

    first = timed(lambda: take(len(loader)))
    return first, lambda: timed(lambda: take(5 * len(loader)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=5, help="epochs per round of ours")
    parser.add_argument("--data-dir", help="also time the Grain loader on this data dir")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from fast_tfds.quiet import quiet_tensorflow

    tf = quiet_tensorflow()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from fast_tfds.augment import Augment

    jpegs = make_jpegs(args.photos)
    cache = filled_cache(jpegs)
    plain = Augment()
    jitter = Augment(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    official = tf_official(jpegs, args.threads)
    official()  # traces the graph
    rows = {"ours": [], "ours + jitter": [], "TF official": []}
    if args.data_dir:
        first, loader_epochs = grain_loader(args.data_dir, args.threads)
        rows["Grain loader, epoch 1 (fill)"] = [first]
        rows["Grain loader, cached epochs"] = []
    for _ in range(args.rounds):
        rows["ours"].append(ours(cache, plain, args.threads, args.passes))
        rows["ours + jitter"].append(ours(cache, jitter, args.threads, args.passes))
        rows["TF official"].append(max(official() for _ in range(2)))
        if args.data_dir:
            rows["Grain loader, cached epochs"].append(loader_epochs())
    best = {name: max(v[0] for v in values) for name, values in rows.items()}
    per_cpu = {name: max(v[1] for v in values) for name, values in rows.items()}
    print(
        f"{args.photos} photos, cache {cache.nbytes / 2**20:.1f} MiB "
        f"({cache.nbytes / args.photos / 1024:.0f} KiB each), {args.threads} threads, "
        f"batch 64, 224 px, best of {args.rounds} interleaved rounds"
    )
    for name, value in best.items():
        ratio = value / best["TF official"]
        extra = f", {value / best['ours']:.2f}x ours" if name == "ours + jitter" else ""
        cpu = per_cpu[name] / per_cpu["TF official"]
        print(
            f"{name:28s} {value:9,.0f} images/s  {ratio:5.2f}x TF official{extra};  "
            f"{per_cpu[name]:7,.0f} images/CPU-s  {cpu:5.2f}x TF official"
        )


if __name__ == "__main__":
    main()
