"""A script that reads an endless iteration (`num_epochs=None`, or the loader's endless
passes), stops after some batches and falls off its end, as a training script does:

    python -m tests.reliability.stop_reading KIND DATA_DIR [CACHE_DIR]

It prints `STOPPED` after its last batch; the test then expects it to exit. With KIND
`drop-*` it makes, reads from and drops 20 iterators (as Keras does each epoch without
`steps_per_epoch`), a plain TensorFlow pipeline read whole after each, before stopping.
"""

from __future__ import annotations

import sys

import cats_vs_dogs_fast
import fast_tfds


def tf_data(kind: str, data_dir: str, cache_dir: str | None):
    options = dict(data_dir=data_dir, download_and_prepare=False, batch_size=8, seed=0)
    if kind in ("augment", "drop-augment"):
        options.update(config="original", augment=fast_tfds.Augment())
    if kind == "persist":
        options.update(persist=True, cache_dir=cache_dir)
    return cats_vs_dogs_fast.as_fast_dataset("train", num_epochs=None, **options)


def loader(data_dir: str):
    return cats_vs_dogs_fast.as_fast_loader(
        "train",
        data_dir=data_dir,
        download_and_prepare=False,
        batch_size=8,
        seed=0,
        num_epochs=None,
        num_workers=2,
    )


def keras_fit(ds):
    import keras

    model = keras.Sequential(
        [
            keras.Input((224, 224, 3)),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(ds, epochs=2, steps_per_epoch=3, verbose=0)
    return model


def drop_iterators(ds):
    import tensorflow as tf

    for i in range(20):
        it = iter(ds)
        for _ in range(1 + 3 * i % 7):
            next(it)
        del it
        plain = tf.data.Dataset.range(100).map(lambda x: x * 2).prefetch(2)
        assert sum(int(x) for x in plain) == 9900
    it = iter(ds)  # The last one is kept.
    next(it)
    return it


def main(kind: str, data_dir: str, cache_dir: str | None = None):
    """What the script keeps when it ends: its iterator (or Keras' model), as a script's
    globals do. Kept past the script's end, it is freed by Python's finalization, where
    the hang came."""
    kept = None
    if kind == "loader":
        kept = iter(loader(data_dir))
        for _ in range(12):
            next(kept)
    elif kind == "keras":
        ds = cats_vs_dogs_fast.as_fast_dataset(
            "train",
            data_dir=data_dir,
            download_and_prepare=False,
            batch_size=8,
            seed=0,
            num_epochs=None,
            as_supervised=True,
        )
        kept = keras_fit(ds)
    elif kind.startswith("drop-"):
        kept = drop_iterators(tf_data(kind, data_dir, cache_dir))
    else:  # plain, augment, persist, bucket: stopped while epoch 1 fills the cache,
        # when tf.data's threads are surely inside numpy functions (the hang's case).
        kept = iter(tf_data(kind, data_dir, cache_dir))
        for _ in range(2):
            next(kept)
    print("STOPPED", flush=True)
    return kept


if __name__ == "__main__":
    kept = main(*sys.argv[1:])
