"""The build layer: what both dataset builders share (see `builder`)."""

from fast_tfds.building.builder import FastImageBuilder, ImageConfig, image_configs
from fast_tfds.building.examples import KeyExample, Skipped, SkipReport
from fast_tfds.building.shards import MIN_SHARDS_PER_SPLIT

__all__ = [
    "MIN_SHARDS_PER_SPLIT",
    "FastImageBuilder",
    "ImageConfig",
    "KeyExample",
    "SkipReport",
    "Skipped",
    "image_configs",
]
