"""stanford_dogs_tfrecord's boxes, crops and splits on small sample archives.

Builds a quirky sample (see fast_tfds.samples.stanford_dogs.QUIRKS) in both
configs, and a quirk-free one to compare with TFDS's own stanford_dogs builder.
"""

from __future__ import annotations

import collections
import io
import tarfile
import types

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from PIL import Image
from scipy import io as scipy_io

import stanford_dogs_tfrecord
from fast_tfds.samples import stanford_dogs as dogs_sample
from stanford_dogs_tfrecord import boxes as boxes_lib
from stanford_dogs_tfrecord import source_parsing
from stanford_dogs_tfrecord import stanford_dogs_tfrecord_dataset_builder as dogs_builder

SPLITS = ("train", "test")


def build(sample_dir, data_dir, config):
    builder = tfds.builder(stanford_dogs_tfrecord.NAME, config=config, data_dir=data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=sample_dir)
    )
    return builder


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quirky_sample")
    # Real-photo sizes (a few hundred pixels, all different) so that boxes and
    # crops are checked at many scales.
    info = dogs_sample.write_stanford_dogs_archives(folder, images_per_breed=3, seed=1)
    return folder, info


@pytest.fixture(scope="module", params=["224", "original"])
def built(request, sample_dir, tmp_path_factory):
    folder, info = sample_dir
    data_dir = tmp_path_factory.mktemp(f"data_{request.param}")
    return types.SimpleNamespace(
        builder=build(folder, data_dir, request.param),
        config=request.param,
        data_dir=data_dir,
        manual_dir=folder,
        sample=info,
    )


def examples(builder, split, **kwargs):
    """{filename: example} of a split, through TFDS's own reader."""
    out = {}
    for ex in tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False, **kwargs)):
        name = ex["image/filename"].decode()
        assert name not in out
        out[name] = ex
    return out


def expected_boxes(info) -> np.ndarray:
    """[n, 4] (ymin, xmin, ymax, xmax): the XML's values normalized and clipped."""
    annotation = info["annotation"]
    width, height = annotation["width"], annotation["height"]
    if not width or not height:  # Declared size 0: the image's own size.
        width, height = info["image_size"]
    return np.array(
        [
            [ymin / height, xmin / width, ymax / height, xmax / width]
            for xmin, ymin, xmax, ymax in annotation["boxes"]
        ],
        dtype=np.float64,
    ).clip(0.0, 1.0)


def by_member(sample):
    return {info["member"]: info for info in sample["images"].values()}


def fast(built, split, **options):
    defaults = {
        "data_dir": built.data_dir,
        "config": built.config,
        "batch_size": None,
        "image_size": None,
        "shuffle": False,
        "dtype": tf.uint8,
    }
    return stanford_dogs_tfrecord.as_fast_dataset(split, **{**defaults, **options})


# -- what the build stores ------------------------------------------------------


def test_boxes_labels_and_splits_match_the_sample(built):
    infos = by_member(built.sample)
    assert built.builder.info.splits["train"].num_shards >= 1
    for split in SPLITS:
        got = examples(built.builder, split)
        expected = {m for m, info in infos.items() if info["kept"] and info["split"] == split}
        assert set(got) == expected
        assert len(got) == built.sample["expected_examples"][split]
        for name, ex in got.items():
            info = infos[name]
            assert built.builder.info.features["label"].int2str(ex["label"]) == info["label"]
            np.testing.assert_allclose(
                ex["objects"]["bbox"], expected_boxes(info), rtol=0, atol=1e-7, err_msg=name
            )
            assert ex["image"].shape[2] == 3
            if built.config == "224":
                assert ex["image"].shape == (224, 224, 3)
            else:
                assert ex["image"].shape[1::-1] == info["image_size"]


