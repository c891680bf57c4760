"""tf.data's own with `augment=`: slices numbered from their start, the plans chosen, a
seed drawn when none is given, cached epochs that never decode, crops through a cache at
another resolution, the center crop against TensorFlow's, the same pixels as the Grain
loader, Stanford Dogs' crops inside the box, exact cardinality, progressive sizes, caches
on disk and persisted, one-line errors. What both back ends promise (every example once
per epoch with its own window, the stronger recipes, new windows every epoch, each
input pipeline's share) is tests/reading/test_augment.py's.

Examples are identified by (label, filename) against TFDS's own reader; expected
pixels are computed independently from TensorFlow's decode of the stored JPEG, the
windows of `fast_tfds.augment.windows` and its kernel (tests/reading/augmented.py).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from fast_tfds import Augment, ProgressiveResize
from fast_tfds.augment import kernels, windows
from fast_tfds.cache import disk_rows
from fast_tfds.cache import pictures as ragged
from fast_tfds.core import jpeg_blocks
from fast_tfds.read import cached, plans
from fast_tfds.read.split_reading import Reading
from stanford_dogs_tfrecord import crops
from tests.loader import conftest as loader_fixtures
from tests.reading import conftest as reading_fixtures
from tests.reading.augmented import JITTER, STRONG, expected_images
from tests.reading.backends import persisted

# The loader tests' ArrayRecord build (Stanford Dogs' TFRecord build is tests/conftest.py's).
cats_array_record_dir = loader_fixtures.cats_array_record_dir
stanford_array_record_dir = loader_fixtures.stanford_array_record_dir
# The split's examples by index, with their stored pixels (shared with tests/reading/).
cats_split = reading_fixtures.cats_split

BATCH = 8
# Epochs 0, 1, 2, 3...: 96, 128, 160, 160 px.
PROGRESSIVE = ProgressiveResize(start=96, end=160, start_epoch=0, end_epoch=2, step=32)
SEED = 3


def read(data_dir, config="224", **options):
    options = {
        "batch_size": BATCH,
        "dtype": tf.uint8,
        "seed": SEED,
        "as_supervised": False,
        "augment": Augment(),
        **options,
    }
    return cats_vs_dogs_fast.as_fast_dataset(
        "train", data_dir=data_dir, config=config, download_and_prepare=False, **options
    )


def split_examples(data_dir, name="cats_vs_dogs_fast", config="224") -> list[dict]:
    """The split's examples in example-index order (TFDS's own reader, files in order,
    one at a time), images as stored JPEG bytes."""
    builder = tfds.builder(f"{name}/{config}", data_dir=data_dir)
    ds = builder.as_dataset(
        "train",
        shuffle_files=False,
        read_config=tfds.ReadConfig(interleave_cycle_length=1),
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    return list(ds.as_numpy_iterator())


def one_epoch(ds) -> dict[str, tuple[int, np.ndarray]]:
    """{filename: (label, image)} of one iteration; an example twice is an error."""
    out = {}
    for batch in ds:
        for name, label, image in zip(
            batch["image/filename"].numpy(),
            batch["label"].numpy(),
            batch["image"].numpy(),
            strict=True,
        ):
            assert name.decode() not in out, f"{name} twice in one epoch"
            out[name.decode()] = (int(label), image)
    return out


# Rotation, TrivialAugmentWide and random erasing: the warp kernel (`recipe`).
@pytest.mark.parametrize("cache", [False, True])
def test_a_slice_numbers_its_examples_from_its_own_start(cats_data_dir, cats_split, cache):
    # As the loader does: example i of 'train[25%:]' is its i-th record as read.
    ds = cats_vs_dogs_fast.as_fast_dataset(
        "train[25%:]",
        data_dir=cats_data_dir,
        download_and_prepare=False,
        batch_size=BATCH,
        dtype=tf.uint8,
        seed=SEED,
        as_supervised=False,
        augment=Augment(),
        cache=cache,
    )
    start = len(cats_split) // 4
    assert len(cats_split) % 4 == 0
    for epoch in range(2):
        got = one_epoch(ds)
        assert len(got) == len(cats_split) - start
        pictures = [ex.pixels for ex in cats_split[start:]]
        for index, (name, _, _) in enumerate(cats_split[start:]):
            np.testing.assert_array_equal(
                got[name][1], expected_images(Augment(), SEED, epoch, [index], pictures)[0]
            )


def test_the_plans_chosen(cats_data_dir):
    builder = tfds.builder("cats_vs_dogs_fast/224", data_dir=cats_data_dir)
    for cache, plan in ((True, plans.Plan.CACHED), (False, plans.Plan.STREAM)):
        options = read_options(augment=Augment(), cache=cache)
        assert plans.choose_plan(Reading.start(builder, "train", options)) is plan


def read_options(**changes):
    from fast_tfds.read.options import ReadOptions

    return ReadOptions(**changes)


def test_without_a_seed_one_is_drawn_and_epochs_still_differ(cats_data_dir):
    ds = read(cats_data_dir, seed=None, cache=True)
    first, second = one_epoch(ds), one_epoch(ds)
    assert first.keys() == second.keys()
    assert sum(np.array_equal(first[n][1], second[n][1]) for n in first) <= 1


def test_cached_epochs_never_decode_nor_open_the_shards(
    cats_data_dir, cats_split, tmp_path, monkeypatch
):
    data_dir = tmp_path / "data"
    shutil.copytree(cats_data_dir / "cats_vs_dogs_fast" / "224", data_dir / "cats_vs_dogs_fast/224")
    calls = collections.Counter()
    decode = jpeg_blocks.decode_resized_into

    def counting(*args, **kwargs):
        calls["decode"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(jpeg_blocks, "decode_resized_into", counting)
    ds = read(data_dir, cache=True, shuffle=True)
    first = one_epoch(ds)
    assert calls["decode"] == len(cats_split)  # each picture once
    shards = list((data_dir / "cats_vs_dogs_fast/224").glob("*/*.tfrecord*"))
    assert shards
    for shard in shards:
        shard.unlink()
    second = one_epoch(ds)
    assert calls["decode"] == len(cats_split)
    assert first.keys() == second.keys()
    pictures = [ex.pixels for ex in cats_split]
    for index, (name, label, _) in enumerate(cats_split):
        assert second[name][0] == label
        np.testing.assert_array_equal(
            second[name][1], expected_images(Augment(), SEED, 1, [index], pictures)[0]
        )
    assert sum(np.array_equal(first[n][1], second[n][1]) for n in first) <= 1


def test_crops_served_from_the_cache_match_those_of_the_full_decode(cats_data_dir):
    # 'original': 96 x 80 pictures. Read at 96, the cache (shorter side 110) holds
    # each picture whole, and its crops are those of the full decode, pixel for pixel.
    # Read at 64, it holds them at a 74 px shorter side (64 * 8/7, 0.93 of the
    # picture), and a crop is resampled twice, from fewer pixels: the stated bound is
    # a mean absolute difference <= 5 levels over the split and <= 14 per image. These
    # pictures are cut from textured photographs (gravel, grass), where two
    # resamplings differ most: the sample gives 4.2 and 9.5.
    for image_size in (96, 64):
        options = {"config": "original", "image_size": image_size}
        direct = read(cats_data_dir, cache=False, **options)
        through_cache = read(cats_data_dir, cache=True, **options)
        for _ in range(2):
            a, b = one_epoch(direct), one_epoch(through_cache)
            assert a.keys() == b.keys()
            differences = [np.abs(a[n][1].astype(int) - b[n][1]).mean() for n in a]
            if image_size == 96:
                assert max(differences) == 0
            else:
                assert np.mean(differences) <= 5 and max(differences) <= 14, differences
        if image_size == 64:
            cache = ds_cache(through_cache)
            assert max(cache.pictures.heights) == 74  # smaller than stored


def test_the_cache_keeps_pictures_at_the_cache_resolution(cats_data_dir):
    builder = tfds.builder("cats_vs_dogs_fast/original", data_dir=cats_data_dir)
    reading = Reading.start(
        builder,
        "train",
        read_options(augment=Augment(), image_size=64, cache_shorter_side=50),
    )
    cache = cached.make_cache(reading, cached.cached_features(reading))
    examples = split_examples(cats_data_dir, config="original")
    sizes = [tf.io.decode_jpeg(ex["image"]).shape[:2] for ex in examples]
    np.testing.assert_array_equal(cache.pictures.reference_heights, [h for h, _ in sizes])
    np.testing.assert_array_equal(cache.pictures.reference_widths, [w for _, w in sizes])
    heights, widths = ragged.cache_size([h for h, _ in sizes], [w for _, w in sizes], 50)
    assert cache.pictures.nbytes == int(np.sum(heights * widths * 3))
    assert min(np.minimum(heights, widths)) <= 50


def tf_resized(pixels, size) -> np.ndarray:
    resized = tf.image.resize(pixels, size, antialias=True)
    return tf.cast(tf.round(tf.clip_by_value(resized, 0, 255)), tf.uint8).numpy()


def test_center_crop_matches_resize_then_central_crop(cats_data_dir):
    # Reference: TensorFlow's decode, an aspect-preserving antialiased resize to
    # size / 0.875 on the shorter side, and a central size x size crop; the 'original'
    # pictures are 96 x 80. At 70 the resize is none (70 / 0.875 = 80): the same
    # pixels. At 64, ours cuts the window in the stored pixels and resizes once; the
    # reference's crop lies on the resized grid, up to a pixel apart, and these
    # pictures are cut from textured photographs, where that shows: stated bound, mean
    # absolute difference <= 6 levels over the split and <= 12 per image (the sample
    # gives 5.0 and 10.1). The same window resized by TensorFlow isolates the filter:
    # <= 1.5 and <= 2.5 (0.75 and 1.3).
    for size in (70, 64):
        got = one_epoch(
            read(
                cats_data_dir,
                config="original",
                image_size=size,
                augment=Augment.eval(),
                cache=False,
            )
        )
        to_reference, to_same_window = [], []
        for ex in split_examples(cats_data_dir, config="original"):
            pixels = tf.io.decode_jpeg(ex["image"], channels=3)
            height, width = pixels.shape[:2]
            scale = (size / 0.875) / min(height, width)
            resized = tf_resized(pixels, (round(height * scale), round(width * scale)))
            top, left = (resized.shape[0] - size) // 2, (resized.shape[1] - size) // 2
            reference = resized[top : top + size, left : left + size]
            side = round(0.875 * min(height, width))
            top, left = round((height - side) / 2), round((width - side) / 2)
            same_window = tf_resized(pixels[top : top + side, left : left + side], (size, size))
            image = got[ex["image/filename"].decode()][1].astype(int)
            to_reference.append(np.abs(image - reference).mean())
            to_same_window.append(np.abs(image - same_window).mean())
        assert len(to_reference) == len(got)
        if size == 70:
            assert max(to_reference) == 0
        else:
            assert np.mean(to_reference) <= 6 and max(to_reference) <= 12, to_reference
            assert np.mean(to_same_window) <= 1.5 and max(to_same_window) <= 2.5


@pytest.mark.parametrize(
    "config, image_size, cache, augment",
    [
        ("224", 224, False, JITTER),
        ("224", 224, True, JITTER),
        ("original", 96, False, JITTER),
        ("original", 96, True, JITTER),
        ("original", PROGRESSIVE, False, JITTER),
        ("original", PROGRESSIVE, True, JITTER),
        ("original", 96, False, STRONG),
        ("original", 96, True, STRONG),
        ("original", 64, True, Augment(auto_augment="rand-m9-mstd0.5-inc1", rotate=10)),
    ],
)
def test_the_same_pixels_as_the_grain_loader(
    cats_data_dir,
    cats_array_record_dir,
    config,
    image_size,
    cache,
    augment,
):
    pytest.importorskip("grain")
    source = tfds.data_source(
        f"cats_vs_dogs_fast/{config}",
        split="train",
        data_dir=cats_array_record_dir,
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    names = [ex["image/filename"].decode() for ex in source]
    # Both builds hold the examples in one order: an example's index is the same.
    assert names == [
        ex["image/filename"].decode() for ex in split_examples(cats_data_dir, config=config)
    ]
    options = {"augment": augment, "seed": 11, "image_size": image_size, "cache": cache}
    loader = cats_vs_dogs_fast.as_fast_loader(
        "train",
        data_dir=cats_array_record_dir,
        config=config,
        download_and_prepare=False,
        batch_size=BATCH,
        shuffle=False,  # batches in index order
        num_threads=2,
        **options,
    )
    ds = read(cats_data_dir, config=config, **options)
    for _ in range(2):  # epochs 0 and 1 of both
        ours = one_epoch(ds)
        theirs = np.concatenate([images for images, _ in loader])
        assert len(theirs) == len(ours) == len(names)
        for index, name in enumerate(names):
            np.testing.assert_array_equal(ours[name][1], theirs[index], err_msg=name)


@pytest.fixture(scope="module")
def stanford_split(stanford_tfrecord_dir):
    """Per example index: (label, TensorFlow's pixels, the first box's window)."""
    out = []
    for ex in split_examples(stanford_tfrecord_dir, name="stanford_dogs_tfrecord"):
        pixels = tf.io.decode_jpeg(ex["image"], channels=3).numpy()
        box = crops.first_box_window(np.asarray(ex["objects"]["bbox"]), *pixels.shape[:2])
        out.append((int(ex["label"]), pixels, tuple(int(v) for v in box)))
    return out


@pytest.mark.parametrize("cache", [False, True])
def test_stanford_dogs_crops_lie_within_the_box(stanford_tfrecord_dir, stanford_split, cache):
    assert any(box[2:] != p.shape[:2] for _, p, box in stanford_split)
    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train",
        data_dir=stanford_tfrecord_dir,
        download_and_prepare=False,
        batch_size=4,
        dtype=tf.uint8,
        seed=7,
        crop_to_box=True,
        augment=Augment(),
        cache=cache,
    )
    for epoch in range(2):
        # The window of each example, drawn in its box, cut from the full picture.
        expected = collections.Counter()
        for index, (label, pixels, box) in enumerate(stanford_split):
            drawn = windows.sample(windows.Draw(Augment(), 7, epoch, [index]), [box[2]], [box[3]])
            assert drawn.top[0] + drawn.height[0] <= box[2]
            assert drawn.left[0] + drawn.width[0] <= box[3]
            in_picture = dataclasses.replace(
                drawn, top=drawn.top + box[0], left=drawn.left + box[1]
            )
            image = kernels.apply_into([pixels], in_picture, np.zeros((1, 224, 224, 3), np.uint8))
            expected[(label, image[0].tobytes())] += 1
        got = collections.Counter(
            (int(label), image.tobytes())
            for images, labels in ds
            for image, label in zip(images.numpy(), labels.numpy(), strict=True)
        )
        # Every example once, each with its own window inside its box (boxes of a 224
        # picture are cached whole: the same pixels with and without the cache).
        assert got == expected


def test_stanford_dogs_boxes_come_with_augmented_crops(stanford_tfrecord_dir, stanford_split):
    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train",
        data_dir=stanford_tfrecord_dir,
        download_and_prepare=False,
        batch_size=4,
        dtype=tf.uint8,
        seed=7,
        crop_to_box=True,
        with_boxes=True,
        augment=Augment(),
        cache=False,
    )
    labels = []
    for images, targets in ds:
        assert images.shape[1:] == (224, 224, 3)
        assert targets["bbox"].shape.as_list() == [images.shape[0], None, 4]
        labels += targets["label"].numpy().tolist()
    assert sorted(labels) == sorted(label for label, _, _ in stanford_split)


def test_stanford_dogs_cache_needs_fixed_size_features(stanford_tfrecord_dir):
    with pytest.raises(ValueError, match=r"^cache=True: with augment= the cache keeps") as err:
        stanford_dogs_tfrecord.as_fast_dataset(
            "train",
            data_dir=stanford_tfrecord_dir,
            download_and_prepare=False,
            as_supervised=False,
            crop_to_box=True,
            augment=Augment(),
            cache=True,
        )
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("num_epochs", [1, 2])
@pytest.mark.parametrize("batch_size, drop", [(BATCH, False), (BATCH, True), (None, False)])
@pytest.mark.parametrize("cache", [False, True])
def test_cardinality_is_exact(cats_data_dir, cats_split, num_epochs, batch_size, drop, cache):
    ds = read(
        cats_data_dir,
        cache=cache,
        batch_size=batch_size,
        drop_remainder=drop,
        num_epochs=num_epochs,
        as_supervised=True,
    )
    n, epochs = len(cats_split), num_epochs
    per_epoch = n if batch_size is None else (n // BATCH if drop else -(-n // BATCH))
    assert int(ds.cardinality()) == per_epoch * epochs
    elements = list(ds)
    assert len(elements) == per_epoch * epochs
    if drop:
        assert {int(images.shape[0]) for images, _ in elements} == {BATCH}
        assert ds.element_spec[0].shape[0] == BATCH
    if batch_size is None:
        assert elements[0][0].shape == (224, 224, 3)


def test_float_supervised_output(cats_data_dir):
    images, labels = next(iter(read(cats_data_dir, dtype=tf.float32, as_supervised=True)))
    assert images.dtype == tf.float32 and labels.dtype == tf.int64
    assert 0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 1


@pytest.mark.parametrize(
    "options, message",
    [
        ({"image_size": None}, r"^image_size=None: augment= crops and resizes"),
        ({"cache": "/tmp/x"}, r"^cache='/tmp/x': a file cache would freeze"),
        ({"service": "grpc://localhost:5000"}, r"^service='grpc://localhost:5000': augment="),
        (
            {"image_size": PROGRESSIVE, "augment": None},
            r"^as_fast_dataset\(image_size=ProgressiveResize\(.*needs augment= with a crop",
        ),
        (
            {"image_size": PROGRESSIVE, "augment": Augment(crop=None)},
            r"needs augment= with a crop",
        ),
    ],
)
def test_bad_options_are_one_line(cats_data_dir, options, message):
    with pytest.raises(ValueError, match=message) as err:
        read(cats_data_dir, **options)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("cache", [False, True])
def test_progressive_resizing_gives_each_epoch_its_size(cats_data_dir, cats_split, cache):
    # cache_shorter_side=224: the cache keeps the stored pixels, so the served crops
    # are exactly the kernel's crops of the stored picture at each epoch's size.
    ds = read(cats_data_dir, image_size=PROGRESSIVE, cache=cache, cache_shorter_side=224)
    assert ds.element_spec["image"].shape.as_list() == [None, None, None, 3]
    want = sorted((name, label) for name, label, _ in cats_split)
    for epoch in range(4):
        got = one_epoch(ds)
        size = PROGRESSIVE.size(epoch)
        assert sorted((name, label) for name, (label, _) in got.items()) == want
        assert {image.shape for _, image in got.values()} == {(*size, 3)}, epoch
        if cache:
            pictures = [ex.pixels for ex in cats_split]
            for index, (name, _, _) in enumerate(cats_split):
                image = expected_images(Augment(), SEED, epoch, [index], pictures, size)[0]
                np.testing.assert_array_equal(got[name][1], image, err_msg=f"{epoch} {name}")


def test_a_bad_spec_is_one_line(cats_data_dir):
    with pytest.raises(ValueError, match=r"^scale=\(0, 1\): must be a pair") as err:
        read(cats_data_dir, augment=Augment(scale=(0, 1)))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"^magnitude=9: must be left out: only") as err:
        read(cats_data_dir, augment=Augment(auto_augment="trivial_augment_wide", magnitude=9))
    assert "\n" not in str(err.value)


def test_a_disk_cache_is_laid_out_in_the_cache_dir(cats_data_dir, tmp_path):
    ds = read(cats_data_dir, cache=True, cache_budget=1, cache_dir=tmp_path)
    cache = ds_cache(ds)
    files = list(tmp_path.glob(f"{disk_rows.PREFIX}*"))  # One per column of numbers.
    assert len(files) == sum(not a.dtype.hasobject for a in cache.arrays.values())
    assert sum(f.stat().st_size for f in files) == cache.nbytes
    one_epoch(ds)
    assert cache.pictures.filled


def ds_cache(ds):
    """The cache a dataset holds (it keeps it alive through its inputs)."""
    seen, todo = set(), [ds]
    while todo:
        d = todo.pop()
        cache = getattr(d, "_fast_tfds_cache", None)
        if cache is not None:
            return cache
        seen.add(id(d))
        todo += [i for i in d._inputs() if id(i) not in seen]
    raise AssertionError("no cache")


def test_persist_keeps_no_strings_says_so_once_and_caches_in_memory(
    cats_data_dir, cats_split, tmp_path, caplog
):
    # as_supervised=False: the filenames are kept, and a persistent file holds numbers only.
    ds = read(cats_data_dir, cache=True, persist=True, cache_dir=tmp_path / "cache")
    epochs = [one_epoch(ds) for _ in range(2)]
    said = [r.getMessage() for r in caplog.records if "persist=True" in r.getMessage()]
    assert len(said) == 1 and "'image/filename' is not a fixed-size number" in said[0], said
    assert not (tmp_path / "cache").exists()
    reference = read(cats_data_dir, cache=True)
    for epoch in epochs:
        want = one_epoch(reference)
        assert epoch.keys() == want.keys() and len(epoch) == len(cats_split)
        for name, (label, image) in want.items():
            assert epoch[name][0] == label
            np.testing.assert_array_equal(epoch[name][1], image)


def test_recipes_of_one_cache_resolution_share_a_persistent_file(
    cats_data_dir, tmp_path, monkeypatch
):
    from fast_tfds.cache import housekeeping, persistent_format

    def found():
        return housekeeping.find(cache, persistent_format.PERSISTENT)

    cache = tmp_path / "cache"
    options = {"as_supervised": True, "cache": True, "persist": True, "cache_dir": cache}
    for _ in read(cats_data_dir, augment=Augment(), **options):
        pass
    persisted(cache)  # complete, not a fill's file
    calls = collections.Counter()
    decode = jpeg_blocks.decode_resized_into

    def counting(*args, **kwargs):
        calls["decode"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(jpeg_blocks, "decode_resized_into", counting)
    # The eval recipe (center crop) and another seed: the same cached pictures.
    served = read(cats_data_dir, augment=Augment.eval(), seed=SEED + 1, **options)
    count = sum(int(images.shape[0]) for images, _ in served)
    assert count == len(split_examples(cats_data_dir)) and calls["decode"] == 0
    assert len(found()) == 1
    # No crop: each picture at exactly the output size, another layout and another file.
    for _ in read(cats_data_dir, augment=Augment(crop=None), **options):
        pass
    assert calls["decode"] > 0


def test_stanford_dogs_crop_to_box_keys_its_file_alike_in_both_back_ends(
    stanford_tfrecord_dir, stanford_array_record_dir, tmp_path
):
    """The hook's setting is in the key, named the same by both back ends: their keys differ
    only in the shard files (these two builds are in two folders) and nothing else."""
    pytest.importorskip("grain")
    import json

    from fast_tfds.cache.persistent_format import read_header

    common = {
        "download_and_prepare": False,
        "batch_size": 4,
        "seed": 7,
        "crop_to_box": True,
        "augment": Augment(),
        "cache": True,
        "persist": True,
    }
    for _ in stanford_dogs_tfrecord.as_fast_dataset(
        "train", data_dir=stanford_tfrecord_dir, cache_dir=tmp_path / "tf", **common
    ):
        pass
    for _ in stanford_dogs_tfrecord.as_fast_loader(
        "train", data_dir=stanford_array_record_dir, cache_dir=tmp_path / "grain", **common
    ):
        pass
    keys = []
    for folder in ("tf", "grain"):
        fd = os.open(persisted(tmp_path / folder).where, os.O_RDONLY)
        keys.append(read_header(fd).layout.key)
        os.close(fd)
    tf_key, grain_key = keys
    assert tf_key["hook"] == grain_key["hook"] == {"crop_to_box": True}
    assert {k: v for k, v in tf_key.items() if k != "shards"} == {
        k: v for k, v in grain_key.items() if k != "shards"
    }, json.dumps([tf_key, grain_key])
