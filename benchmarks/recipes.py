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
  with and without its cache;
- issue 31's stronger recipes, each ours cached (and the fill), without a cache and the
  loader's three: `Augment(rotate=15)` (against the crop + flip), TrivialAugmentWide +
  erasing 0.25, torchvision's RandAugment, timm's `rand-m9-mstd0.5-inc1`, and
  TrivialAugmentWide + erasing with timm's `Mix(0.8, 1.0, label_smoothing=0.1)` (mix=
  reads shuffled, so against the same recipe read shuffled, unmixed);
- their peers, on the same JPEG bytes: Keras' `RandAugment` layer mapped on the batches
  of TF official's crop (`Keras RandAugment on TF RRC batches`, what Keras documents);
  and, each in a process of its own with its own Python (`benchmarks.peers`; an optional
  install: a row that cannot run says why): TF Model Garden's RandAugment mapped per
  example after the same crop (`--tfm-python`), torchvision v2's RandomResizedCrop + flip
  + TrivialAugmentWide + RandomErasing(0.25) on uint8 tensors in a `DataLoader` with 2
  workers (`--torch-python`), and DALI's `auto_aug` TrivialAugmentWide and RandAugment
  after its crop, on the CPU (`--dali-python`).

Every ratio names the row it is taken against. Every epoch must count every image.
Per core, for issue 31's targets: images per CPU-second (CPU seconds of every thread of
the process, and of a peer's worker processes), the row's over its reference's, per round.
Ours run with tf.data's autotuning off (as `as_fast_dataset` returns them); TensorFlow's
rows run at tf.data's defaults, as users write them, unless `--no-autotune` turns it off
there too (the decoders' comparison: no epoch of theirs then runs on one core).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import data, options, peers
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

# The peers of issue 31's recipes. Keras' RandAugment layer mapped on the batches of TF
# official's crop (Keras documents the layer on tf.data batches; Keras has no random-resized
# crop), at its defaults (2 ops, factor 0.5).
KERAS_RA = "Keras RandAugment on TF RRC batches"
MODEL_GARDEN_RA = "Model Garden RandAugment per example"
TORCHVISION_TA = "torchvision v2 TrivialAugment+erase"
TORCH_WORKERS = 2
DALI_RRC = "DALI CPU RRC+flip"
DALI_TA = "DALI CPU RRC+flip+TrivialAugment"
DALI_RA = "DALI CPU RRC+flip+RandAugment"
# Ours, each a row cached (with its fill), without a cache, and the loader's.
ROTATE = "RRC+flip+rotate 15"
TA_ERASE = "TrivialAugment+erase"
# The strongest recipe's settings, ours and the peers' (torchvision's RandomErasing, timm's
# Mixup take the same names): erasing's probability, and MixUp / CutMix as timm's defaults.
ERASE = 0.25
MIX = {"mixup_alpha": 0.8, "cutmix_alpha": 1.0, "label_smoothing": 0.1}
RAND_AUGMENT = "RandAugment"
TIMM_RA = "timm rand-m9-mstd0.5-inc1"
TA_ERASE_SHUFFLED = "TrivialAugment+erase shuffled"
MIXED = "TrivialAugment+erase+mix"
_RA_PEERS = (KERAS_RA, MODEL_GARDEN_RA, DALI_RA)
# recipe: (references of its cached row, of its no-cache row), the first first.
STRONG = {
    ROTATE: (("ours RRC+flip, cached",), ("ours RRC+flip, no cache",)),
    TA_ERASE: (
        ("ours RRC+flip, cached", KERAS_RA, MODEL_GARDEN_RA, TORCHVISION_TA, DALI_TA),
        ("ours RRC+flip, no cache", KERAS_RA, MODEL_GARDEN_RA, TORCHVISION_TA, DALI_TA),
    ),
    RAND_AUGMENT: (("ours RRC+flip, cached", *_RA_PEERS), ("ours RRC+flip, no cache", *_RA_PEERS)),
    TIMM_RA: (("ours RRC+flip, cached", *_RA_PEERS), ("ours RRC+flip, no cache", *_RA_PEERS)),
    MIXED: ((f"ours {TA_ERASE_SHUFFLED}, cached",), (f"ours {TA_ERASE}, no cache",)),
}

# Issue targets, printed next to what was measured (facts, not pass/fail).
TARGETS = {
    "ours RRC+flip, cached": f">= 10,000 images/s and >= 4x {TF_RRC}",
    "ours RRC+flip+jitter, cached": ">= 0.7x ours RRC+flip, cached",
    "ours RRC+flip, cache fill": f">= 1.3x {TF_RRC}",
    "ours RRC+flip, no cache": f">= 1.3x {TF_RRC}",
    "loader RRC+flip, cached": "within 10% of ours RRC+flip, cached",
    "loader RRC+flip, no cache": "within 10% of ours RRC+flip, no cache",
}


PEERS = (KERAS_RA, MODEL_GARDEN_RA, TORCHVISION_TA, DALI_TA, DALI_RA)
# Issue 31's targets: (row, reference, how the ratio is taken, the target). "images/s": the
# row's rate over the reference's; "per core": the same of images per CPU-second (each side's
# CPU seconds: every thread of its process, and its worker processes); "time": the row's
# time per image over the reference's (the inverse of the rate ratio).
STRONG_TARGETS = (
    (f"ours {TA_ERASE}, cached", "ours RRC+flip, cached", "images/s", ">=", 0.5),
    (f"ours {TA_ERASE}, cached", KERAS_RA, "images/s", ">=", 50),
    (f"ours {TA_ERASE}, cached", MODEL_GARDEN_RA, "per core", ">=", 3),
    (f"ours {TA_ERASE}, cached", TORCHVISION_TA, "per core", ">=", 3),
    (f"ours {ROTATE}, cached", "ours RRC+flip, cached", "time", "<=", 1.1),
    (f"ours {MIXED}, cached", f"ours {TA_ERASE_SHUFFLED}, cached", "time", "<=", 1.1),
)


def strongest():
    """TrivialAugmentWide + erasing: the strongest recipe's `Augment` (with `Mix(**MIX)`)."""
    from fast_tfds import Augment

    return Augment(auto_augment="trivial_augment_wide", erase=ERASE)


def per_core(rows: dict[str, Row], timed: dict) -> dict:
    """{row: {reference: median, min and max over rounds of the ratio of images per
    CPU-second}}: per core, what each side did with the CPU time it took."""
    out = {}
    for name, row in rows.items():
        for reference in row.references:
            pairs = list(zip(timed[name], timed[reference], strict=True))
            if any(e["cpu_seconds"] <= 0 for pair in pairs for e in pair):
                continue  # An epoch shorter than the CPU clock's tick (a tiny sample).
            ratios = [
                (a["images"] / a["cpu_seconds"]) / (b["images"] / b["cpu_seconds"])
                for a, b in pairs
            ]
            out.setdefault(name, {})[reference] = {
                "median": statistics.median(ratios),
                "min": min(ratios),
                "max": max(ratios),
            }
    return out


def strong_targets(summary: dict, cores: dict) -> list[str]:
    """One line per target of issue 31: what was measured against it, or why not."""
    lines = []
    for name, reference, how, sign, target in STRONG_TARGETS:
        if name not in summary or reference not in summary:
            missing = name if name not in summary else reference
            lines.append(f"  {name} vs {reference}: {how} {sign} {target}: {missing} did not run")
            continue
        ratios = (
            cores if how == "per core" else {n: s.get("ratios", {}) for n, s in summary.items()}
        )
        r = ratios.get(name, {}).get(reference)
        if r is None:
            lines.append(f"  {name} vs {reference}: {how}: CPU time below the clock's tick")
            continue
        if how == "time":
            low, median, high = 1 / r["max"], 1 / r["median"], 1 / r["min"]
        else:
            low, median, high = r["min"], r["median"], r["max"]
        met = median >= target if sign == ">=" else median <= target
        lines.append(
            f"  {name} vs {reference}: {how} {sign} {target}: measured {median:.2f}x "
            f"[{low:.2f}-{high:.2f}] ({'met' if met else 'NOT met'})"
        )
    return lines


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
    return _mapped(pairs, tf_official_crop())


def tf_official_crop():
    """fn(jpeg, label) -> (uint8 224 x 224 picture, label): the crop of `_tf_official_rrc`,
    per example (the Model Garden peer runs it too, in a process of its own)."""
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

    return crop


def _keras_randaugment(pairs):
    """Keras' `RandAugment` layer (its defaults: 2 ops, factor 0.5) mapped on the batches
    of TF official's crop, as Keras documents preprocessing layers on tf.data."""
    import tensorflow as tf

    randaug = tf.keras.layers.RandAugment(value_range=(0, 255))

    def augment(images, labels):
        images = randaug(images, training=True)
        return tf.cast(tf.clip_by_value(images, 0, 255), tf.uint8), labels

    ds = _tf_official_rrc(pairs).map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


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
        pythons: dict[str, str | None] | None = None,
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
        rows[KERAS_RA] = _row(_epochs(tuned(_keras_randaugment(_in_memory(jpegs, labels)))), TF_RRC)
        self._peers(rows, work, jpegs, labels, pythons or {})
        del jpegs, labels
        self._ours(rows)
        if with_loader:
            self._loader_rows(rows, _array_record_dir(builders["original"]))
        self._strong(rows, _array_record_dir(builders["original"]) if with_loader else None)
        self.rows = rows

    def _peers(self, rows: dict, work: Path, jpegs, labels, pythons: dict) -> None:
        """The optional peers, each in a process of its own (`benchmarks.peers`)."""
        jpegs_path = peers.pickled(work, "jpegs.pickle", jpegs)
        pairs_path = peers.pickled(work, "pairs.pickle", (jpegs, labels))
        dali_how = "pip install nvidia-dali-cuda120 into a venv, then --dali-python VENV/bin/python"
        threads = str(os.cpu_count() or 1)
        for name, policy, reference in (
            (DALI_RRC, "rrc", TF_RRC),
            (DALI_TA, "trivial_augment_wide", DALI_RRC),
            (DALI_RA, "rand_augment", DALI_RRC),
        ):
            args = [jpegs_path, str(BATCH), str(SIZE), threads, policy]
            epoch, why = peers.peer(
                pythons.get("dali"), "nvidia.dali", dali_how, peers.DALI, args, work
            )
            self._peer_row(rows, name, epoch, why, reference)
        tfm_how = (
            "pip install --no-deps tf-models-official tf-keras gin-config pycocotools into a "
            "venv that sees this TensorFlow, then --tfm-python VENV/bin/python"
        )
        args = [pairs_path, str(BATCH), str(SIZE), peers.repo_root()]
        epoch, why = peers.peer(
            pythons.get("tfm"),
            "official.vision.ops.augment",
            tfm_how,
            peers.MODEL_GARDEN,
            args,
            work,
        )
        self._peer_row(rows, MODEL_GARDEN_RA, epoch, why, TF_RRC)
        torch_how = (
            "pip install torch==2.14.1 torchvision==0.29.1 into a venv, "
            "then --torch-python VENV/bin/python"
        )
        args = [pairs_path, str(BATCH), str(SIZE), str(TORCH_WORKERS), str(ERASE)]
        args.append(peers.repo_root())
        epoch, why = peers.peer(
            pythons.get("torch"),
            "torchvision.transforms.v2",
            torch_how,
            peers.TORCHVISION,
            args,
            work,
        )
        self._peer_row(rows, TORCHVISION_TA, epoch, why, TF_RRC)

    def _peer_row(self, rows: dict, name: str, epoch, why: str | None, reference: str) -> None:
        if epoch is None:
            self.unavailable[name] = why
        else:
            rows[name] = _row(epoch, reference)

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
            **{"shuffle": False, **options},
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

    def _cached(self, augment, **options):
        """(fill, served): a new dataset every round, so that each round fills its cache."""
        held = {}

        def fill():
            held.pop("ds", None)
            gc.collect()
            held["ds"] = self._reader("original", cache=True, augment=augment, seed=0, **options)
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

        self._loader_recipe(rows, builder_dir, "RRC+flip", Augment())

    def _loader_recipe(self, rows: dict, builder_dir: Path, recipe: str, augment, mix=None):
        """The loader's fill, cached and no-cache rows of one recipe, each against ours."""
        from fast_tfds import as_fast_loader

        def make(cache: bool):
            return as_fast_loader(
                DATASET,
                builder_dir=builder_dir,
                download_and_prepare=False,
                image_size=SIZE,
                batch_size=BATCH,
                shuffle=mix is not None,  # mix= is for training reads: shuffled
                seed=0,
                augment=augment,
                mix=mix,
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

        rows[f"loader {recipe}, cache fill"] = _row(fill, f"ours {recipe}, cache fill")
        rows[f"loader {recipe}, cached"] = _row(lambda: held["epoch"](), f"ours {recipe}, cached")

        def uncached():
            loader = make(False)
            try:
                return epochs_of(loader)()
            finally:
                loader.close()

        rows[f"loader {recipe}, no cache"] = _row(uncached, f"ours {recipe}, no cache")

    def _strong(self, rows: dict, builder_dir: Path | None) -> None:
        """Issue 31's recipes: ours cached (and its fill), without a cache, and the loader."""
        try:
            from fast_tfds import Augment, Mix

            Augment(auto_augment="trivial_augment_wide", erase=ERASE, rotate=15)
        except (ImportError, TypeError) as err:
            for recipe in STRONG:
                self.unavailable[f"ours {recipe}"] = f"Augment(auto_augment=...) not here: {err}"
            return
        mix = Mix(**MIX)
        recipes = {
            ROTATE: Augment(rotate=15),
            TA_ERASE: strongest(),
            RAND_AUGMENT: Augment(auto_augment="rand_augment"),
            TIMM_RA: Augment(auto_augment="rand-m9-mstd0.5-inc1"),
        }
        for recipe, augment in recipes.items():
            cached, uncached = STRONG[recipe]
            fill, served = self._cached(augment)
            rows[f"ours {recipe}, cache fill"] = _row(fill, "ours RRC+flip, cache fill")
            rows[f"ours {recipe}, cached"] = _row(served, *cached)
            no_cache = self._reader("original", cache=False, augment=augment, seed=0)
            rows[f"ours {recipe}, no cache"] = _row(_epochs(no_cache), *uncached)
        # mix= needs a shuffled (training) read: its reference is the same read unmixed.
        fill, served = self._cached(recipes[TA_ERASE], shuffle=True)
        rows[f"ours {TA_ERASE_SHUFFLED}, cache fill"] = _row(fill, f"ours {TA_ERASE}, cache fill")
        rows[f"ours {TA_ERASE_SHUFFLED}, cached"] = _row(served, f"ours {TA_ERASE}, cached")
        fill, served = self._cached(recipes[TA_ERASE], shuffle=True, mix=mix)
        rows[f"ours {MIXED}, cache fill"] = _row(fill, f"ours {TA_ERASE_SHUFFLED}, cache fill")
        rows[f"ours {MIXED}, cached"] = _row(served, *STRONG[MIXED][0])
        no_cache = self._reader(
            "original", cache=False, augment=recipes[TA_ERASE], seed=0, shuffle=True, mix=mix
        )
        rows[f"ours {MIXED}, no cache"] = _row(_epochs(no_cache), *STRONG[MIXED][1])
        if builder_dir is not None:
            for recipe, augment in recipes.items():
                self._loader_recipe(rows, builder_dir, recipe, augment)
            self._loader_recipe(rows, builder_dir, MIXED, recipes[TA_ERASE], mix)


def parse_args(argv: list[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_images_per_class(p, DEFAULT_IMAGES_PER_CLASS)
    options.add_rounds(p, DEFAULT_ROUNDS)
    p.add_argument("--quick", action="store_true", help="150 images per class, 2 rounds")
    p.add_argument("--workdir", default=str(data.DEFAULT_WORKDIR), help="where the sample is")
    p.add_argument("--data-dir", help=f"a TFDS data dir with {DATASET} built in 224 and original")
    p.add_argument(
        "--dali-python",
        help="a Python with NVIDIA DALI installed, for the DALI rows (default: this one)",
    )
    p.add_argument(
        "--tfm-python",
        help="a Python with tf-models-official beside TensorFlow, for Model Garden's "
        "RandAugment row (default: this one)",
    )
    p.add_argument(
        "--torch-python",
        help="a Python with torch and torchvision, for torchvision's row (default: this one)",
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
    options.check_counts(p, args)
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
            {"dali": args.dali_python, "tfm": args.tfm_python, "torch": args.torch_python},
            with_loader=not args.no_loader,
            autotune=not args.no_autotune,
        )
        unavailable = made.unavailable
        # A reference that did not run (an optional peer) is left out of the row's ratios.
        rows = {
            n: Row(r.measure, tuple(ref for ref in r.references if ref in made.rows))
            for n, r in made.rows.items()
        }
        images = made.images
        print(f"{images:,} images; {len(rows)} rows, {args.rounds} rounds", flush=True)
        warmup, timed = run(rows, args.rounds)
        summary = summarize(rows, timed)
        cores = per_core(rows, timed)
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
    print("\nPer core: images per CPU-second (CPU seconds of every thread of the process, and of")
    print("a peer's worker processes), the row's over its reference's, median [min-max] of rounds:")
    for name, by_reference in cores.items():
        for reference, r in by_reference.items():
            if reference in PEERS:
                ratio = f"{r['median']:.2f}x [{r['min']:.2f}-{r['max']:.2f}]"
                print(f"  {name:<44} {ratio:<20} of {reference}")
    print("\nTargets (issue 31), the median of the per-round ratios [min-max]:")
    print("\n".join(strong_targets(summary, cores)))
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
        "per_core": cores,
        "strong_targets": strong_targets(summary, cores),
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
