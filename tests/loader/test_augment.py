"""The loader's own with `augment=` and `cache=True`: exact resumption from a saved state,
fills completed later, the cache's resolution, one-line errors, persisted shards and
Stanford Dogs' crops inside the box. What both back ends promise (every example once per
epoch with its own window, the stronger recipes, new windows every epoch, each host's
share) is tests/reading/test_augment.py's."""

from __future__ import annotations

import collections
import dataclasses
import json
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from fast_tfds import Augment
from fast_tfds.augment import kernels, windows
from fast_tfds.cache import persisted
from fast_tfds.cache import pictures as store
from fast_tfds.core import jpeg_blocks
from stanford_dogs_tfrecord import crops
from tests.augment import test_spec
from tests.helpers import written_out
from tests.pairs import digest
from tests.reading import conftest as reading_fixtures
from tests.reading.augmented import JITTER, expected_images, grain_order

# The split's examples by index, with their stored pixels (shared with tests/reading/).
cats_split = reading_fixtures.cats_split


def stored_jpegs(name: str, data_dir):
    """TFDS's own data source of the train split of config 224, each image the stored JPEG."""
    return tfds.data_source(
        f"{name}/224",
        split="train",
        data_dir=data_dir,
        decoders={"image": tfds.decode.SkipDecoding()},
    )


def tensorflows_pixels(jpeg: bytes) -> np.ndarray:
    """What `tf.io.decode_jpeg` (and so the tf.data reader) makes of a stored JPEG."""
    return tf.io.decode_jpeg(jpeg, channels=3).numpy()


BATCH = 6


def cats_loader(data_dir, **options):
    options = {"batch_size": BATCH, "seed": 3, "num_threads": 2, **options}
    return cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, download_and_prepare=False, **options
    )


def test_a_state_saved_before_the_stronger_fields_still_resumes(cats_array_record_dir):
    # The recipe's key in a saved state is its repr, which the stronger fields leave as
    # it was where they are off (tests/augment/test_spec.py holds the earlier reprs).
    iterator = iter(cats_loader(cats_array_record_dir, augment=Augment()))
    next(iterator)
    state = json.loads(json.dumps(iterator.get_state()))
    assert state["augment"] == test_spec.BEFORE["train"]
    restored = iter(cats_loader(cats_array_record_dir, augment=Augment()))
    restored.set_state(state)
    np.testing.assert_array_equal(next(restored)[0], next(iterator)[0])
    rotated = iter(cats_loader(cats_array_record_dir, augment=Augment(rotate=15)))
    with pytest.raises(ValueError, match="different loader.*augment.*rotate=15.0"):
        rotated.set_state(state)


@pytest.mark.parametrize("config, size", [("224", 224), ("original", 96)])
def test_a_cache_without_augment_serves_the_plain_pixels(cats_array_record_dir, config, size):
    options = {"config": config, "image_size": size}
    plain = cats_loader(cats_array_record_dir, **options)
    through_cache = cats_loader(cats_array_record_dir, **options, cache=True)
    assert through_cache.cache_bytes == through_cache.num_examples * size * size * 3
    for _ in range(2):  # the fill, then served
        for (a, la), (b, lb) in zip(plain, through_cache, strict=True):
            np.testing.assert_array_equal(la, lb)
            np.testing.assert_array_equal(a, b)
    assert through_cache.cache.pictures.filled


