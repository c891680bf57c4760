"""The loader as a `torch.utils.data.IterableDataset` of ready batches (torch is optional)."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import data as torch_data

from fast_tfds.loader.augmented import map_arrays


class TorchBatches(torch_data.IterableDataset):
    """Batches of a `FastLoader` as torch tensors: uint8 images [B, H, W, 3], int64 labels.

    The loader already batches and decodes in parallel, so wrap it as

        torch.utils.data.DataLoader(loader.as_torch(), batch_size=None, num_workers=0)

    or iterate it directly. Each `iter()` is the loader's next pass (the epoch after the
    last one completed). Keras on the torch backend takes the loader itself.
    `state_dict()` / `load_state_dict()` save and restore the position in the
    epoch (the torchdata `StatefulDataLoader` convention).
    """

    def __init__(self, loader):
        """`loader`: a `fast_tfds.loader.FastLoader` (not imported here: it imports
        this module, for `FastLoader.as_torch`)."""
        super().__init__()
        self.loader = loader
        self._iterator = None
        self._pending_state: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        info = torch_data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                "the fast loader decodes in its own threads and processes; each torch "
                "DataLoader worker would repeat every batch. Use DataLoader(..., "
                "batch_size=None, num_workers=0)"
            )
        iterator = iter(self.loader)
        if self._pending_state is not None:
            iterator.set_state(self._pending_state)
            self._pending_state = None
        self._iterator = iterator
        for batch in iterator:
            yield map_arrays(torch.from_numpy, batch)

    def state_dict(self) -> dict[str, Any]:
        if self._iterator is None:
            raise RuntimeError("nothing to save yet: no epoch has started")
        return self._iterator.get_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The next `iter()` resumes where `state` was saved."""
        self._pending_state = state
