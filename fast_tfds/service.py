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

import argparse
import re
import socket
import sys

SHARDING_POLICIES = ("dynamic", "off")
DEFAULT_DISPATCHER_PORT = 5050
DEFAULT_WORKER_PORT = 5051
_ADDRESS = re.compile(r"(?:grpc://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})")
_CONNECT_TIMEOUT_S = 5.0


def parse_address(address: object, argument: str = "service") -> tuple[str, int]:
    """(host, port) of 'grpc://HOST:PORT' or 'HOST:PORT'; ValueError naming `argument`."""
    match = _ADDRESS.fullmatch(address) if isinstance(address, str) else None
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ValueError(
            f"{argument}={address!r}: expected the address of a tf.data service "
            "dispatcher, 'grpc://HOST:PORT' or 'HOST:PORT'"
        )
    return match["host"].strip("[]"), int(match["port"])


def check_service(service: object, sharding: object, deterministic: bool | None) -> str:
    """Validates the reader's service options; returns the 'grpc://HOST:PORT' address.

    A dispatcher that does not answer is reported here, in one line: without
    this check, building the dataset would hang (tf.data keeps retrying to
    register it with the dispatcher).
    """
    host, port = parse_address(service)
    if sharding not in SHARDING_POLICIES:
        raise ValueError(
            f"service_sharding={sharding!r}: must be one of {', '.join(SHARDING_POLICIES)}"
        )
    if deterministic:
        raise ValueError(
            "deterministic=True: with service= the workers deliver examples as they "
            "decode them, so the order cannot be reproduced; leave deterministic unset"
        )
    try:
        socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S).close()
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


# -- servers -------------------------------------------------------------------


def start_dispatcher(port: int = DEFAULT_DISPATCHER_PORT, work_dir: str | None = None):
    """A started tf.data DispatchServer; with `work_dir` it journals its state there
    and recovers it after a restart (fault-tolerant mode)."""
    import tensorflow as tf

    config = tf.data.experimental.service.DispatcherConfig(
        port=port, work_dir=work_dir, fault_tolerant_mode=work_dir is not None
    )
    return tf.data.experimental.service.DispatchServer(config)


def start_worker(
    dispatcher: str,
    port: int = DEFAULT_WORKER_PORT,
    advertise: str | None = None,
    heartbeat_interval_ms: int | None = None,
):
    """A started tf.data WorkerServer registered with `dispatcher` ('HOST:PORT').

    `advertise` is the host name clients use to reach this worker; TensorFlow's
    default, localhost, only works when everything runs on one machine.
    `heartbeat_interval_ms` (TensorFlow's default when None) also bounds how
    long stopping the server can wait after a job: seconds by default.
    """
    import tensorflow as tf

    host, dispatcher_port = parse_address(dispatcher, "dispatcher")
    config = tf.data.experimental.service.WorkerConfig(
        dispatcher_address=f"{host}:{dispatcher_port}",
        worker_address=f"{advertise or socket.gethostname()}:%port%",
        port=port,
        heartbeat_interval_ms=heartbeat_interval_ms,
    )
    return tf.data.experimental.service.WorkerServer(config)


def _bound_port(server) -> int:
    # The servers know the port they bound (useful with --port 0) only as
    # 'localhost:PORT' in a private attribute.
    return int(server._address.rsplit(":", 1)[1])


def _reachable(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S).close()
        return True
    except OSError:
        return False


# -- command line --------------------------------------------------------------


def add_command(commands: argparse._SubParsersAction) -> None:
    """Adds `service dispatcher|worker` to the `fast-tfds` command line."""
    p = commands.add_parser("service", help="run a tf.data service dispatcher or worker")
    servers = p.add_subparsers(dest="server", required=True)
    d = servers.add_parser("dispatcher", help="the one dispatcher of a cluster")
    d.add_argument(
        "--port",
        type=int,
        default=DEFAULT_DISPATCHER_PORT,
        help=f"default {DEFAULT_DISPATCHER_PORT}; 0: any free port",
    )
    d.add_argument(
        "--work-dir",
        help="folder (local, shared or gs://) where the dispatcher journals its state, "
        "so that a restarted dispatcher resumes its jobs",
    )
    w = servers.add_parser("worker", help="a worker; start one per CPU machine")
    w.add_argument("--dispatcher", required=True, help="HOST:PORT of the dispatcher")
    w.add_argument(
        "--port",
        type=int,
        default=DEFAULT_WORKER_PORT,
        help=f"default {DEFAULT_WORKER_PORT}; 0: any free port",
    )
    w.add_argument(
        "--advertise",
        help="host name by which trainers reach this worker (default: this machine's "
        f"name, {socket.gethostname()})",
    )
    p.set_defaults(run=run_server)


def run_server(args: argparse.Namespace) -> None:
    """Starts the server the arguments name and blocks until the process is stopped."""
    from fast_tfds.quiet import quiet_tensorflow

    if not 0 <= args.port < 65536:
        raise SystemExit(f"--port {args.port}: must be 0 (any free port) to 65535")
    if args.server == "worker":
        try:
            host, port = parse_address(args.dispatcher, "--dispatcher")
        except ValueError as err:
            raise SystemExit(str(err)) from None
    quiet_tensorflow()
    if args.server == "dispatcher":
        server = start_dispatcher(args.port, args.work_dir)
        address = f"{socket.gethostname()}:{_bound_port(server)}"
        print(f"tf.data service dispatcher listening at grpc://{address}", flush=True)
        print(f"  workers: fast-tfds service worker --dispatcher {address}", flush=True)
        print(f"  trainers: as_fast_dataset(..., service='grpc://{address}')", flush=True)
    else:
        if not _reachable(host, port):
            print(
                f"warning: no dispatcher answers at {host}:{port} yet; "
                "the worker keeps trying to register",
                file=sys.stderr,
                flush=True,
            )
        server = start_worker(args.dispatcher, args.port, args.advertise)
        advertised = args.advertise or socket.gethostname()
        print(
            f"tf.data service worker at {advertised}:{_bound_port(server)}, "
            f"serving for the dispatcher at {host}:{port}",
            flush=True,
        )
    server.join()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fast-tfds", description=__doc__.split("\n\n")[0])
    add_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["service", *(sys.argv[1:] if argv is None else argv)])
    args.run(args)


if __name__ == "__main__":
    main()
