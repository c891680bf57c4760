"""Output sizes and the disk cache: `python -m benchmarks.sizes`.

Rows, images/s per epoch (uint8 batches of 64, no shuffle, the sample read from
the page cache), all in one run with every row timed once per round and the
rounds interleaved, so that the CPU's swings hit every row alike:

- per output size (160, 224, 384) of the `original` config (the photos as they
  were, ~300-500 px): TensorFlow's decode + antialiased resize of the same JPEG
  bytes held in memory (parallel map, batch: the reference), and ours without a
  cache, the epoch that fills the cache, an epoch served from it, and the Grain
  loader;
- the stored-224 default path (config `224` at 224): TensorFlow's decode of the
  same bytes, ours without a cache, filling and served;
- the cache on disk (`cache_budget=1`, `cache_dir=`): filling and served, next to
  the cache in memory, for `original` at 224.

The ratios printed are medians over rounds of each round's ratio.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import data
from fast_tfds.quiet import quiet_tensorflow

DATASET = "cats_vs_dogs_fast"
SIZES = (160, 224, 384)
BATCH = 64


def _reference(builder, size: int | None):
    """TensorFlow's decode (+ antialiased resize to `size`) of the split's JPEG bytes in memory."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    raw = builder.as_dataset("train", decoders={"image": tfds.decode.SkipDecoding()})
    jpegs, labels = [], []
    for example in raw:
        jpegs.append(example["image"].numpy())
        labels.append(int(example["label"]))

    def decode(jpeg, label):
        image = tf.io.decode_jpeg(jpeg, channels=3)
        if size is not None:
            image = tf.image.resize(image, (size, size), antialias=True)
            image = tf.cast(tf.round(tf.clip_by_value(image, 0, 255)), tf.uint8)
        return image, label

    ds = tf.data.Dataset.from_tensor_slices((jpegs, labels))
    ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
    return ds.prefetch(tf.data.AUTOTUNE)


class Rows:
    """{row name: fn() -> (images, seconds) of one epoch}, made once per run."""

    def __init__(self, data_dir: Path, cache_dir: Path, with_loader: bool = True):
        import tensorflow as tf
        import tensorflow_datasets as tfds

        import cats_vs_dogs_fast  # noqa: F401  (registers the dataset)

        self.data_dir, self.cache_dir = data_dir, cache_dir
        self.builders = {
            c: tfds.builder(DATASET, config=c, data_dir=data_dir) for c in ("224", "original")
        }
        self.uint8 = tf.uint8
        self.rows = {}
        original = self.builders["original"]
        for size in SIZES:
            self.rows[f"original->{size} TF decode+resize"] = _epochs(_reference(original, size))
            self.rows[f"original->{size} ours, no cache"] = self._ours("original", size, False)
            fill, served = self._cached("original", size)
            self.rows[f"original->{size} ours, cache fill"] = fill
            self.rows[f"original->{size} ours, cache served"] = served
            if with_loader:
                self.rows[f"original->{size} loader"] = self._loader(size)
        self.rows["224 TF decode"] = _epochs(_reference(self.builders["224"], None))
        self.rows["224 ours, no cache"] = self._ours("224", 224, False)
        fill, served = self._cached("224", 224)
        self.rows["224 ours, cache fill"], self.rows["224 ours, cache served"] = fill, served
        fill, served = self._cached("original", 224, cache_budget=1, cache_dir=cache_dir)
        self.rows["original->224 ours, disk cache fill"] = fill
        self.rows["original->224 ours, disk cache served"] = served

    def _dataset(self, config, size, cache, **options):
        import cats_vs_dogs_fast

        return cats_vs_dogs_fast.as_fast_dataset(
            "train",
            data_dir=self.data_dir,
            config=config,
            download_and_prepare=False,
            image_size=size,
            cache=cache,
            batch_size=BATCH,
            dtype=self.uint8,
            shuffle=False,
            **options,
        )

    def _ours(self, config, size, cache):
        return _epochs(self._dataset(config, size, cache))

    def _cached(self, config, size, **options):
        """(fill, served): a new dataset every round, so that each round fills its cache."""
        held = {}

        def fill():
            held["ds"] = self._dataset(config, size, True, **options)  # The last one is freed.
            return _epoch(held["ds"])

        def served():
            return _epoch(held["ds"])

        return fill, served

    def _loader(self, size):
        from benchmarks.loaders import add_array_record_files
        from fast_tfds import as_fast_loader

        builder = add_array_record_files(self.builders["original"])

        def epoch():
            # A new loader each time: a running one decodes the next epoch ahead, in the
            # background, while the other rows are timed.
            start, images = time.perf_counter(), 0
            loader = as_fast_loader(
                DATASET,
                builder_dir=builder.data_dir,
                download_and_prepare=False,
                image_size=size,
                batch_size=BATCH,
                shuffle=False,
            )
            for batch_images, _ in loader:
                images += len(batch_images)
            seconds = time.perf_counter() - start
            loader.close()
            return images, seconds

        return epoch


