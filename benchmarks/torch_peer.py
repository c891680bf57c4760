"""The torchvision peer: what a PyTorch user writes today for a strong recipe, on JPEG bytes.

torchvision's transforms v2 on uint8 tensors (its fast path): `decode_jpeg`, then
RandomResizedCrop (antialiased, torchvision's default) + flip + TrivialAugmentWide +
RandomErasing(value="random", timm's and ours) per example, in a `DataLoader` whose worker
processes run the `Dataset`. The recipes benchmark runs it in a process of its own, with
its own Python (`benchmarks.peers`), over JPEG bytes held in memory; the accelerator
benchmark in its own process, over the ArrayRecord records our loader reads, with timm's
`Mixup` on the GPU after it, as timm's users run it.

This module imports torch and torchvision only (and the records' reader where they are
read), so that a peer's Python needs nothing else of ours.
"""

from __future__ import annotations

import os
import warnings

import torch
from torch.utils.data import Dataset
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.transforms import v2

# decode_jpeg reads the bytes through a read-only tensor, which it never writes: torch's
# warning about it, once per worker process, says nothing about the peer.
warnings.filterwarnings("ignore", message="The given buffer is not writable")


def transform(size: int, erase: float):
    """The per-example recipe: RandomResizedCrop + flip + TrivialAugmentWide + erasing."""
    return v2.Compose(
        [
            v2.RandomResizedCrop(size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.TrivialAugmentWide(),
            v2.RandomErasing(erase, value="random"),
        ]
    )


class Jpegs(Dataset):
    """`source[i]` -> (JPEG bytes, label), decoded and transformed per example; `repeat`
    times over (an epoch as long as a larger dataset's, from the same records)."""

    def __init__(self, source, size: int, erase: float, repeat: int = 1):
        self.source, self.repeat = source, repeat
        self.transform = transform(size, erase)

    def __len__(self):
        return len(self.source) * self.repeat

    def __getitem__(self, i):
        jpeg, label = self.source[i % len(self.source)]
        image = decode_jpeg(torch.frombuffer(jpeg, dtype=torch.uint8), ImageReadMode.RGB)
        return self.transform(image), label


def records(files) -> list[tuple[bytes, int]]:
    """(JPEG bytes, label) of every record of ArrayRecord `files`: the TFDS examples our
    loader reads, parsed with TFDS's own `tf.train.Example` message (no TensorFlow). Read
    once, here: the DataLoader's forked workers share the list (a forked process that opens
    an ArrayRecord reader again can crash on the reader state it inherited)."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource
    from tensorflow_datasets.proto import tf_example_pb2

    source = ArrayRecordDataSource([os.fspath(f) for f in files])
    out = []
    for record in source.__getitems__(range(len(source))):
        feature = tf_example_pb2.Example.FromString(record).features.feature
        out.append((feature["image"].bytes_list.value[0], feature["label"].int64_list.value[0]))
    return out
