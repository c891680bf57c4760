"""Output sizes and the disk cache: `python -m benchmarks sizes`.

Rows, images/s per epoch (uint8 batches of 64, no shuffle, the sample read from
the page cache), all in one run: every row is warmed up with one untimed epoch,
then timed once per round, the rounds interleaved, so that the CPU's swings hit
every row alike:

- per output size (160, 224, 384) of the `original` config (the photos as they
  were, ~220-500 px): two references on the same JPEG bytes held in memory
  (parallel map, batch, prefetch), TensorFlow's decode + plain `tf.image.resize`
  (bilinear, what users write) and its decode + antialiased resize (the picture
  our decoder is held close to); a third reference, the plain resize of the records
  `tfds.load` reads from the shard files (as a user runs it; ours reads them too);
  ours without a cache; the epoch that fills the cache; an epoch served from it; and
  the Grain loader;
- the stored-224 default path (config `224` at 224): TensorFlow's decode of the
  same bytes from memory, ours without a cache, filling and served;
- the cache on disk (`cache_budget=1`, `cache_dir=`), `original` at 224: filling
  and served, against the cache in memory.

Each ratio is the median over rounds of that round's ratio of two rows, printed with
the name of its reference row (ours without a cache has three: the plain and the
antialiased resize of bytes in memory, and the plain resize of `tfds.load`'s records; the
loader two); `cores`
is CPU seconds over wall seconds, the cores an epoch kept busy: an epoch at half
its row's usual rate on one core is a pipeline that ran one thread, not a slow
machine (tf.data's autotuning can do that; `--no-autotune` turns it off in every
tf.data row, ours and TensorFlow's). Every epoch must count every image of the
split, and the disk rows must find their filled cache file in the cache folder;
otherwise the run ends with an error after writing its JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import data, options

DATASET = "cats_vs_dogs_fast"
SIZES = (160, 224, 384)
BATCH = 64
DEFAULT_IMAGES_PER_CLASS = 1000  # 2,016 images: about 4 minutes on 2 cores, 7 rounds
DEFAULT_ROUNDS = 7
RESULTS = data.REPO_ROOT / "benchmarks" / "results"


@dataclasses.dataclass
class Row:
    """One epoch of a pipeline, and the row its ratio is taken against."""

    measure: Callable[[], dict]  # -> one epoch's {"images", "seconds", "cpu_seconds"}
    references: tuple[str, ...] = ()  # The rows its ratios are taken against, first first.


def _jpegs_in_memory(builder) -> tuple[list[bytes], list[int]]:
    import tensorflow_datasets as tfds

    raw = builder.as_dataset("train", decoders={"image": tfds.decode.SkipDecoding()})
    jpegs, labels = [], []
    for example in raw:
        jpegs.append(example["image"].numpy())
        labels.append(int(example["label"]))
    return jpegs, labels


def _tf_decode(jpegs: list[bytes], labels: list[int], size: int | None, antialias: bool = False):
    """What users write: decode (+ resize to `size`, cast) of JPEG bytes in memory."""
    import tensorflow as tf

    def decode(jpeg, label):
        image = tf.io.decode_jpeg(jpeg, channels=3)
        if size is not None:
            # Both bilinear filters have non-negative weights: the floats stay within
            # [0, 255], so a plain cast is a correct (truncating) conversion.
            resized = tf.image.resize(image, (size, size), antialias=antialias)
            image = tf.cast(resized, tf.uint8)
        return image, label

    return _mapped(_in_memory(jpegs, labels), decode)


def _in_memory(jpegs: list[bytes], labels: list[int]):
    """(JPEG bytes, label) pairs held in memory: the reference at its fastest."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((jpegs, labels))


def tfds_records(builder):
    """(JPEG bytes, label) pairs as users get them: `tfds.load`'s records of the
    split (`as_dataset` with the image left undecoded), read from the shard files."""
    import tensorflow_datasets as tfds

    ds = builder.as_dataset(
        "train", decoders={"image": tfds.decode.SkipDecoding()}, shuffle_files=False
    )
    return ds.map(lambda example: (example["image"], example["label"]))


