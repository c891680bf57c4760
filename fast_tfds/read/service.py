"""Decode on a tf.data service cluster instead of on the training machine.

    fast-tfds service dispatcher --port 5050 [--work-dir DIR]   (one machine)
    fast-tfds service worker --dispatcher HOST:5050             (each CPU machine)
    as_fast_dataset(..., service="grpc://HOST:5050")            (the trainer)

Where the pipeline is cut (`reader.read_split` calls `distribute`):

    workers: shard files ─ interleave(TFRecordDataset) ─ parse + (transform) + decode to uint8
    client:  ─ cache ─ shuffle ─ repeat ─ batch ─ float conversion ─ prefetch

Decoding is the CPU-heavy step, so it is what the workers do. Everything after
it stays on the client, unchanged:
- The cache: a worker-side cache would only ever hold what that worker happened
  to read in one job (every epoch is a new job, and dynamic sharding hands files
  out first come, first served), so it could not replay an exact epoch. On the
  client, the first epoch comes from the service and the next ones from the
  client's memory (or `cache=` files); pass cache=False to decode on the
  service every epoch, e.g. when the split does not fit in the client's memory.
- The shuffle, over the cached examples, gives a new order every epoch.
- Batching on the client keeps the global batch and `drop_remainder` exact (one
  partial batch per epoch, not one per worker). Elements travel as uint8
  (4x smaller than float32), compressed by the service.
- The float conversion is one fused op per batch; it is cheap, and with an
  accelerator it is better done there (dtype=tf.uint8).

Sharding: DYNAMIC (the default, 'dynamic'). The dispatcher hands out the split's
file instructions (shard files, or slices of them for 'train[:80%]') one at a
time to whichever worker asks next, so every example is read exactly once per
epoch however many workers there are (at most once if a worker fails mid-epoch:
tf.data service does not re-read a lost worker's files). FILE sharding was
rejected: it needs the dispatcher to be configured with the fixed list of
worker addresses (`DispatcherConfig(worker_addresses=...)`) and at least as many
files as workers, and gives each worker a fixed share even when some are
slower. 'off' makes every worker read the whole split (each example once per
worker); it exists for tests and for ensembles, not for training.

The workers run the pipeline's TensorFlow graph, not this package: they need the
same TensorFlow version, and the shard files at the same path (a shared
filesystem or a gs:// data_dir), but not fast_tfds.
"""

from __future__ import annotations

import re
import socket

from fast_tfds.cache.remote import object_stores

_ADDRESS = re.compile(r"(?:grpc://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})")
CONNECT_TIMEOUT_S = 5.0


def parse_address(address: object, argument: str = "service") -> tuple[str, int]:
    """(host, port) of 'grpc://HOST:PORT' or 'HOST:PORT'; ValueError naming `argument`."""
    match = _ADDRESS.fullmatch(address) if isinstance(address, str) else None
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ValueError(
            f"{argument}={address!r}: expected the address of a tf.data service "
            "dispatcher, 'grpc://HOST:PORT' or 'HOST:PORT'"
        )
    return match["host"].strip("[]"), int(match["port"])


def check_readable(service: str, shard: str) -> None:
    """A one-line ValueError where the service's workers could not read `shard`: they read
    the shards through TensorFlow's file systems, which read no object store but gs://."""
    store = object_stores.store_of(shard)
    if store is not None and not store.tensorflow_reads:
        raise ValueError(
            f"service={service!r}: the tf.data service's workers read the shards through "
            f"TensorFlow, which cannot read {store.scheme}:// ({shard}); read without "
            "service=, or serve a copy of the build in a shared folder or a gs:// bucket"
        )


def check_reachable(service: str) -> str:
    """The 'grpc://HOST:PORT' address of a dispatcher that answers; ValueError if none does.

    Without this check, building the dataset would hang (tf.data keeps retrying
    to register it with the dispatcher).
    """
    host, port = parse_address(service)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise ValueError(
            f"service={service!r}: no dispatcher answers at {host}:{port} "
            f"({err.strerror or err}); start one with "
            f"`fast-tfds service dispatcher --port {port}`"
        ) from None
    return f"grpc://{host}:{port}"


def distribute(ds, service: str, sharding: str = "dynamic"):
    """`ds` (the per-example decoding) run by the service's workers; see the module doc."""
    import tensorflow as tf

    policy = {
        "dynamic": tf.data.experimental.service.ShardingPolicy.DYNAMIC,
        "off": tf.data.experimental.service.ShardingPolicy.OFF,
    }[sharding]
    # Options set later on the client's dataset do not reach the graph the
    # workers run, so the worker side gets its own.
    options = tf.data.Options()
    options.deterministic = False
    options.autotune.enabled = True
    # No job_name: every iteration (every epoch) is its own job, so clients with
    # different datasets (one per input pipeline) never share one by accident.
    return ds.with_options(options).apply(
        tf.data.experimental.service.distribute(processing_mode=policy, service=service)
    )
