"""The Grain loader: exactly once per epoch (each image with its own label, and boxes),
a new order each epoch, the same orders with a seed, disjoint and complete shards,
exact resumption, and Stanford Dogs' boxes."""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from fast_tfds import loader as fast_loader
from tests.loader.conftest import STANFORD_DUMMY_DATA
from tests.pairs import Truth, epoch

BATCH = 5


def cats_loader(data_dir, **options):
    options = {"batch_size": BATCH, "seed": 3, "num_threads": 2, **options}
    return cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, download_and_prepare=False, **options
    )


def keys(batches) -> list:
    """Every example (pixels, label) in order, checking the batches' dtypes."""
    batches = list(batches)
    for images, labels in batches:
        assert images.dtype == np.uint8 and labels.dtype == np.int64
    return epoch(batches)


@pytest.fixture(scope="module")
def cats_reference(cats_array_record_dir) -> Truth:
    """Every example of the split as TFDS's data source reads it, the pixels decoded by
    TensorFlow: at the stored size the loader gives exactly those."""
    return Truth.of(cats_array_record_dir)


def test_every_example_once_per_epoch_in_a_new_order(cats_array_record_dir, cats_reference):
    loader = cats_loader(cats_array_record_dir)
    n = len(cats_reference)
    assert loader.num_examples == n and len(loader) == -(-n // BATCH)
    epochs = [list(loader), list(loader)]  # each iter() is the next epoch
    for batches in epochs:
        assert [len(labels) for _, labels in batches[:-1]] == [BATCH] * (len(batches) - 1)
        assert batches[0][0].shape == (BATCH, 224, 224, 3)
        cats_reference.check(keys(batches))
    assert keys(epochs[0]) != keys(epochs[1])


def test_a_seed_repeats_the_orders_and_another_changes_them(cats_array_record_dir):
    def two_epochs(seed):
        return keys(iter(cats_loader(cats_array_record_dir, seed=seed, num_epochs=2)))

    first = two_epochs(11)
    assert two_epochs(11) == first
    assert two_epochs(12) != first
    unshuffled = keys(cats_loader(cats_array_record_dir, shuffle=False))
    assert keys(cats_loader(cats_array_record_dir, shuffle=False, seed=5)) == unshuffled


@pytest.mark.parametrize("count", [2, 3])
def test_shards_are_disjoint_and_complete(cats_array_record_dir, cats_reference, count):
    shards = [
        cats_loader(cats_array_record_dir, shard_index=i, shard_count=count) for i in range(count)
    ]
    per_shard = [keys(shard) for shard in shards]
    cats_reference.check([example for shard in per_shard for example in shard])
    per_shard = [collections.Counter(examples) for examples in per_shard]
    sizes = [shard.num_examples for shard in shards]
    assert sum(sizes) == len(cats_reference) and max(sizes) - min(sizes) <= 1
    for i, counts in enumerate(per_shard):  # the shard of each example is fixed
        assert collections.Counter(keys(shards[i])) == counts


@pytest.mark.parametrize("resume_workers", [0, 2])
def test_resuming_from_a_saved_state_gives_exactly_the_rest(
    cats_array_record_dir, cats_reference, resume_workers
):
    loader = cats_loader(cats_array_record_dir, num_epochs=2)
    iterator = iter(loader)
    seen = [next(iterator) for _ in range(3)]
    state = json.loads(json.dumps(iterator.get_state()))  # as a checkpoint stores it
    assert (state["epoch"], state["batch_in_epoch"]) == (0, 3)
    rest = list(iterator)
    # A new process would make a new loader with the same arguments, then restore.
    restored = iter(cats_loader(cats_array_record_dir, num_epochs=2, num_workers=resume_workers))
    restored.set_state(state)
    resumed = list(restored)
    assert len(resumed) == len(rest) == 2 * len(loader) - 3
    for (images, labels), (images2, labels2) in zip(rest, resumed, strict=True):
        np.testing.assert_array_equal(images, images2)
        np.testing.assert_array_equal(labels, labels2)
    first_epoch = keys(seen) + keys(resumed[: len(loader) - 3])
    cats_reference.check(first_epoch)


def test_a_state_from_another_loader_is_refused(cats_array_record_dir):
    iterator = iter(cats_loader(cats_array_record_dir, seed=1))
    next(iterator)
    state = iterator.get_state()
    other = iter(cats_loader(cats_array_record_dir, seed=2))
    with pytest.raises(ValueError, match="different loader.*seed: 1 vs 2"):
        other.set_state(state)


def test_endless_iteration_runs_through_the_epochs(cats_array_record_dir, cats_reference):
    loader = cats_loader(cats_array_record_dir, num_epochs=None, drop_remainder=True)
    n = len(cats_reference)
    assert len(loader) == n // BATCH
    iterator = iter(loader)
    batches = [next(iterator) for _ in range(2 * len(loader) + 1)]
    assert iterator.epoch == 2 and iterator.get_state()["batch_in_epoch"] == 1
    assert all(len(labels) == BATCH for _, labels in batches)
    epoch0, epoch1 = keys(batches[: len(loader)]), keys(batches[len(loader) : 2 * len(loader)])
    # drop_remainder leaves out n % BATCH examples, never repeats one within an epoch.
    assert not collections.Counter(epoch0) - cats_reference.expect(epoch0[0].fields())
    assert epoch0 != epoch1


def test_original_config_is_resized(cats_array_record_dir):
    loader = cats_loader(cats_array_record_dir, config="original", image_size=(64, 48))
    images, labels = next(iter(loader))
    assert images.shape == (BATCH, 64, 48, 3) and images.dtype == np.uint8
    with pytest.raises(ValueError, match="keeps each image's own size"):
        cats_loader(cats_array_record_dir, config="original", image_size=None)


def stanford_tf_reader(data_dir, **options):
    ds = stanford_dogs_tfrecord.as_fast_dataset(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        shuffle=False,
        cache=False,
        dtype=tf.uint8,
        batch_size=4,
        with_boxes=True,
        **options,
    )
    return [
        (images.numpy(), labels["label"].numpy(), labels["bbox"].to_list()) for images, labels in ds
    ]


def stanford_loader(data_dir, **options):
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        shuffle=False,
        batch_size=4,
        with_boxes=True,
        max_boxes=3,
        **options,
    )
    return list(loader)