def test_box_quirks(built):
    infos = {info["quirk"]: info for info in built.sample["images"].values()}
    split_examples = {split: examples(built.builder, split) for split in SPLITS}

    def stored(quirk):
        info = infos[quirk]
        return split_examples[info["split"]][info["member"]]["objects"]["bbox"]

    two = stored("two_boxes")
    (first, second) = infos["two_boxes"]["annotation"]["boxes"]
    assert two.shape == (2, 4)
    width, height = infos["two_boxes"]["image_size"]
    np.testing.assert_allclose(
        two[0],
        [first[1] / height, first[0] / width, first[3] / height, first[2] / width],
        atol=1e-7,
    )
    np.testing.assert_allclose(two[1], [second[1] / height, second[0] / width, 1.0, 1.0], atol=1e-7)
    exceeding = stored("box_exceeds_image")
    assert exceeding[0, 2] == 1.0 and exceeding[0, 3] == 1.0  # Clipped.
    assert (
        infos["box_exceeds_image"]["annotation"]["boxes"][0][2]
        > infos["box_exceeds_image"]["image_size"][0]
    )
    zero = stored("zero_size_annotation")
    assert infos["zero_size_annotation"]["annotation"]["width"] == 0
    np.testing.assert_allclose(zero, expected_boxes(infos["zero_size_annotation"]), atol=1e-7)
    assert (zero > 0).any() and (zero <= 1).all()


def test_disguised_and_odd_images_are_kept_as_rgb_jpeg(built):
    infos = {info["quirk"]: info for info in built.sample["images"].values()}
    for quirk in ("png_named_jpg", "cmyk_jpeg", "grey_jpeg"):
        info = infos[quirk]
        raw = examples(built.builder, info["split"], decoders={"image": tfds.decode.SkipDecoding()})
        data = raw[info["member"]]["image"]
        assert data[:2] == b"\xff\xd8", quirk
        with Image.open(io.BytesIO(data)) as image:
            assert (image.format, image.mode) == ("JPEG", "RGB"), quirk
        assert tf.io.decode_jpeg(data, channels=0).shape[2] == 3, quirk
    assert infos["png_named_jpg"]["member"].endswith("n02105855_2933.jpg")


# -- the fast reader's options ---------------------------------------------------


def test_test_split_is_read_exactly_once(built):
    ds = fast(built, "test", as_supervised=False, shuffle=True, image_size=64, batch_size=3)
    names = [n.decode() for batch in ds for n in batch["image/filename"].numpy()]
    expected = [
        info["member"]
        for info in built.sample["images"].values()
        if info["kept"] and info["split"] == "test"
    ]
    assert collections.Counter(names) == collections.Counter(expected)


def test_crop_to_box_returns_the_first_box_region(built):
    for split in SPLITS:
        full = {
            ex["image/filename"].decode(): ex
            for ex in tfds.as_numpy(fast(built, split, as_supervised=False))
        }
        crops = {
            ex["image/filename"].decode(): ex["image"]
            for ex in tfds.as_numpy(fast(built, split, as_supervised=False, crop_to_box=True))
        }
        assert set(crops) == set(full)
        for name, ex in full.items():
            image, bbox = ex["image"], ex["objects"]["bbox"]
            height, width = image.shape[:2]
            # Same window as documented: edges rounded to the nearest pixel.
            ymin, xmin, ymax, xmax = np.round(
                bbox[0].astype(np.float64) * [height, width, height, width]
            ).astype(int)
            y, x = min(ymin, height - 1), min(xmin, width - 1)
            y_end, x_end = max(min(ymax, height), y + 1), max(min(xmax, width), x + 1)
            expected = image[y:y_end, x:x_end]
            assert crops[name].shape == expected.shape, name
            # decode_and_crop_jpeg decodes exactly the same pixels, except that
            # libjpeg upsamples the chroma of the window's first and last
            # columns without their outside neighbours: a few levels off there.
            diff = np.abs(crops[name].astype(int) - expected.astype(int))
            assert diff[:, 1:-1].max(initial=0) == 0, name
            assert diff.mean() < 1.0, name


