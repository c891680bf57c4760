"""`fast-tfds`: sample archives, the offline demo, verify, cache and tf.data service servers.

fast-tfds sample DIR        write look-alike source archives into DIR
fast-tfds demo              sample -> `tfds build` -> as_fast_dataset(), vs a naive pipeline
fast-tfds service ...       run a tf.data service dispatcher or worker
fast-tfds verify PATH...    check built datasets: shards present, records intact, counts
fast-tfds cache list|clean  the reader's caches on disk: list them, remove old ones
"""

from __future__ import annotations

import argparse
import os

from fast_tfds.cli import cache, demo, service, verify
from fast_tfds.quiet import quiet_environment


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="fast-tfds", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    sized = {}  # The commands that write samples, whose sizes are checked.
    p = sized["sample"] = commands.add_parser(
        "sample", help="write look-alike source archives into a folder"
    )
    p.add_argument("folder")
    demo.add_sample_size_options(p)
    p.set_defaults(run=demo.sample_command)

    p = sized["demo"] = commands.add_parser(
        "demo", help="offline end to end: write samples, tfds build them, stream them"
    )
    p.add_argument("--workdir", default=os.fspath(demo.DEFAULT_WORKDIR))
    demo.add_sample_size_options(p)
    p.add_argument("--fresh", action="store_true", help="regenerate the sample and rebuild")
    p.set_defaults(run=demo.demo)

    service.add_command(commands)  # fast-tfds service dispatcher|worker
    verify.add_command(commands)  # fast-tfds verify PATH...: shards present and intact
    cache.add_command(commands)  # fast-tfds cache list|clean [DIR]: the reader's caches on disk

    args = parser.parse_args(argv)
    if args.command in sized:
        demo.check_sample_size(sized[args.command], args)
    # This program's own choices, never made on import of the library: TensorFlow
    # starts quietly, and a BuildError is one line instead of a traceback.
    quiet_environment()
    from fast_tfds.building.errors import install_excepthook

    install_excepthook()
    args.run(args)


if __name__ == "__main__":
    main()