def examples(batches) -> list[tuple]:
    """(label, boxes, image) of every example, sorted by label and boxes: the tf.data
    reader interleaves its shard files even unshuffled, so the orders differ."""
    out = []
    for images, labels, boxes in batches:
        out += [
            (int(label), tuple(map(tuple, np.asarray(b, np.float32).tolist())), image)
            for image, label, b in zip(images, labels, boxes, strict=True)
        ]
    return sorted(out, key=lambda example: example[:2])


def unpadded(target: dict) -> list[np.ndarray]:
    return [b[:n] for b, n in zip(target["bbox"], target["num_boxes"], strict=True)]


@pytest.mark.parametrize("crop_to_box", [False, True])
def test_stanford_boxes_and_crops_match_the_tf_data_reader(
    stanford_array_record_dir, stanford_tfrecord_dir, crop_to_box
):
    expected = examples(stanford_tf_reader(stanford_tfrecord_dir, crop_to_box=crop_to_box))
    batches = stanford_loader(stanford_array_record_dir, crop_to_box=crop_to_box)
    # Each image with its own label and boxes, as TFDS reads the build; crops are the
    # shared decoder's cut of the first box, at the default 224.
    truth = Truth.of(stanford_array_record_dir, name="stanford_dogs_tfrecord")
    truth.check(epoch(batches), size=224 if crop_to_box else None, crop=crop_to_box)
    for _, target in batches:
        assert target["bbox"].shape == (len(target["label"]), 3, 4)
        for boxes, count in zip(target["bbox"], target["num_boxes"], strict=True):
            assert count >= 1 and not boxes[count:].any()  # zero rows after the boxes
    got = examples((images, target["label"], unpadded(target)) for images, target in batches)
    assert [e[:2] for e in got] == [e[:2] for e in expected]  # labels and boxes
    assert len({e[:2] for e in got}) == len(got)  # each example matched to one
    # Both back ends give the window to the same decoder: the same pixels, crops too.
    for (_, _, image), (_, _, tf_image) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(image, tf_image)


