"""`fast-tfds`: sample archives, the offline demo, verify, cache, publish and tf.data service
servers.

fast-tfds sample DIR        write look-alike source archives into DIR
fast-tfds demo              sample -> `tfds build` -> as_fast_dataset(), vs a naive pipeline
fast-tfds service ...       run a tf.data service dispatcher or worker
fast-tfds verify PATH...    check built datasets: shards present, records intact, counts
fast-tfds cache list|clean  the reader's caches on disk: list them, remove old ones
fast-tfds publish DIR URL   upload a built version folder to a bucket, metadata last
"""

from __future__ import annotations

import argparse
import sys

from fast_tfds.cli import cache, demo, publish, service, verify
from fast_tfds.quiet import quiet_environment


def main(argv: list[str] | None = None) -> None:
    parser, sized = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        raise SystemExit(2)
    if args.command in sized:
        demo.check_sample_size(sized[args.command], args)
    # This program's own choices, never made on import of the library: TensorFlow
    # starts quietly, and a BuildError is one line instead of a traceback.
    quiet_environment()
    from fast_tfds.building.errors import install_excepthook

    install_excepthook()
    args.run(args)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `fast-tfds` parser, and the parsers of the commands that write samples."""
    parser = argparse.ArgumentParser(
        prog="fast-tfds", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # Not required by argparse: a bare `fast-tfds` prints the whole help (the commands
    # and what each does), not only "the following arguments are required".
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    sized = {}  # The commands that write samples, whose sizes are checked.
    p = sized["sample"] = commands.add_parser(
        "sample",
        help="write look-alike source archives into a folder",
        description="Writes look-alike source archives of both datasets into DIR, for "
        "`tfds build ... --manual_dir DIR`.",
    )
    p.add_argument("folder", metavar="DIR", help="where to write the archives (created if needed)")
    demo.add_sample_size_options(p)
    p.set_defaults(run=demo.sample_command)

    p = sized["demo"] = commands.add_parser(
        "demo",
        help="offline end to end: write samples, tfds build them, stream them",
        description="Offline, end to end: writes sample archives, builds them with the "
        "real `tfds build`, and streams them with as_fast_dataset() next to the TFDS course "
        "notebook's naive pipeline.",
    )
    demo.add_work_dir_option(p)
    demo.add_sample_size_options(p)
    p.add_argument("--fresh", action="store_true", help="regenerate the sample and rebuild")
    p.set_defaults(run=demo.demo)

    service.add_command(commands)  # fast-tfds service dispatcher|worker
    verify.add_command(commands)  # fast-tfds verify PATH...: shards present and intact
    cache.add_command(commands)  # fast-tfds cache list|clean [DIR]: the reader's caches on disk
    publish.add_command(commands)  # fast-tfds publish DIR URL: a build uploaded, metadata last
    return parser, sized


if __name__ == "__main__":
    main()
