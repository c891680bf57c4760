"""The loader as a torch IterableDataset (torch is optional: skipped without it)."""

from __future__ import annotations

import numpy as np
import pytest

import cats_vs_dogs_fast
import stanford_dogs_tfrecord
from tests.pairs import Truth, epoch

try:
    import torch
except ImportError:
    torch = None
# Each test is collected and skipped without torch (a skipped module would count as a
# skip but not as a collected test, and the summary would not add up).
pytestmark = pytest.mark.skipif(torch is None, reason="needs torch, which is not installed")


def cats_torch(data_dir, **options):
    loader = cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, batch_size=4, seed=2, num_threads=2, **options
    )
    return loader, loader.as_torch()


def test_a_torch_dataloader_gets_tensors_and_each_epoch_once(cats_array_record_dir):
    loader, dataset = cats_torch(cats_array_record_dir)
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0)
    assert len(data) == len(loader)
    epochs = []
    for _ in range(2):
        batches = list(data)
        images, labels = batches[0]
        assert images.dtype == torch.uint8 and images.shape == (4, 224, 224, 3)
        assert labels.dtype == torch.int64  # what cross_entropy wants
        assert sum(len(labels) for _, labels in batches) == loader.num_examples
        epochs.append(epoch(batches))
    # A new order each epoch, every image once with its own label in each.
    truth = Truth.of(cats_array_record_dir)
    for examples in epochs:
        truth.check(examples)
    assert epochs[0] != epochs[1]


def test_state_dict_resumes_the_epoch(cats_array_record_dir):
    _, dataset = cats_torch(cats_array_record_dir)
    batches = iter(dataset)
    for _ in range(2):
        next(batches)
    state = dataset.state_dict()
    rest = [labels for _, labels in batches]
    _, restored = cats_torch(cats_array_record_dir)
    restored.load_state_dict(state)
    resumed = [labels for _, labels in restored]
    assert len(resumed) == len(rest) > 0
    assert all(torch.equal(a, b) for a, b in zip(rest, resumed, strict=True))


def test_boxes_come_as_a_dict_of_tensors(stanford_array_record_dir):
    loader = stanford_dogs_tfrecord.as_fast_loader(
        "train", data_dir=stanford_array_record_dir, batch_size=3, with_boxes=True, max_boxes=2
    )
    images, target = next(iter(loader.as_torch()))
    assert set(target) == {"label", "bbox", "num_boxes"}
    assert target["bbox"].shape == (3, 2, 4) and target["bbox"].dtype == torch.float32
    assert np.all(target["num_boxes"].numpy() >= 1)


def test_torch_worker_processes_are_refused(cats_array_record_dir):
    _, dataset = cats_torch(cats_array_record_dir)
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(data))