def test_cached_epochs_decode_nothing(cats_array_record_dir, monkeypatch):
    calls = collections.Counter()
    decode = jpeg_blocks.decode_resized_into

    def counting(*args, **kwargs):
        calls["decode"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(store.jpeg_blocks, "decode_resized_into", counting)
    loader = cats_loader(cats_array_record_dir, augment=Augment(), cache=True)
    list(loader)
    # Every picture once; the stream's prefetch of the next epoch may decode one whose
    # first decode it overtook (at most the batches prefetched).
    filled = calls["decode"]
    assert loader.num_examples <= filled <= loader.num_examples + 2 * 2 * BATCH  # 2 x threads
    assert loader.cache.pictures.filled
    list(loader)
    list(loader)
    assert calls["decode"] == filled


def test_a_fill_stopped_half_way_is_completed_later(cats_array_record_dir, cats_split):
    loader = cats_loader(cats_array_record_dir, augment=Augment(), cache=True, num_threads=1)
    iterator = iter(loader)
    next(iterator)
    loader.close()
    written = int(loader.cache.pictures.written.sum())
    assert 0 < written < loader.num_examples
    # The dropped iterator completed no pass: the next iter() is epoch 0 again.
    pictures = [ex.pixels for ex in cats_split]
    order = grain_order(len(pictures), loader.seed, 0)
    got = list(loader)
    assert len(got) == -(-len(order) // BATCH)
    for k, (images, _) in enumerate(got):
        indices = order[k * BATCH : (k + 1) * BATCH]
        np.testing.assert_array_equal(
            images, expected_images(Augment(), loader.seed, 0, indices, pictures)
        )
    assert loader.cache.pictures.filled


@pytest.mark.parametrize("cache", [False, True])
def test_a_resumed_iterator_continues_with_the_same_windows(cats_array_record_dir, cache):
    options = {"augment": JITTER, "cache": cache, "num_epochs": 2}
    loader = cats_loader(cats_array_record_dir, **options)
    iterator = iter(loader)
    for _ in range(len(loader) + 2):  # into the second epoch
        next(iterator)
    state = json.loads(json.dumps(iterator.get_state()))
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 2)
    rest = list(iterator)
    # Without a cache, the resumed run decodes in worker processes: the same windows.
    workers = {} if cache else {"num_workers": 2}
    restored = iter(cats_loader(cats_array_record_dir, **options, **workers))
    restored.set_state(state)
    resumed = list(restored)
    assert len(resumed) == len(rest) == len(loader) - 2
    for (images, labels), (images2, labels2) in zip(rest, resumed, strict=True):
        np.testing.assert_array_equal(images, images2)
        np.testing.assert_array_equal(labels, labels2)
    other = iter(cats_loader(cats_array_record_dir, **{**options, "augment": Augment()}))
    with pytest.raises(ValueError, match="different loader.*augment"):
        other.set_state(state)


def test_original_config_through_the_cache_matches_decoding_each_epoch(cats_array_record_dir):
    # Pictures of their own sizes: the cache keeps them at a 256 shorter side (aspect
    # kept), and serves the same windows as decoding each JPEG. Stated bound: mean
    # absolute difference <= 4 levels per image, <= 2 on average (a picture resized
    # twice; crops smaller than the output are enlarged from the cache's pixels).
    options = {"config": "original", "image_size": 96, "augment": Augment(), "num_epochs": 1}
    direct = cats_loader(cats_array_record_dir, **options)
    through_cache = cats_loader(
        cats_array_record_dir, **options, cache=True, cache_shorter_side=110
    )
    stored = [d for d in stored_jpegs_original(cats_array_record_dir)]
    assert through_cache.cache_bytes == sum(
        h * w * 3 for h, w in (cache_shape(s, 110) for s in stored)
    )
    for epoch in range(2):
        differences = []
        for (a, la), (b, lb) in zip(direct, through_cache, strict=True):
            np.testing.assert_array_equal(la, lb)
            differences += [np.abs(x.astype(int) - y).mean() for x, y in zip(a, b, strict=True)]
        assert len(differences) == direct.num_examples
        assert max(differences) <= 4 and np.mean(differences) <= 2, (epoch, max(differences))


def stored_jpegs_original(data_dir):
    import tensorflow_datasets as tfds

    source = tfds.data_source(
        "cats_vs_dogs_fast/original",
        split="train",
        data_dir=data_dir,
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    return [tensorflows_pixels(ex["image"]).shape[:2] for ex in source]


def cache_shape(size, shorter_side):

    h, w = store.cache_size(size[0], size[1], shorter_side)
    return int(h), int(w)


def test_stanford_dogs_crops_lie_within_the_box(stanford_array_record_dir):
    source = stored_jpegs("stanford_dogs_tfrecord", stanford_array_record_dir)
    pixels = [tensorflows_pixels(ex["image"]) for ex in source]
    labels = [int(ex["label"]) for ex in source]
    boxes = [
        crops.first_box_window(np.asarray(ex["objects"]["bbox"]), *p.shape[:2])
        for ex, p in zip(source, pixels, strict=True)
    ]
    assert any(box[2:] != p.shape[:2] for box, p in zip(boxes, pixels, strict=True))
    for cache in (False, True):
        loader = stanford_dogs_tfrecord.as_fast_loader(
            "train",
            data_dir=stanford_array_record_dir,
            download_and_prepare=False,
            batch_size=4,
            seed=7,
            num_threads=2,
            crop_to_box=True,
            augment=Augment(),
            cache=cache,
        )
        order = grain_order(len(labels), loader.seed, 0)
        batches = list(loader)
        assert sum(len(b[1]) for b in batches) == len(labels)
        for b, (images, batch_labels) in enumerate(batches):
            indices = order[4 * b : 4 * b + len(batch_labels)]
            assert batch_labels.tolist() == [labels[i] for i in indices]
            drawn = windows.sample(
                windows.Draw(Augment(), loader.seed, 0, indices),
                [boxes[i][2] for i in indices],
                [boxes[i][3] for i in indices],
            )
            assert (drawn.top + drawn.height <= [boxes[i][2] for i in indices]).all()
            assert (drawn.left + drawn.width <= [boxes[i][3] for i in indices]).all()
            in_picture = dataclasses.replace(
                drawn,
                top=drawn.top + [boxes[i][0] for i in indices],
                left=drawn.left + [boxes[i][1] for i in indices],
            )
            want = kernels.apply_into(
                [pixels[i] for i in indices], in_picture, np.zeros_like(images)
            )
            if cache:  # The box is kept at <= 256 px: within a few levels.
                assert np.abs(images.astype(int) - want).mean() <= 4
            else:
                np.testing.assert_array_equal(images, want)


def test_bad_options_are_one_line(cats_array_record_dir, tmp_path):
    with pytest.raises(ValueError, match=r"^cache=True: needs num_workers=0 \(not 2\)"):
        cats_loader(cats_array_record_dir, cache=True, num_workers=2)
    with pytest.raises(ValueError, match=r"^augment='flip': must be a fast_tfds\.Augment"):
        cats_loader(cats_array_record_dir, augment="flip")
    with pytest.raises(ValueError, match=r"^cache=1: must be True, False or 'auto'"):
        cats_loader(cats_array_record_dir, cache=1)
    with pytest.raises(ValueError, match=r"^cache_shorter_side=0: must be a positive integer"):
        cats_loader(cats_array_record_dir, cache_shorter_side=0)
    in_memory = r"^persist=True: keeps the in-memory cache \(cache=True\)"
    with pytest.raises(ValueError, match=in_memory):
        cats_loader(cats_array_record_dir, persist=True, cache=False)
    with pytest.raises(ValueError, match=r"^persist='yes': must be True or False"):
        cats_loader(cats_array_record_dir, cache=True, persist="yes")
    with pytest.raises(ValueError, match=r"^cache_dir='gs://b/c': must be a local folder"):
        cats_loader(cats_array_record_dir, cache=True, cache_dir="gs://b/c")
    # Worker processes map a complete file, and none fills one.
    with pytest.raises(ValueError, match=r"^persist=True with worker processes: ") as err:
        cats_loader(
            cats_array_record_dir, cache=True, persist=True, num_workers=2, cache_dir=tmp_path
        )
    assert "is not there; workers only map a complete file" in str(err.value)
    assert "\n" not in str(err.value)


def test_every_option_is_documented_on_the_class():
    from fast_tfds.loader import LoaderOptions

    # Attribute lines: "      name: ..." or "      name, other: ...".
    documented = {
        name.strip()
        for names in re.findall(r"\n      ([a-z_, ]+):", LoaderOptions.__doc__)
        for name in names.split(",")
    }
    missing = [f.name for f in dataclasses.fields(LoaderOptions) if f.name not in documented]
    assert not missing, f"LoaderOptions' docstring lacks {missing}"


def test_shards_persist_apart_and_each_serves_its_own_examples(
    cats_array_record_dir, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    options = {"augment": Augment(), "cache": True, "persist": True, "cache_dir": cache}

    def epoch(shard_index):
        loader = cats_loader(
            cats_array_record_dir, shard_index=shard_index, shard_count=2, **options
        )
        out = collections.Counter(
            (digest(image), int(label))
            for images, labels in loader
            for image, label in zip(images, labels, strict=True)
        )
        backing = loader.cache.backing  # The file is written out in a thread of its own.
        if isinstance(backing, persisted.FileFill):
            written_out(backing)
        return out

    filled = [epoch(0), epoch(1)]
    assert len(list(cache.glob("*.arena"))) == 2  # one file per shard: keys apart
    calls = collections.Counter()
    decode = jpeg_blocks.decode_resized_into

    def counting(*args, **kwargs):
        calls["decode"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(jpeg_blocks, "decode_resized_into", counting)
    served = [epoch(0), epoch(1)]  # from the files
    assert calls["decode"] == 0
    assert served == filled
    assert sum(sum(c.values()) for c in served) == len(
        stored_jpegs("cats_vs_dogs_fast", cats_array_record_dir)
    )


def test_targets_beyond_the_label_are_cached_in_memory_with_one_line(
    stanford_array_record_dir, tmp_path, caplog
):
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train",
        data_dir=stanford_array_record_dir,
        download_and_prepare=False,
        batch_size=4,
        seed=7,
        num_threads=2,
        with_boxes=True,
        augment=Augment(),
        cache=True,
        persist=True,
        cache_dir=tmp_path / "cache",
    )
    targets = [t for _, t in loader]
    assert sum(len(t["label"]) for t in targets) == len(loader.source)
    assert targets[0]["bbox"].shape[1:] == (16, 4)
    said = [r.getMessage() for r in caplog.records if "persist=True" in r.getMessage()]
    assert len(said) == 1 and "more than the label" in said[0], said
    assert not (tmp_path / "cache").exists()