def _mapped(pairs, fn):
    import tensorflow as tf

    ds = pairs.map(fn, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
    return ds.prefetch(tf.data.AUTOTUNE)


def tuned_by(autotune: bool):
    """fn(dataset) -> the dataset as a row runs it: unchanged, or (`--no-autotune`) with
    tf.data's autotuning off, AUTOTUNE parallelism then at the number of cores."""
    if autotune:
        return lambda ds: ds
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return lambda ds: ds.with_options(options)


def sample_dir(args: argparse.Namespace) -> Path:
    """The TFDS data dir to read: --data-dir (checked: says if a config is missing), else
    the generated sample in --workdir, built if needed."""
    if args.data_dir:
        data_dir = Path(args.data_dir)
        data.load_builders(DATASET, data_dir, data.CONFIGS, "train")
        return data_dir
    return data.sample_data_dir(DATASET, Path(args.workdir), args.images_per_class)


def _tf_decode_records(builder, size: int):
    """`_tf_decode`'s plain resize, of the records `tfds.load` reads."""
    import tensorflow as tf

    def decode(jpeg, label):
        image = tf.image.resize(tf.io.decode_jpeg(jpeg, channels=3), (size, size))
        return tf.cast(image, tf.uint8), label

    return _mapped(tfds_records(builder), decode)


class Rows:
    """{row name: Row}, made once per run, in the order they are timed and printed."""

    def __init__(
        self, data_dir: Path, cache_dir: Path, with_loader: bool = True, autotune: bool = True
    ):
        import tensorflow as tf
        import tensorflow_datasets as tfds

        import cats_vs_dogs_fast  # noqa: F401  (registers the dataset)

        self.data_dir, self.cache_dir = data_dir, cache_dir
        self.uint8 = tf.uint8
        self._tuned = tuned_by(autotune)
        builders = {
            c: tfds.builder(DATASET, config=c, data_dir=data_dir) for c in ("224", "original")
        }
        self.images = builders["224"].info.splits["train"].num_examples
        self.disk_files: list[list[int]] = []  # Bytes on disk of the cache files, per fill.
        rows: dict[str, Row] = {}
        original = _jpegs_in_memory(builders["original"])
        loader_dir = _array_record_dir(builders["original"]) if with_loader else None
        for size in SIZES:
            name = f"original->{size}"
            plain, antialiased = f"{name} TF decode+plain resize", f"{name} TF decode+antialiased"
            records = f"{name} tfds.load + TF decode+plain resize"
            rows[plain] = Row(_epochs(self._tuned(_tf_decode(*original, size))))
            rows[antialiased] = Row(_epochs(self._tuned(_tf_decode(*original, size, True))))
            rows[records] = Row(
                _epochs(self._tuned(_tf_decode_records(builders["original"], size)))
            )
            rows[f"{name} ours, no cache"] = Row(
                self._ours("original", size), (plain, antialiased, records)
            )
            fill, served = self._cached("original", size)
            rows[f"{name} ours, cache fill"] = Row(fill, (f"{name} ours, no cache",))
            rows[f"{name} ours, cache served"] = Row(served)
            if loader_dir is not None:
                rows[f"{name} loader"] = Row(_loader(loader_dir, size), (plain, antialiased))
        del original
        stored = _tf_decode(*_jpegs_in_memory(builders["224"]), None)
        rows["224 TF decode"] = Row(_epochs(self._tuned(stored)))
        rows["224 ours, no cache"] = Row(self._ours("224", 224), ("224 TF decode",))
        fill, served = self._cached("224", 224)
        rows["224 ours, cache fill"] = Row(fill, ("224 ours, no cache",))
        rows["224 ours, cache served"] = Row(served)
        fill, served = self._cached("original", 224, on_disk=True)
        rows["original->224 ours, disk cache fill"] = Row(fill, ("original->224 ours, cache fill",))
        rows["original->224 ours, disk cache served"] = Row(
            served, ("original->224 ours, cache served",)
        )
        self.rows = rows

    def _dataset(self, config, size, cache, **options):
        import cats_vs_dogs_fast

        return self._tuned(
            cats_vs_dogs_fast.as_fast_dataset(
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
        )

    def _ours(self, config, size):
        return _epochs(self._dataset(config, size, False))

    def _cached(self, config, size, on_disk=False):
        """(fill, served): a new dataset every round, so that each round fills its cache."""
        options = {"cache_budget": 1, "cache_dir": self.cache_dir} if on_disk else {}
        held = {}

        def fill():
            held.pop("ds", None)  # The last round's cache goes first,
            gc.collect()  # now, not during a later epoch.
            held["ds"] = self._dataset(config, size, True, **options)
            epoch = _epoch(held["ds"])
            if on_disk:
                self.disk_files.append(_allocated_bytes(self.cache_dir))
            return epoch

        def served():
            return _epoch(held["ds"])

        return fill, served


def _array_record_dir(builder) -> Path:
    from benchmarks.loaders import add_array_record_files

    return Path(add_array_record_files(builder).data_dir)


def _loader(builder_dir: Path, size: int):
    from fast_tfds import as_fast_loader

    def epoch():
        # A new loader each epoch, made before the clock starts (as the tf.data rows'
        # datasets are), and closed after it: a running loader decodes its next epoch
        # in the background, which would take the CPU from the rows timed meanwhile.
        loader = as_fast_loader(
            DATASET,
            builder_dir=builder_dir,
            download_and_prepare=False,
            image_size=size,
            batch_size=BATCH,
            shuffle=False,
            cache=False,  # each epoch decodes: the row times the decode at this size
        )
        with Clock() as clock:
            for batch_images, _ in loader:
                clock.images += len(batch_images)
        loader.close()
        return clock.epoch()

    return epoch


def _allocated_bytes(folder: Path) -> list[int]:
    """Disk blocks in use by each file in `folder` (the cache file is sparse until filled)."""
    return [p.stat().st_blocks * 512 for p in sorted(folder.iterdir()) if p.is_file()]


class Clock:
    """Images, wall seconds and CPU seconds (`cpu_seconds`) of one epoch;
    CPU seconds over wall seconds are the cores the epoch kept busy."""

    def __enter__(self) -> Clock:
        self.images = 0
        self._cpu, self._start = cpu_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self._start
        self.cpu_seconds = cpu_seconds() - self._cpu

    def epoch(self) -> dict:
        return {"images": self.images, "seconds": self.seconds, "cpu_seconds": self.cpu_seconds}


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of its child processes: those that
    ended (`benchmarks.peers` counts a peer's DataLoader workers so, once they end with
    their epoch) and those still running (persistent workers, read through psutil)."""
    times = os.times()
    seconds = times.user + times.system + times.children_user + times.children_system
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            cpu = child.cpu_times()
        except psutil.Error:  # It ended between the listing and the reading.
            continue
        seconds += cpu.user + cpu.system
    return seconds


def _epoch(ds) -> dict:
    with Clock() as clock:
        for batch_images, _ in ds:
            clock.images += int(batch_images.shape[0])
    return clock.epoch()


def _epochs(ds):
    return lambda: _epoch(ds)


def run(rows: dict[str, Row], rounds: int) -> tuple[dict, dict]:
    """(warm-up epochs, timed epochs): every row once untimed (page cache, tracing),
    then `rounds` interleaved rounds. A fill row comes before its served row. The rows and
    the modules are set aside from the collector meanwhile (`memory.frozen_heap`)."""
    from benchmarks.memory import frozen_heap

    with frozen_heap():
        warmup = {name: _measure(row) for name, row in rows.items()}
        timed = {name: [] for name in rows}
        for r in range(rounds):
            print(f"Round {r + 1} of {rounds} ...", flush=True)
            for name, row in rows.items():
                timed[name].append(_measure(row))
    return warmup, timed


def _measure(row: Row) -> dict:
    # What a row let go (an iterator, a dataset) can sit in a reference cycle until the
    # collector runs: collected here, before the clock starts, not during an epoch.
    gc.collect()
    return row.measure()


def summarize(rows: dict[str, Row], timed: dict) -> dict:
    """Per row: images/s median, min, max; and against each of its reference rows, the
    median, min and max over rounds of the per-round ratio (`ratios`, by reference;
    `vs` and `ratio` are the first, as in the runs before there were two)."""
    out = {}
    for name, epochs in timed.items():
        rates = [e["images"] / e["seconds"] for e in epochs]
        entry = {"median": statistics.median(rates), "min": min(rates), "max": max(rates)}
        entry["cores"] = statistics.median(e["cpu_seconds"] / e["seconds"] for e in epochs)
        for reference in rows[name].references:
            base = [e["images"] / e["seconds"] for e in timed[reference]]
            ratios = [a / b for a, b in zip(rates, base, strict=True)]
            entry.setdefault("ratios", {})[reference] = {
                "median": statistics.median(ratios),
                "min": min(ratios),
                "max": max(ratios),
            }
        if "ratios" in entry:
            entry["vs"] = rows[name].references[0]
            entry["ratio"] = entry["ratios"][entry["vs"]]
        out[name] = entry
    return out


def table(summary: dict, timed: dict) -> str:
    """One line a row: images/s, cores kept busy, and the ratio to its reference row,
    named; a row with a second reference gets a second line for it."""
    head = f"{'row':<38} {'images/s median [min-max]':>26} {'cores [min-max]':>16}"
    lines = [f"{head}  {'ratio [min-max]':<20} of"]
    for name, s in summary.items():
        rate = f"{s['median']:,.0f} [{s['min']:,.0f}-{s['max']:,.0f}]"
        cores = [e["cpu_seconds"] / e["seconds"] for e in timed[name]]
        cores = f"{s['cores']:.1f} [{min(cores):.1f}-{max(cores):.1f}]"
        ratios = list(s.get("ratios", {}).items()) or [("", None)]
        for i, (reference, r) in enumerate(ratios):
            ratio = "" if r is None else f"{r['median']:.2f}x [{r['min']:.2f}-{r['max']:.2f}]"
            # The reference without the output size both rows share.
            vs = reference.removeprefix(name.split(" ", 1)[0] + " ")
            left = f"{name:<38} {rate:>26} {cores:>16}" if i == 0 else " " * 82
            lines.append(f"{left}  {ratio:<20} {vs}".rstrip())
    return "\n".join(lines)


def count_errors(warmup: dict, timed: dict, images: int) -> list[str]:
    errors = [
        f"{name} warm-up epoch: {e['images']} images, expected {images}"
        for name, e in warmup.items()
        if e["images"] != images
    ]
    errors += [
        f"{name} round {r + 1}: {e['images']} images, expected {images}"
        for name, epochs in timed.items()
        for r, e in enumerate(epochs)
        if e["images"] != images
    ]
    return errors


def default_out(mode: str = "sizes") -> Path:
    """results/bench-MODE-DATE.json, or -2, -3, ... when a run of that day is kept there."""
    stem = f"bench-{mode}-{datetime.date.today().isoformat()}"
    out, n = RESULTS / f"{stem}.json", 1
    while out.exists():
        n += 1
        out = RESULTS / f"{stem}-{n}.json"
    return out


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_images_per_class(p, DEFAULT_IMAGES_PER_CLASS)
    options.add_rounds(p, DEFAULT_ROUNDS)
    p.add_argument("--workdir", default=str(data.DEFAULT_WORKDIR), help="where the sample is")
    p.add_argument(
        "--data-dir",
        help=f"a TFDS data dir with {DATASET} built in configs 224 and original "
        "(default: the generated sample; the loader rows add ArrayRecord files to it)",
    )
    p.add_argument(
        "--cache-dir",
        help="the folder in which the disk cache rows make their temporary folder "
        "(default: $TMPDIR); give one on the local disk",
    )
    p.add_argument("--no-loader", action="store_true", help="leave out the Grain loader rows")
    p.add_argument(
        "--no-autotune",
        action="store_true",
        help="every tf.data row (ours and TensorFlow's) with tf.data.Options().autotune.enabled "
        "= False, so that AUTOTUNE parallelism stays at the number of cores",
    )
    p.add_argument(
        "--out",
        "--json",
        dest="out",
        help="where to write the JSON (default: benchmarks/results/bench-sizes-DATE.json)",
    )
    args = p.parse_args(argv)
    options.check_counts(p, args)
    return args


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks sizes") -> None:
    args = parse_args(argv, prog)
    from fast_tfds.quiet import quiet_tensorflow

    quiet_tensorflow()
    data_dir = sample_dir(args)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fast_tfds_disk_cache_", dir=args.cache_dir) as tmp:
        rows = Rows(
            data_dir, Path(tmp), with_loader=not args.no_loader, autotune=not args.no_autotune
        )
        images, disk_files = rows.images, rows.disk_files
        print(f"{images:,} images; {len(rows.rows)} rows, {args.rounds} rounds", flush=True)
        warmup, timed = run(rows.rows, args.rounds)
        summary = summarize(rows.rows, timed)
        del rows  # The cache files go with their datasets,
        gc.collect()  # before their folder does.
    errors = count_errors(warmup, timed, images)
    # A fill that did not go to disk would time the memory cache twice.
    arena_bytes = images * 224 * 224 * 3
    if not all(sum(files) >= arena_bytes for files in disk_files):
        errors.append(
            f"the disk cache rows: the cache folder held {disk_files} bytes after the fills, "
            f"expected at least {arena_bytes} (the cache was not on disk)"
        )
    print()
    print(
        f"{images:,} images, uint8 batches of {BATCH}, {args.rounds} interleaved rounds, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(table(summary, timed))
    result = {
        "schema": 1,
        "mode": "sizes",
        "command": " ".join([prog, *(sys.argv[1:] if argv is None else argv)]),
        "machine": data.machine_info(),
        "data_dir": os.fspath(data_dir),
        "images_per_epoch": images,
        "rounds": args.rounds,
        "batch_size": BATCH,
        "tf_data_autotune": not args.no_autotune,
        "references": {name: s.get("vs") for name, s in summary.items()},
        "warmup": warmup,
        "epochs": timed,
        "summary": summary,
        "disk_cache_bytes_after_fill": disk_files,
        "counts_consistent": not errors,
        "errors": errors,
    }
    out = Path(args.out) if args.out else default_out()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"Wrote {out}")
    if errors:
        raise SystemExit("benchmark sizes:\n" + "\n".join(errors))


if __name__ == "__main__":
    main(prog="python -m benchmarks.sizes")
