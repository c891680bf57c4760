"""Every example checked as a whole: its pixels, label, filename and boxes together.

A test that compares only the images of an epoch cannot see an image served with
another example's label (a model trained on that learns nothing), or a filename or
boxes moved to another example. Here each example of the output is recorded as
everything it carries (`Output`), and an epoch is compared, as a multiset (each
example exactly once), with the truth: the same split as TFDS's own reader gives it
(`Truth.of`).

The join between the two is the example's identity. Dict output
(`as_supervised=False`) carries its filename; (image, label) output does not, and
there the image is the identity: its digest picks the truth's example, whose label
(and boxes) the output must carry. Where the pixels are the stored ones they are
TFDS's decode of the stored JPEG; where they are this package's (another output size,
a crop) they are its shared decoder's (`jpeg_blocks.decode_resized_into`) applied to
the JPEG that TFDS's reader returns for that example, so the label still comes from
TFDS and the identity from the example itself.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

Window = Any  # fn(height, width) -> (top, left, height, width), as the decoder takes it


class Output(NamedTuple):
    """One example as served: the digest of its uint8 pixels and what else it carries
    (None where the output has no such part)."""

    digest: str
    label: int
    filename: str | None = None
    boxes: tuple | None = None

    def fields(self) -> tuple[str, ...]:
        return tuple(k for k in self._fields if getattr(self, k) is not None)


def digest(image) -> str:
    return hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest()


def _numpy(value):
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def _uint8(images: np.ndarray) -> np.ndarray:
    """uint8 pixels of uint8 or unit-float (the reader's x / 255) images."""
    if images.dtype == np.uint8:
        return images
    restored = np.rint(images.astype(np.float64) * 255.0)
    assert np.abs(images * 255.0 - restored).max() < 1e-3, "float pixels are not x / 255"
    return restored.astype(np.uint8)


def _boxes(value) -> tuple:
    """[n, 4] boxes as a hashable tuple of exact float32 values."""
    rows = np.asarray(value, np.float32).reshape(-1, 4)
    return tuple(tuple(row) for row in rows.tolist())


def _per_example_boxes(bbox, num_boxes, batched: bool) -> list[tuple]:
    """Each example's boxes from a batch: ragged (tf.data), padded with a count
    (the loader), or one example's dense [n, 4]."""
    if not batched:
        return [_boxes(_numpy(bbox))]
    if hasattr(bbox, "to_list"):  # tf.RaggedTensor [batch, (n), 4]
        return [_boxes(rows) for rows in bbox.to_list()]
    bbox = _numpy(bbox)
    if num_boxes is None:
        return [_boxes(rows) for rows in bbox]
    return [_boxes(rows[:n]) for rows, n in zip(bbox, _numpy(num_boxes), strict=True)]


def outputs_of(element) -> list[Output]:
    """The examples of one element of a reader or loader: (image, label), (image,
    {'label', 'bbox'[, 'num_boxes']}) or an example dict; batched or not."""
    filenames = boxes = None
    if isinstance(element, Mapping):
        images, labels = element["image"], element["label"]
        if "image/filename" in element:
            filenames = element["image/filename"]
        if "objects" in element:
            boxes = element["objects"]["bbox"]
        num_boxes = None
    else:
        images, target = element
        num_boxes = None
        if isinstance(target, Mapping):
            labels, boxes, num_boxes = target["label"], target.get("bbox"), target.get("num_boxes")
        else:
            labels = target
    images = _uint8(_numpy(images))
    batched = images.ndim == 4
    images = images if batched else images[None]
    labels = np.atleast_1d(_numpy(labels))
    count = len(images)
    assert len(labels) == count, f"{count} images and {len(labels)} labels in one batch"
    names = [None] * count
    if filenames is not None:
        names = [n.decode() for n in np.atleast_1d(_numpy(filenames))]
    per_boxes = [None] * count
    if boxes is not None:
        per_boxes = _per_example_boxes(boxes, num_boxes, batched)
    parts = zip(images, labels, names, per_boxes, strict=True)
    return [Output(digest(i), int(label), n, b) for i, label, n, b in parts]


def epoch(source: Iterable, batches: int | None = None) -> list[Output]:
    """Every example in the order yielded: all of `source`, or `batches` elements of an
    open iterator."""
    if batches is not None:
        iterator: Iterator = iter(source)
        source = (next(iterator) for _ in range(batches))
    return [output for element in source for output in outputs_of(element)]


class Example(NamedTuple):
    """One example as TFDS's own reader gives it."""

    filename: str
    label: int
    jpeg: bytes  # the stored image, undecoded
    stored_digest: str  # digest of TFDS's decode of it
    boxes: tuple | None


def _decode_resized(jpeg: bytes, size: tuple[int, int], window: Window | None) -> np.ndarray:
    from fast_tfds.core import jpeg_blocks

    return jpeg_blocks.decode_resized_into(jpeg, np.empty((*size, 3), np.uint8), window)


def _as_hw(size) -> tuple[int, int] | None:
    if size is None:
        return None
    return (size, size) if isinstance(size, int) else tuple(size)


class Truth:
    """A split as TFDS's own reader gives it; `expect` and `check` compare epochs."""

    def __init__(self, examples: list[Example]):
        names = [e.filename for e in examples]
        assert len(set(names)) == len(names), "filenames should tell the examples apart"
        self.examples = examples
        self.by_name = {e.filename: e for e in examples}
        self._digests: dict = {}

    @staticmethod
    def of(data_dir, split: str = "train", name: str = "cats_vs_dogs_fast", config: str = "224"):
        """The split of a build through TFDS's own reader: `as_dataset` twice (with the
        JPEG bytes, SkipDecoding, and with TFDS's decoded pixels, joined on the
        filename), or `tfds.data_source` for an ArrayRecord build."""
        return _truth(name, config, os.fspath(data_dir), split)

    def __len__(self) -> int:
        return len(self.examples)

    def digests(self, size=None, crop: bool = False) -> dict[str, str]:
        """{filename: digest of the pixels served}: TFDS's stored pixels at size None,
        else the shared decoder's at `size` (of the first box's window with `crop`)."""
        key = (_as_hw(size), crop)
        if key not in self._digests:
            self._digests[key] = {e.filename: self._digest(e, *key) for e in self.examples}
        return self._digests[key]

    def _digest(self, example: Example, size, crop: bool) -> str:
        if size is None:
            assert not crop, "a crop at the stored size: give the size"
            return example.stored_digest
        window = None
        if crop:
            from stanford_dogs_tfrecord import crops

            window = functools.partial(crops.first_box_window, np.asarray(example.boxes))
        return digest(_decode_resized(example.jpeg, size, window))

    def expect(self, fields: tuple[str, ...], size=None, crop: bool = False) -> collections.Counter:
        """The Outputs an epoch must hold, with only `fields` filled in."""
        pixels = self.digests(size, crop)
        return collections.Counter(
            Output(
                pixels[e.filename],
                e.label,
                e.filename if "filename" in fields else None,
                e.boxes if "boxes" in fields else None,
            )
            for e in self.examples
        )

    def check(self, outputs: list[Output], size=None, crop: bool = False, times: int = 1) -> None:
        """Asserts that `outputs` are this split's examples, each exactly `times` times,
        each with its own label (and filename and boxes, where the output has them)."""
        assert outputs, "no example was read"
        fields = outputs[0].fields()
        assert all(o.fields() == fields for o in outputs), "examples with different parts"
        expected = collections.Counter(
            {k: v * times for k, v in self.expect(fields, size, crop).items()}
        )
        got = collections.Counter(outputs)
        if got == expected:
            return
        raise AssertionError(self._explain(got, expected, size, crop))

    def _explain(self, got, expected, size, crop) -> str:
        """Which examples differ, named by filename where the truth can tell."""
        pixels = self.digests(size, crop)
        names_of = collections.defaultdict(list)
        for name, d in pixels.items():
            names_of[d].append(name)
        extra, missing = got - expected, expected - got
        lines = [
            f"{sum(got.values())} examples read, {sum(expected.values())} expected; "
            f"{sum(extra.values())} not in the truth, {sum(missing.values())} missing"
        ]
        for output in list(extra)[:5]:
            # The examples whose image this is (a filename can be wrong too).
            owners = names_of.get(output.digest, [])
            stored = [(n, self.by_name[n].label, self.by_name[n].boxes) for n in owners]
            lines.append(
                f"  served label {output.label}, filename {output.filename}, boxes "
                f"{output.boxes} with the image of {stored or 'no example'}"
            )
        return "\n".join(lines)


@functools.cache
def _truth(name: str, config: str, data_dir: str, split: str) -> Truth:
    import tensorflow_datasets as tfds

    builder = tfds.builder(name, config=config, data_dir=data_dir)
    skip = {"image": tfds.decode.SkipDecoding()}
    if builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD:
        # TFDS reads ArrayRecord builds through its data source only, which decodes
        # images with Pillow; the readers promise TensorFlow's pixels (what
        # `as_dataset` gives a TFRecord build), so the stored JPEGs go to TensorFlow.
        import tensorflow as tf

        source = tfds.data_source(f"{name}/{config}", split=split, data_dir=data_dir, decoders=skip)
        raw = [source[i] for i in range(len(source))]
        decoded = {
            _text(ex["image/filename"]): digest(
                tf.io.decode_image(ex["image"], channels=3, expand_animations=False).numpy()
            )
            for ex in raw
        }
    else:
        raw = tfds.as_numpy(builder.as_dataset(split, decoders=skip))
        pixels = tfds.as_numpy(builder.as_dataset(split))
        decoded = {_text(ex["image/filename"]): digest(ex["image"]) for ex in pixels}
    examples = []
    for ex in raw:
        filename = _text(ex["image/filename"])
        boxes = _boxes(ex["objects"]["bbox"]) if "objects" in ex else None
        examples.append(
            Example(filename, int(ex["label"]), bytes(ex["image"]), decoded[filename], boxes)
        )
    assert len(examples) == len(decoded)
    return Truth(examples)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
