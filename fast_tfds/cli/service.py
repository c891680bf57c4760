"""`fast-tfds service dispatcher|worker`: the servers of a tf.data service cluster.

The trainer's side (`as_fast_dataset(service=...)`) is in `fast_tfds.read.service`,
which explains where the pipeline is cut and why.
"""

from __future__ import annotations

import argparse
import socket
import sys

from fast_tfds.read.service import CONNECT_TIMEOUT_S, parse_address

DEFAULT_DISPATCHER_PORT = 5050
DEFAULT_WORKER_PORT = 5051


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
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
        return True
    except OSError:
        return False


# -- command line --------------------------------------------------------------


def add_command(commands: argparse._SubParsersAction) -> None:
    """Adds `service dispatcher|worker` to the `fast-tfds` command line."""
    p = commands.add_parser("service", help="run a tf.data service dispatcher or worker")
    servers = p.add_subparsers(dest="server", required=True)
    d = servers.add_parser("dispatcher", help="the one dispatcher of a cluster")
    _add_port(d, DEFAULT_DISPATCHER_PORT)
    d.add_argument(
        "--work-dir",
        help="folder (local, shared or gs://) where the dispatcher journals its state, "
        "so that a restarted dispatcher resumes its jobs",
    )
    w = servers.add_parser("worker", help="a worker; start one per CPU machine")
    w.add_argument("--dispatcher", required=True, help="HOST:PORT of the dispatcher")
    _add_port(w, DEFAULT_WORKER_PORT)
    w.add_argument(
        "--advertise",
        help="host name by which trainers reach this worker (default: this machine's "
        f"name, {socket.gethostname()})",
    )
    p.set_defaults(run=run_server)


def _add_port(server: argparse.ArgumentParser, default: int) -> None:
    """A server's --port, checked in `run_server` (0 is any free port)."""
    server.add_argument(
        "--port", type=int, default=default, help=f"default {default}; 0: any free port"
    )


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