def test_crop_to_box_with_supervised_batches_and_cache(built):
    ds = fast(built, "train", crop_to_box=True, image_size=32, batch_size=4, cache=True)
    for _ in range(2):  # The second epoch comes from the cache.
        labels = []
        for images, batch_labels in ds:
            assert images.shape[1:] == (32, 32, 3) and images.dtype == tf.uint8
            labels += batch_labels.numpy().tolist()
        assert len(labels) == built.sample["expected_examples"]["train"]


def test_crop_to_box_is_resized_to_the_default_size(built):
    # Regression: on config 224 the stored size equals the default image_size,
    # but a crop is smaller, so it must still be resized.
    ds = fast(built, "train", crop_to_box=True, image_size=224, batch_size=2)
    images, _ = next(iter(ds))
    assert images.shape == (2, 224, 224, 3)


def test_with_boxes_batches_as_ragged(built):
    infos = by_member(built.sample)
    expected = sorted(
        (tuple(box), infos[m]["label"])
        for m, info in infos.items()
        if info["kept"] and info["split"] == "train"
        for box in expected_boxes(info).astype(np.float32).tolist()
    )
    label_names = built.builder.info.features["label"].names
    for crop in (False, True):
        ds = fast(built, "train", with_boxes=True, crop_to_box=crop, image_size=32, batch_size=3)
        spec = ds.element_spec[1]["bbox"]
        assert isinstance(spec, tf.RaggedTensorSpec)
        assert spec.shape.as_list() == [None, None, 4] and spec.ragged_rank == 1
        got = []
        for _ in range(2):  # Cached the second time.
            got = []
            for images, target in ds:
                bbox, labels = target["bbox"], target["label"]
                assert images.shape[0] == bbox.nrows() == labels.shape[0]
                assert bbox.flat_values.shape[1] == 4
                for boxes, label in zip(bbox.numpy(), labels.numpy(), strict=True):
                    got += [(tuple(b), label_names[label]) for b in boxes.tolist()]
        # Boxes stay relative to the whole image when cropping.
        assert sorted(got) == expected


def test_dict_examples_batch_with_boxes(built):
    infos = by_member(built.sample)
    ds = fast(built, "test", as_supervised=False, image_size=40, batch_size=2)
    seen = 0
    for batch in ds:
        bbox = batch["objects"]["bbox"]
        assert isinstance(bbox, tf.RaggedTensor) and bbox.ragged_rank == 1
        for name, boxes in zip(batch["image/filename"].numpy(), bbox.numpy(), strict=True):
            np.testing.assert_allclose(boxes, expected_boxes(infos[name.decode()]), atol=1e-7)
            seen += 1
    assert seen == built.sample["expected_examples"]["test"]
    # Unbatched, boxes are dense [n, 4].
    ex = next(iter(fast(built, "test", with_boxes=True)))
    assert isinstance(ex[1]["bbox"], tf.Tensor) and ex[1]["bbox"].shape[1] == 4


# -- helpers on their own ------------------------------------------------------


def test_crop_window_edge_cases():
    shape = tf.constant([40, 48, 3])
    no_box = tf.zeros([0, 4])
    assert boxes_lib.crop_window(no_box, shape).numpy().tolist() == [0, 0, 40, 48]
    # A box squashed onto the bottom-right corner still gives one pixel inside.
    corner = tf.constant([[1.0, 1.0, 1.0, 1.0]])
    assert boxes_lib.crop_window(corner, shape).numpy().tolist() == [39, 47, 1, 1]
    empty = tf.constant([[0.5, 0.5, 0.5, 0.5], [0.0, 0.0, 1.0, 1.0]])  # First box only.
    assert boxes_lib.crop_window(empty, shape).numpy().tolist() == [20, 24, 1, 1]
    box = tf.constant([[0.1, 0.25, 0.6, 1.0]])
    assert boxes_lib.crop_window(box, shape).numpy().tolist() == [4, 12, 20, 36]
    jpeg = tf.io.encode_jpeg(tf.zeros([40, 48, 3], tf.uint8))
    assert boxes_lib.crop_to_first_box(jpeg, no_box).shape == (40, 48, 3)
    assert boxes_lib.crop_to_first_box(jpeg, box).shape == (20, 36, 3)