def test_the_generic_front_doors_take_stanfords_own_options_through_its_hook(
    stanford_array_record_dir, stanford_tfrecord_dir
):
    import fast_tfds

    options = {"shuffle": False, "batch_size": 4, "with_boxes": True, "crop_to_box": True}
    loader = fast_tfds.as_fast_loader(
        "stanford_dogs_tfrecord",
        "train",
        data_dir=stanford_array_record_dir,
        download_and_prepare=False,
        max_boxes=3,
        **options,
    )
    for (images, target), (images2, target2) in zip(
        loader, stanford_loader(stanford_array_record_dir, crop_to_box=True), strict=True
    ):
        np.testing.assert_array_equal(images, images2)
        np.testing.assert_array_equal(target["bbox"], target2["bbox"])
    ds = fast_tfds.as_fast_dataset(
        "stanford_dogs_tfrecord",
        "train",
        data_dir=stanford_tfrecord_dir,
        download_and_prepare=False,
        cache=False,
        dtype=tf.uint8,
        **options,
    )
    generic = [(i.numpy(), t["label"].numpy(), t["bbox"].to_list()) for i, t in ds]
    expected = stanford_tf_reader(stanford_tfrecord_dir, crop_to_box=True)
    for got, want in zip(examples(generic), examples(expected), strict=True):
        assert got[:2] == want[:2]
        np.testing.assert_array_equal(got[2], want[2])


def test_uncropped_pixels_equal_tensorflows_decoding(stanford_array_record_dir):
    # The truth's pixels of an ArrayRecord build are TensorFlow's decode of each stored
    # JPEG (tests/pairs.py), its labels and boxes TFDS's data source's.
    truth = Truth.of(stanford_array_record_dir, name="stanford_dogs_tfrecord")
    for _ in range(2):
        truth.check(epoch(stanford_loader(stanford_array_record_dir)))


def test_crop_window_is_the_tf_data_readers():
    from stanford_dogs_tfrecord import boxes as tf_boxes
    from stanford_dogs_tfrecord import crops

    rng = np.random.default_rng(0)
    corners = rng.uniform(-0.2, 1.2, size=(300, 2, 2))
    cases = [np.sort(c, axis=0).T.reshape(1, 4)[:, [0, 2, 1, 3]] for c in corners]
    cases += [
        np.zeros((0, 4)),
        np.array([[0.5, 0.5, 0.5, 0.5]]),
        np.array([[0.1, 0.2, 0.3, 0.4]] * 2),
    ]
    for bbox in cases:
        for height, width in ((224, 224), (375, 500), (1, 7)):
            bbox = bbox.astype(np.float32)
            expected = tf_boxes.crop_window(tf.constant(bbox), tf.constant([height, width, 3]))
            got = crops.first_box_window(bbox, height, width)
            assert got == tuple(int(v) for v in expected.numpy()), (bbox, height, width)


def test_too_many_boxes_for_max_boxes_says_what_to_pass(stanford_array_record_dir):
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train",
        data_dir=stanford_array_record_dir,
        download_and_prepare=False,
        with_boxes=True,
        max_boxes=0,
    )
    # The first image drawn (shuffled) has one box or more.
    with pytest.raises(ValueError, match=r"more than max_boxes=0; pass max_boxes=[1-9]\d* or more"):
        next(iter(loader))


def test_a_missing_dataset_is_built_as_array_record(tmp_path):
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "test",
        data_dir=tmp_path,
        batch_size=2,
        seed=0,
        download_config=tfds.download.DownloadConfig(manual_dir=STANFORD_DUMMY_DATA),
    )
    assert loader.num_examples == 4
    assert sum(len(labels) for _, labels in loader) == 4
    folder = tmp_path / "stanford_dogs_tfrecord" / "224" / "1.0.0"
    assert list(folder.glob("*.array_record-*")) and not list(folder.glob("*.tfrecord-*"))


