"""Training recipes: `python -m benchmarks recipes`.

Rows, images/s per epoch (batches of 64, no shuffle, the sample read from the page
cache), all in one run: every row is warmed up with one untimed epoch, then timed
once per round, the rounds interleaved (see `benchmarks.sizes`):

- what users write today, on the same sample:
  - `course notes`: the TFDS course notes' per-example augmentation (flips up-down
    and left-right, brightness, saturation, hue, contrast, a plain `tf.image.resize`
    to 224, /255) mapped over the `224` records, then batched;
  - `Keras layers`: `RandomFlip`, `RandomRotation`, `RandomZoom` mapped on the
    batches of our cached uint8 reader (the Keras preprocessing guide);
  - `TF official RRC`: TF official models' random-resized crop on `original`
    (`sample_distorted_bounding_box`, area 0.08-1, aspect 3/4-4/3, then
    `decode_and_crop_jpeg`, a plain bilinear `tf.image.resize` to 224, a random
    flip) of the split's JPEG bytes held in memory; and the same of the records
    `tfds.load` reads (`tfds.load + TF official RRC`), as a user runs it: rows that
    read records too name both references;
  - `TF center crop`: evaluation as users write it: decode, an aspect-preserving
    plain resize (shorter side 256), the central 224 x 224;
  - `DALI CPU RRC`: NVIDIA DALI's `decoders.image_random_crop` + resize + flip on
    the CPU, in a process of its own with DALI installed (`--dali-python`); an
    optional peer, never a dependency: if it cannot run, the row says why;
- ours, `original` read at 224 with `augment=`: random-resized crop + flip from the
  cache (served epochs), the epoch that fills it, without a cache, with colour
  jitter on, the center crop for evaluation (`Augment.eval()`), and the Grain loader
  with and without its cache.

Every ratio names the row it is taken against. Every epoch must count every image.
Ours run with tf.data's autotuning off (as `as_fast_dataset` returns them); TensorFlow's
rows run at tf.data's defaults, as users write them, unless `--no-autotune` turns it off
there too (the decoders' comparison: no epoch of theirs then runs on one core).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import data
from benchmarks.sizes import (
    BATCH,
    Clock,
    Row,
    _array_record_dir,
    _epoch,
    _epochs,
    _in_memory,
    _jpegs_in_memory,
    _mapped,
    check_counts,
    count_errors,
    default_out,
    run,
    sample_dir,
    summarize,
    table,
    tfds_records,
    tuned_by,
)

DATASET = "cats_vs_dogs_fast"
SIZE = 224
DEFAULT_IMAGES_PER_CLASS = 1000
DEFAULT_ROUNDS = 5
TF_RRC = "TF official RRC+flip"
# The same, of the records `tfds.load` reads (as a user runs it) rather than of JPEG bytes
# held in memory: a second reference for the rows that read records too.
TF_RRC_RECORDS = "tfds.load + TF official RRC+flip"
# The colour jitter of the jitter rows, ours and the references': torchvision's usual
# ImageNet values.
JITTER = {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.1}

# Issue targets, printed next to what was measured (facts, not pass/fail).
TARGETS = {
    "ours RRC+flip, cached": f">= 10,000 images/s and >= 4x {TF_RRC}",
    "ours RRC+flip+jitter, cached": ">= 0.7x ours RRC+flip, cached",
    "ours RRC+flip, cache fill": f">= 1.3x {TF_RRC}",
    "ours RRC+flip, no cache": f">= 1.3x {TF_RRC}",
    "loader RRC+flip, cached": "within 10% of ours RRC+flip, cached",
    "loader RRC+flip, no cache": "within 10% of ours RRC+flip, no cache",
}


def _row(measure, *references: str) -> Row:
    """A row whose ratios are taken against `references` (row names), the first first."""
    return Row(measure, references)


def _course_notes(builder):
    """The course notes' `augmentation` map (their values), on the 224 records."""
    import tensorflow as tf

    def augmentation(features):
        x = tf.image.random_flip_left_right(features["image"])
        x = tf.image.random_flip_up_down(x)
        x = tf.image.random_brightness(x, max_delta=0.1)
        x = tf.image.random_saturation(x, lower=0.75, upper=1.5)
        x = tf.image.random_hue(x, max_delta=0.15)
        x = tf.image.random_contrast(x, lower=0.75, upper=1.5)
        x = tf.image.resize(x, (SIZE, SIZE))
        return x / 255.0, features["label"]

    ds = builder.as_dataset("train", shuffle_files=False)
    ds = ds.map(augmentation, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
    return ds.prefetch(tf.data.AUTOTUNE)


def _keras_layers(reader):
    """Keras' preprocessing guide: the layers mapped on the batches of a tf.data input."""
    import tensorflow as tf

    augment = tf.keras.Sequential(
        [
            tf.keras.layers.RandomFlip("horizontal"),
            tf.keras.layers.RandomRotation(0.1),
            tf.keras.layers.RandomZoom(0.1),
        ]
    )
    ds = reader.map(
        lambda x, y: (augment(x, training=True), y), num_parallel_calls=tf.data.AUTOTUNE
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def _tf_official_rrc(pairs):
    """TF official models' `random_crop_image` + resize + flip, of (JPEG bytes, label)
    pairs (held in memory, or `tfds.load`'s records)."""
    import tensorflow as tf

    def crop(jpeg, label):
        shape = tf.io.extract_jpeg_shape(jpeg)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4]),
            min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        top, left, _ = tf.unstack(begin)
        height, width, _ = tf.unstack(size)
        window = tf.stack([top, left, height, width])
        image = tf.io.decode_and_crop_jpeg(jpeg, window, channels=3)
        image = tf.image.resize(image, (SIZE, SIZE))  # Plain bilinear: what users write.
        image = tf.image.random_flip_left_right(image)
        return tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8), label

    return _mapped(pairs, crop)


