"""fast_tfds: the library behind the cats_vs_dogs_fast and stanford_dogs_tfrecord builders.

Layers, each a subpackage, importing downward only:

    datasets (cats_vs_dogs_fast, stanford_dogs_tfrecord)
        -> fast_tfds.building  (builders: sources, shards, skips, Beam)
        -> fast_tfds.read   (the fast tf.data reader)      -> fast_tfds.core
        -> fast_tfds.loader (ArrayRecord + Grain batches)  -> fast_tfds.core
    fast_tfds.augment: crops, flips and colour jitter for both readers, without
        TensorFlow (-> fast_tfds.core).
    fast_tfds.core: what both readers share, without TensorFlow (builder lookup,
        options, output sizes, the JPEG block decoder, dataset hooks, memory budget).
    fast_tfds.cli, fast_tfds.samples, fast_tfds.quiet: tooling on top of them (the
        benchmark lives in a clone of the repository, benchmarks/, and is not installed).

The public API is re-exported here and loaded on first use, so that importing
a submodule (the samples, a non-TensorFlow loader) does not load TensorFlow.
"""

from __future__ import annotations

from fast_tfds.read._lazy import exports

_EXPORTS = {
    "as_fast_dataset": "fast_tfds.read.reader",
    "read_split": "fast_tfds.read.reader",
    "load_builder": "fast_tfds.core.builder_lookup",
    "set_epoch": "fast_tfds.core.passes",
    "KerasEpochs": "fast_tfds.core.keras_epochs",
    "as_fast_loader": "fast_tfds.loader",
    "Augment": "fast_tfds.augment.spec",
    "Mix": "fast_tfds.augment.mixing",
    "ProgressiveResize": "fast_tfds.augment.progressive",
    "ReadOptions": "fast_tfds.read.options",
    "decode_jpeg_block": "fast_tfds.core.jpeg_blocks",
    "decode_jpeg_block_into": "fast_tfds.core.jpeg_blocks",
    "FastImageBuilder": "fast_tfds.building.builder",
    "ImageConfig": "fast_tfds.building.builder",
    "image_configs": "fast_tfds.building.builder",
    "SkipReport": "fast_tfds.building.examples",
    "Skipped": "fast_tfds.building.examples",
    "MIN_SHARDS_PER_SPLIT": "fast_tfds.building.shards",
}

__all__, __getattr__, __dir__ = exports(__name__, _EXPORTS)