def _epoch(ds) -> tuple[int, float]:
    start, images = time.perf_counter(), 0
    for batch_images, _ in ds:
        images += int(batch_images.shape[0])
    return images, time.perf_counter() - start


def _epochs(ds):
    return lambda: _epoch(ds)


def run(rows: Rows, rounds: int) -> dict:
    """Warms every row up once (page cache, tracing), then times `rounds` interleaved rounds."""
    for measure in rows.rows.values():  # Fill rows are followed by their served row.
        measure()
    timed = {name: [] for name in rows.rows}
    for _ in range(rounds):
        for name, measure in rows.rows.items():
            images, seconds = measure()
            timed[name].append({"images": images, "seconds": seconds})
    return timed


def ratios(timed: dict) -> dict[str, float]:
    """Median over rounds of each round's ratio of two rows."""

    def ratio(top: str, bottom: str) -> float:
        per_round = [
            (t["images"] / t["seconds"]) / (b["images"] / b["seconds"])
            for t, b in zip(timed[top], timed[bottom], strict=True)
        ]
        return statistics.median(per_round)

    out = {}
    for size in SIZES:
        base = f"original->{size} TF decode+resize"
        ours = f"original->{size} ours"
        out[f"{size}: no cache / TF"] = ratio(f"{ours}, no cache", base)
        out[f"{size}: cache fill / no cache"] = ratio(f"{ours}, cache fill", f"{ours}, no cache")
        if f"original->{size} loader" in timed:
            out[f"{size}: loader / TF"] = ratio(f"original->{size} loader", base)
    out["224 stored: no cache / TF decode"] = ratio("224 ours, no cache", "224 TF decode")
    out["224 stored: cache fill / no cache"] = ratio("224 ours, cache fill", "224 ours, no cache")
    out["disk / memory cache: fill"] = ratio(
        "original->224 ours, disk cache fill", "original->224 ours, cache fill"
    )
    out["disk / memory cache: served"] = ratio(
        "original->224 ours, disk cache served", "original->224 ours, cache served"
    )
    return out


def table(timed: dict, found: dict[str, float]) -> str:
    lines = [f"{'row':<44} {'images/s median [range]':>28}"]
    for name, epochs in timed.items():
        rates = [e["images"] / e["seconds"] for e in epochs]
        lines.append(
            f"{name:<44} {statistics.median(rates):>10,.0f} "
            f"[{min(rates):,.0f}-{max(rates):,.0f}]".rjust(28)
        )
    lines.append("")
    lines += [f"{name:<44} {value:>6.2f}x" for name, value in found.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sizes", description=__doc__)
    p.add_argument("--images-per-class", type=int, default=1000, help="sample size per class")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workdir", default=str(data.DEFAULT_WORKDIR))
    p.add_argument("--data-dir", help="a TFDS data dir with both configs built (else the sample)")
    p.add_argument("--no-loader", action="store_true", help="leave out the Grain loader rows")
    p.add_argument("--json", help="where to write the result (default: WORKDIR/results/)")
    args = p.parse_args(argv)
    quiet_tensorflow()
    data_dir = Path(args.data_dir) if args.data_dir else None
    if data_dir is None:
        data_dir = data.sample_data_dir(DATASET, Path(args.workdir), args.images_per_class)
    with tempfile.TemporaryDirectory(prefix="fast_tfds_disk_cache_") as cache_dir:
        rows = Rows(data_dir, Path(cache_dir), with_loader=not args.no_loader)
        timed = run(rows, args.rounds)
        del rows  # The cache files go with their datasets.
    found = ratios(timed)
    print(table(timed, found))
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out = Path(args.json or Path(args.workdir) / "results" / f"sizes-{stamp}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"machine": data.machine_info(), "rounds": args.rounds, "batch_size": BATCH}
    result |= {"data_dir": os.fspath(data_dir), "epochs": timed, "ratios": found}
    out.write_text(json.dumps(result, indent=1))
    print(f"Wrote {out}")


if __name__ == "__main__":
    main()