def test_bad_requests_get_one_line_errors(cats_data_dir, cats_array_record_dir, tmp_path):
    with pytest.raises(fast_loader.NoArrayRecordFiles, match="tfds convert_format"):
        cats_loader(cats_data_dir)  # a TFRecord build
    with pytest.raises(fast_loader.DatasetNotBuilt, match="--file_format array_record"):
        cats_loader(tmp_path)
    with pytest.raises(ValueError, match=r"^split='validation': not a split .*splits: train"):
        cats_vs_dogs_fast.as_fast_loader("validation", data_dir=cats_array_record_dir)
    # Stanford Dogs' own options are not options of another dataset.
    with pytest.raises(TypeError, match="^with_boxes: not an option of as_fast_loader"):
        cats_loader(cats_array_record_dir, with_boxes=True)
    bad = [
        ({"batch_size": 0}, "batch_size=0: must be a positive integer"),
        ({"batch_size": None}, "batch_size=None: must be a positive integer"),
        ({"shard_index": 2, "shard_count": 2}, "shard_index=2: must be below shard_count=2"),
        ({"shard_count": 10**6}, "shard_count=1000000: .* has only"),
        ({"seed": 2**64}, r"seed=18446744073709551616: must be an integer in \[-2\*\*63, "),
        ({"image_size": (224,)}, r"image_size=\(224,\): must be"),
        ({"num_workers": -1}, "num_workers=-1: must be a non-negative integer"),
        ({"num_epochs": 0}, "num_epochs=0: must be a positive integer or None"),
        ({"shuffle": "yes"}, "shuffle='yes': must be True or False"),
        ({"with_index": 1}, "with_index=1: must be True or False"),
    ]
    for options, message in bad:
        with pytest.raises(ValueError, match="^" + message) as excinfo:
            cats_loader(cats_array_record_dir, **options)
        assert "\n" not in str(excinfo.value)


def test_one_decode_stream_runs_through_the_epochs(cats_array_record_dir):
    # The regression this guards: a finished epoch's iterator, when collected,
    # closed the stream, so every epoch restarted its threads (or its workers).
    loader = cats_loader(cats_array_record_dir)
    list(loader)
    stream = loader._stream
    assert stream is not None
    list(loader)
    assert loader._stream is stream
    iterator = iter(loader)
    next(iterator)
    # A Grain iterator that wraps it closes it when collected (Keras' map, every epoch).
    wrapped = loader.map(lambda batch: batch).__iter__()
    next(wrapped)
    del wrapped
    assert loader._stream is stream
    loader.close()  # the loader's close stops it; the next batch restarts it
    assert loader._stream is None
    assert len(next(iterator)[1]) == BATCH


def test_grains_checkpoint_handler_saves_and_restores_the_iterator(cats_array_record_dir, tmp_path):
    import grain
    from etils import epath

    iterator = iter(cats_loader(cats_array_record_dir, seed=4))
    next(iterator)
    handler = grain.checkpoint.CheckpointHandler()  # what Orbax calls for a data iterator
    handler.save(epath.Path(tmp_path), iterator)
    rest = [labels for _, labels in iterator]
    restored = handler.restore(
        epath.Path(tmp_path), iter(cats_loader(cats_array_record_dir, seed=4))
    )
    resumed = [labels for _, labels in restored]
    assert len(resumed) == len(rest) > 0
    assert all(np.array_equal(a, b) for a, b in zip(rest, resumed, strict=True))


def test_the_loader_takes_a_thread_per_cpu_the_process_may_use(
    cats_array_record_dir, cats_reference, monkeypatch
):
    if hasattr(os, "sched_setaffinity"):  # Linux: the CPUs the process is given, not all.
        allowed = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(allowed)})
        try:
            assert cats_loader(cats_array_record_dir, num_threads=None).num_threads == 1
        finally:
            os.sched_setaffinity(0, allowed)
    # Without the call (macOS): every CPU of the machine, and the epoch is whole.
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    loader = cats_loader(cats_array_record_dir, num_threads=None)
    assert loader.num_threads == os.cpu_count()
    cats_reference.check(keys(loader))
