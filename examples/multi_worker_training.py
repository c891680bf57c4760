"""Train on cats_vs_dogs_fast with several machines (MultiWorkerMirroredStrategy).

Each worker machine runs this same script; TF_CONFIG tells it the cluster and
which worker it is. On two machines, host1 and host2:

    # on host1
    TF_CONFIG='{"cluster": {"worker": ["host1:12345", "host2:12345"]},
                "task": {"type": "worker", "index": 0}}' \\
      python examples/multi_worker_training.py --data-dir /shared/tensorflow_datasets
    # on host2: the same, with "index": 1

Without TF_CONFIG it trains on this machine alone. Every worker needs the built
dataset at the same --data-dir (a shared filesystem or gs://bucket/...), built
once beforehand with `tfds build cats_vs_dogs_fast --imports cats_vs_dogs_fast`.

Input: `distribute_datasets_from_function` calls `as_fast_dataset` once per
worker with a tf.distribute.InputContext; each worker then reads its own
disjoint subset of the split's shard files (>= 16 per split, so up to 16 workers)
and batches --batch-size / (number of replicas) examples per replica, so that
the global batch is --batch-size. Add --service grpc://HOST:PORT to have a tf.data
service cluster decode the images instead (see docs/scaling-out.md).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import cats_vs_dogs_fast  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="TFDS data dir holding the built dataset")
    parser.add_argument("--config", default="224", help="dataset config: 224 or original")
    parser.add_argument("--split", default="train")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=100, help="steps per epoch")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--service", help="grpc://HOST:PORT of a tf.data service dispatcher")
    return parser.parse_args(argv)


def make_dataset_fn(args: argparse.Namespace):
    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        options = {"service": args.service} if args.service else {}
        print(
            f"input pipeline {input_context.input_pipeline_id} of "
            f"{input_context.num_input_pipelines}: batches of "
            f"{input_context.get_per_replica_batch_size(args.batch_size)} per replica",
            flush=True,
        )
        return cats_vs_dogs_fast.as_fast_dataset(
            args.split,
            data_dir=args.data_dir,
            config=args.config,
            download_and_prepare=False,  # Built once beforehand, not by every worker.
            input_context=input_context,  # This worker's own shard files.
            batch_size=args.batch_size,  # Global; divided among the replicas.
            image_size=args.image_size,
            num_epochs=None,  # One iterator for all epochs; Keras counts steps.
            drop_remainder=True,  # Every replica gets a full batch.
            **options,
        )

    return dataset_fn


def make_model(image_size: int) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((image_size, image_size, 3)),  # float32 in [0, 1]
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.Conv2D(32, 3, strides=2, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )


def main(argv=None) -> None:
    args = parse_args(argv)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    print(
        f"workers: {len(cluster.get('worker', [])) or 1}, "
        f"replicas in sync: {strategy.num_replicas_in_sync}",
        flush=True,
    )
    batches = iter(strategy.distribute_datasets_from_function(make_dataset_fn(args)))
    with strategy.scope():
        model = make_model(args.image_size)
        optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    # A custom loop rather than model.fit: Keras 3's fit cannot take a dataset
    # distributed over several workers (it fails converting PerReplica values
    # while building the model), and this loop is what the TensorFlow multi-worker
    # guide does anyway.
    @tf.function
    def train_step(images, labels):
        def step(images, labels):
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels, model(images, training=True))
                # Averaged over the global batch: the replicas' gradients are summed.
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=args.batch_size)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        losses = strategy.run(step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for epoch in range(args.epochs):
        total = 0.0
        for _ in range(args.steps):
            total += float(train_step(*next(batches)))
        print(f"epoch {epoch + 1}: mean loss {total / args.steps:.4f}", flush=True)


if __name__ == "__main__":
    main()
