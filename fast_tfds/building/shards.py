"""The shard policy of both builders: at least `MIN_SHARDS_PER_SPLIT` files per split.

TFDS picks 4-8 shards for these datasets (it aims at 64 MiB-1 GiB per shard);
parallel interleave and up to 16 input pipelines (one per worker of a
multi-worker job) want more files than that.
"""

from __future__ import annotations

import dataclasses

import tensorflow_datasets as tfds
from tensorflow_datasets.core.utils import shard_utils

MIN_SHARDS_PER_SPLIT = 16


@dataclasses.dataclass(frozen=True)
class AtLeastShards(shard_utils.ShardConfig):
    """TFDS's size rule, but never fewer than `min_num_shards` (clamped to the examples)."""

    min_num_shards: int = MIN_SHARDS_PER_SPLIT

    def get_number_shards(
        self, total_size: int, num_examples: int, uses_precise_sharding: bool = True
    ) -> int:
        if self.num_shards:  # The user asked for an exact count.
            return self.num_shards
        by_size = self.calculate_number_shards(total_size, num_examples, uses_precise_sharding)
        return max(by_size, min(self.min_num_shards, num_examples))


@dataclasses.dataclass(eq=False)
class AtLeastShardsDownloadConfig(tfds.download.DownloadConfig):
    """A DownloadConfig whose shard config is `AtLeastShards`."""

    min_num_shards: int = MIN_SHARDS_PER_SPLIT

    def get_shard_config(self) -> shard_utils.ShardConfig:
        return AtLeastShards(
            num_shards=self.num_shards,
            min_shard_size=self.min_shard_size,
            max_shard_size=self.max_shard_size,
            min_num_shards=self.min_num_shards,
        )

    @classmethod
    def from_config(
        cls, config: tfds.download.DownloadConfig, min_num_shards: int
    ) -> AtLeastShardsDownloadConfig:
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        return cls(**fields, min_num_shards=min_num_shards)