def test_list_mat_with_a_single_entry():
    cell = np.empty((1, 1), dtype=object)
    cell[0, 0] = "n02085620-Chihuahua/n02085620_5927.jpg"
    annotations = np.empty((1, 1), dtype=object)
    annotations[0, 0] = "n02085620-Chihuahua/n02085620_5927"
    out = io.BytesIO()
    scipy_io.savemat(
        out,
        {"file_list": cell, "annotation_list": annotations, "labels": np.array([[1]], np.uint8)},
    )
    files, names = source_parsing.parse_list_mat(out.getvalue())
    assert files == ["n02085620-Chihuahua/n02085620_5927.jpg"]
    assert names == ["n02085620-Chihuahua/n02085620_5927"]


def test_sample_lists_hold_the_real_labels(sample_dir):
    folder, info = sample_dir
    label_names = dogs_builder.Builder(config="224").info.features["label"].names
    with tarfile.open(folder / "lists.tar") as tar:
        mat = scipy_io.loadmat(tar.extractfile("train_list.mat"), squeeze_me=True)
    for file, label in zip(mat["file_list"], mat["labels"], strict=True):
        assert label_names[label - 1] == file.split("/")[0].lower()
    assert len(mat["file_list"]) == sum(
        i["split"] == "train" for i in info["images"].values() if i["quirk"] != "unlisted"
    )


# -- against TFDS's own stanford_dogs ----------------------------------------------


class _FakeDownloadManager:
    """Just what TFDS's stanford_dogs builder calls, on local sample archives."""

    def __init__(self, sample_dir, extract_dir):
        self.sample_dir = sample_dir
        self.extract_dir = extract_dir

    def _local(self, url):
        return self.sample_dir / url.rsplit("/", 1)[-1]

    def download(self, url):
        return self._local(url)

    def download_and_extract(self, urls):
        out = []
        for url in urls:
            target = self.extract_dir / url.rsplit("/", 1)[-1]
            with tarfile.open(self._local(url)) as tar:
                tar.extractall(target, filter="data")
            out.append(target)
        return out

    def iter_archive(self, path):
        with tarfile.open(path) as tar:
            for member in tar:
                if member.isfile():
                    yield member.name, tar.extractfile(member)


def test_matches_tfds_stanford_dogs_on_a_quirk_free_sample(tmp_path):
    from tensorflow_datasets.datasets.stanford_dogs import stanford_dogs_dataset_builder as ref

    sample_dir = tmp_path / "sample"
    breeds = ("n02085620-Chihuahua", "n02099601-golden_retriever", "n02116738-African_hunting_dog")
    dogs_sample.write_stanford_dogs_archives(
        sample_dir, images_per_breed=3, breeds=breeds, quirks=False, seed=2, image_size=(60, 50)
    )
    ours = build(sample_dir, tmp_path / "data", "original")
    label_names = ours.info.features["label"].names

    # TFDS's builder only uses self.info.features['label'].names (which it sets
    # from train_list.mat) and the download manager: run its two methods on
    # stand-ins for both.
    fake_self = types.SimpleNamespace(
        info=types.SimpleNamespace(features={"label": types.SimpleNamespace(names=None)})
    )
    (extract_dir := tmp_path / "extracted").mkdir()
    generators = ref.Builder._split_generators(
        fake_self, _FakeDownloadManager(sample_dir, extract_dir)
    )
    assert fake_self.info.features["label"].names == sorted(b.lower() for b in breeds)
    for generator in generators:
        theirs = {
            key: ex for key, ex in ref.Builder._generate_examples(fake_self, **generator.gen_kwargs)
        }
        mine = examples(ours, str(generator.name))
        assert set(theirs) == set(mine) and mine
        for name, ex in mine.items():
            assert label_names[ex["label"]] == theirs[name]["label"]
            their_boxes = np.array(
                [list(obj["bbox"]) for obj in theirs[name]["objects"]], np.float32
            )
            np.testing.assert_array_equal(ex["objects"]["bbox"], their_boxes, err_msg=name)