def _tf_center_crop(jpegs, labels, shorter_side: int = 256):
    """Evaluation as users write it: decode, aspect-preserving resize, central crop."""
    import tensorflow as tf

    def center(jpeg, label):
        image = tf.io.decode_jpeg(jpeg, channels=3)
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = shorter_side / tf.reduce_min(shape)
        resized = tf.image.resize(image, tf.cast(tf.round(shape * scale), tf.int32))
        height, width = tf.shape(resized)[0], tf.shape(resized)[1]
        top, left = (height - SIZE) // 2, (width - SIZE) // 2
        image = resized[top : top + SIZE, left : left + SIZE]
        return tf.cast(tf.clip_by_value(image, 0, 255), tf.uint8), label

    return _mapped(_in_memory(jpegs, labels), center)


class Rows:
    """{row name: Row}, made once per run, in the order they are timed and printed."""

    def __init__(
        self,
        data_dir: Path,
        work: Path,
        dali_python: str | None,
        with_loader=True,
        autotune: bool = True,
    ):
        import tensorflow_datasets as tfds

        import cats_vs_dogs_fast  # noqa: F401  (registers the dataset)

        self.data_dir = data_dir
        # TensorFlow's rows; ours always run with tf.data's autotuning off.
        self._tuned = tuned_by(autotune)
        self.unavailable: dict[str, str] = {}
        builders = {
            c: tfds.builder(DATASET, config=c, data_dir=data_dir) for c in ("224", "original")
        }
        self.images = builders["224"].info.splits["train"].num_examples
        jpegs, labels = _jpegs_in_memory(builders["original"])
        rows: dict[str, Row] = {}
        tuned = self._tuned
        rows[TF_RRC] = _row(_epochs(tuned(_tf_official_rrc(_in_memory(jpegs, labels)))))
        records = tfds_records(builders["original"])
        rows[TF_RRC_RECORDS] = _row(_epochs(tuned(_tf_official_rrc(records))))
        rows["TF center crop (eval)"] = _row(_epochs(tuned(_tf_center_crop(jpegs, labels))))
        rows["course notes per-example aug (224)"] = _row(
            _epochs(tuned(_course_notes(builders["224"])))
        )
        cached_224 = self._reader("224", cache=True)
        rows["Keras layers on cached batches (224)"] = _row(
            _epochs(_keras_layers(cached_224)), "course notes per-example aug (224)"
        )
        dali, why = _dali(jpegs, work, dali_python)
        if dali is None:
            self.unavailable["DALI CPU RRC+flip"] = why
        else:
            rows["DALI CPU RRC+flip"] = _row(dali, TF_RRC)
        del jpegs, labels
        self._ours(rows)
        if with_loader:
            self._loader_rows(rows, _array_record_dir(builders["original"]))
        self.rows = rows

    def _reader(self, config: str, **options):
        import tensorflow as tf

        import cats_vs_dogs_fast

        return cats_vs_dogs_fast.as_fast_dataset(
            "train",
            data_dir=self.data_dir,
            config=config,
            download_and_prepare=False,
            image_size=SIZE,
            batch_size=BATCH,
            dtype=tf.uint8,
            shuffle=False,
            **options,
        )

    def _ours(self, rows: dict) -> None:
        try:
            from fast_tfds import Augment

            self._reader("original", cache=False, augment=Augment(), seed=0)
        except (ImportError, AttributeError, TypeError) as err:
            for name in ("RRC+flip, cached", "RRC+flip, cache fill", "RRC+flip, no cache"):
                self.unavailable[f"ours {name}"] = f"as_fast_dataset(augment=) not here: {err}"
            return
        train, jitter, evaluation = Augment(), Augment(**JITTER), Augment.eval()
        fill, served = self._cached(train)
        # A fill row comes before its served row: the fill makes the dataset it serves.
        rows["ours RRC+flip, cache fill"] = _row(fill, TF_RRC, TF_RRC_RECORDS)
        rows["ours RRC+flip, cached"] = _row(served, TF_RRC)
        uncached = self._reader("original", cache=False, augment=train, seed=0)
        rows["ours RRC+flip, no cache"] = _row(_epochs(uncached), TF_RRC, TF_RRC_RECORDS)
        jitter_fill, jitter_served = self._cached(jitter)
        rows["ours RRC+flip+jitter, cache fill"] = _row(jitter_fill, TF_RRC)
        rows["ours RRC+flip+jitter, cached"] = _row(jitter_served, "ours RRC+flip, cached")
        eval_fill, eval_served = self._cached(evaluation)
        rows["ours center crop (eval), cache fill"] = _row(eval_fill, "TF center crop (eval)")
        rows["ours center crop (eval), cached"] = _row(eval_served, "TF center crop (eval)")
        no_aug = self._reader("original", cache=False)
        rows["ours no augmentation, no cache"] = _row(_epochs(no_aug), TF_RRC, TF_RRC_RECORDS)

    def _cached(self, augment):
        """(fill, served): a new dataset every round, so that each round fills its cache."""
        held = {}

        def fill():
            held.pop("ds", None)
            gc.collect()
            held["ds"] = self._reader("original", cache=True, augment=augment, seed=0)
            return _epoch(held["ds"])

        def served():
            return _epoch(held["ds"])

        return fill, served

    def _loader_rows(self, rows: dict, builder_dir: Path) -> None:
        from fast_tfds import as_fast_loader

        try:
            from fast_tfds import Augment

            as_fast_loader(
                DATASET, builder_dir=builder_dir, augment=Augment(), cache=True, batch_size=BATCH
            ).close()
        except (ImportError, AttributeError, TypeError) as err:
            self.unavailable["loader RRC+flip"] = f"as_fast_loader(augment=) not here: {err}"
            return

        def make(cache: bool):
            return as_fast_loader(
                DATASET,
                builder_dir=builder_dir,
                download_and_prepare=False,
                image_size=SIZE,
                batch_size=BATCH,
                shuffle=False,
                seed=0,
                augment=Augment(),
                cache=cache,
                num_epochs=None,
            )

        def epochs_of(loader):
            per_epoch = -(-self.images // BATCH)
            batches = iter(loader)

            def epoch():
                with Clock() as clock:
                    for _ in range(per_epoch):
                        images, _ = next(batches)
                        clock.images += len(images)
                return clock.epoch()

            return epoch

        held = {}

        def fill():
            if "loader" in held:
                held.pop("loader").close()
            gc.collect()
            held["loader"] = make(True)
            held["epoch"] = epochs_of(held["loader"])
            return held["epoch"]()

        rows["loader RRC+flip, cache fill"] = _row(fill, "ours RRC+flip, cache fill")
        rows["loader RRC+flip, cached"] = _row(lambda: held["epoch"](), "ours RRC+flip, cached")

        def uncached():
            loader = make(False)
            try:
                return epochs_of(loader)()
            finally:
                loader.close()

        rows["loader RRC+flip, no cache"] = _row(uncached, "ours RRC+flip, no cache")


# The DALI peer, run by a Python that has DALI (`pip install nvidia-dali-cuda120`).
_DALI = r"""
import json, pickle, sys, time
import numpy as np
from nvidia.dali import fn, pipeline_def, types

jpegs = pickle.load(open(sys.argv[1], "rb"))
batch, size, threads = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
arrays = [np.frombuffer(j, np.uint8) for j in jpegs]

def source(iteration):
    start = iteration * batch
    if start >= len(arrays):
        raise StopIteration
    return arrays[start : start + batch]

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0)
def rrc():
    data = fn.external_source(source=source, batch=True, dtype=types.UINT8)
    images = fn.decoders.image_random_crop(
        data, device="cpu", output_type=types.RGB,
        random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
    images = fn.resize(images, resize_x=size, resize_y=size)
    return fn.flip(images, horizontal=fn.random.coin_flip())

pipe = rrc()
pipe.build()

def epoch():
    images = 0
    start, cpu = time.perf_counter(), time.process_time()
    while True:
        try:
            (out,) = pipe.run()
        except StopIteration:
            break
        images += len(out)
    pipe.reset()
    return {"images": images, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu}

epoch()  # warm-up: allocation, threads
print("EPOCH " + json.dumps(epoch()))
"""


def _dali(jpegs: list[bytes], work: Path, python: str | None):
    """(fn() -> one epoch of DALI's CPU random-resized crop in a process of its own,
    None) or (None, why) when DALI cannot run."""
    python = python or sys.executable
    probe = subprocess.run(
        [python, "-c", "import nvidia.dali"], capture_output=True, text=True, timeout=120
    )
    if probe.returncode != 0:
        return None, (
            f"DALI cannot be imported by {python} "
            "(pip install nvidia-dali-cuda120 into a venv, then --dali-python VENV/bin/python)"
        )
    path = work / "jpegs.pickle"
    path.write_bytes(pickle.dumps(jpegs))

    def epoch():
        done = subprocess.run(
            [python, "-c", _DALI, str(path), str(BATCH), str(SIZE), str(os.cpu_count() or 1)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        line = [x for x in done.stdout.splitlines() if x.startswith("EPOCH ")]
        if done.returncode != 0 or not line:
            raise RuntimeError("DALI row: " + (done.stderr.strip().splitlines() or ["?"])[-1])
        return json.loads(line[-1].removeprefix("EPOCH "))

    return epoch, None


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--images-per-class",
        type=int,
        default=DEFAULT_IMAGES_PER_CLASS,
        help=f"size of the generated sample (default {DEFAULT_IMAGES_PER_CLASS})",
    )
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=f"(default {DEFAULT_ROUNDS})")
    p.add_argument("--quick", action="store_true", help="150 images per class, 2 rounds")
    p.add_argument("--workdir", default=str(data.DEFAULT_WORKDIR), help="where the sample is")
    p.add_argument("--data-dir", help=f"a TFDS data dir with {DATASET} built in 224 and original")
    p.add_argument(
        "--dali-python",
        help="a Python with NVIDIA DALI installed, for the DALI row (default: this one)",
    )
    p.add_argument("--no-loader", action="store_true", help="leave out the Grain loader rows")
    p.add_argument(
        "--no-autotune",
        action="store_true",
        help="tf.data's autotuning off in TensorFlow's rows too (ours always run without it)",
    )
    p.add_argument("--out", help="the JSON (default: benchmarks/results/bench-recipes-DATE.json)")
    args = p.parse_args(argv)
    if args.quick:
        args.images_per_class, args.rounds = 150, 2
    check_counts(p, args)
    return args


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks recipes") -> None:
    args = parse_args(argv, prog)
    from fast_tfds.quiet import quiet_tensorflow

    quiet_tensorflow()
    data_dir = sample_dir(args)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fast_tfds_recipes_") as tmp:
        made = Rows(
            data_dir,
            Path(tmp),
            args.dali_python,
            with_loader=not args.no_loader,
            autotune=not args.no_autotune,
        )
        unavailable = made.unavailable
        rows = {n: r for n, r in made.rows.items() if all(ref in made.rows for ref in r.references)}
        images = made.images
        print(f"{images:,} images; {len(rows)} rows, {args.rounds} rounds", flush=True)
        warmup, timed = run(rows, args.rounds)
        summary = summarize(rows, timed)
        del made, rows
        gc.collect()
    errors = count_errors(warmup, timed, images)
    print()
    print(
        f"{images:,} images, batches of {BATCH} at {SIZE} px, {args.rounds} interleaved "
        f"rounds, {time.perf_counter() - started:.0f} s"
    )
    print(table(summary, timed))
    for name, why in unavailable.items():
        print(f"{name}: not run: {why}")
    print("\nTargets (issue 23), for reading the ratios above:")
    for name, target in TARGETS.items():
        print(f"  {name}: {target}")
    result = {
        "schema": 1,
        "mode": "recipes",
        "command": " ".join([prog, *(sys.argv[1:] if argv is None else argv)]),
        "machine": data.machine_info(),
        "data_dir": os.fspath(data_dir),
        "images_per_epoch": images,
        "rounds": args.rounds,
        "batch_size": BATCH,
        "size": SIZE,
        "tf_data_autotune": not args.no_autotune,
        "references": {name: s.get("vs") for name, s in summary.items()},
        "unavailable": unavailable,
        "targets": TARGETS,
        "warmup": warmup,
        "epochs": timed,
        "summary": summary,
        "counts_consistent": not errors,
        "errors": errors,
    }
    out = Path(args.out) if args.out else default_out("recipes")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"Wrote {out}")
    if errors:
        raise SystemExit("benchmark recipes:\n" + "\n".join(errors))


if __name__ == "__main__":
    main(prog="python -m benchmarks.recipes")
