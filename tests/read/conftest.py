"""Fixtures of the read tests: what TFDS's own reader finds in the tiny build."""

from __future__ import annotations

import pytest

from tests.pairs import Truth

SLICES = ("train", "train[:40%]", "train[40%:]")


@pytest.fixture(scope="session")
def stored(cats_data_dir):
    """{split or slice: its examples as TFDS's own reader gives them} (config 224)."""
    return {split: Truth.of(cats_data_dir, split) for split in SLICES}
