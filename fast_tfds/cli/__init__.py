"""`fast-tfds`: sample archives, the offline demo, verify, cache, servers, and the benchmark.

fast-tfds sample DIR        write look-alike source archives into DIR
fast-tfds demo              sample -> `tfds build` -> as_fast_dataset(), vs the seeds' pipeline
fast-tfds bench [options]   ours vs the seeds' and tfds.load pipelines (fast_tfds.bench)
fast-tfds service ...       run a tf.data service dispatcher or worker
fast-tfds verify PATH...    check built datasets: shards present, records intact, counts
"""

from __future__ import annotations

import argparse
import os
import sys

from fast_tfds.cli import demo, service, verify


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
        "demo", help="the offline main job: sample, tfds build, stream"
    )
    p.add_argument("--workdir", default=os.fspath(demo.DEFAULT_WORKDIR))
    demo.add_sample_size_options(p)
    p.add_argument("--fresh", action="store_true", help="regenerate the sample and rebuild")
    p.set_defaults(run=demo.demo)

    service.add_command(commands)  # fast-tfds service dispatcher|worker
    verify.add_command(commands)  # fast-tfds verify PATH...: shards present and intact

    # fast-tfds bench: its options live in fast_tfds.bench (also `python -m fast_tfds.bench`).
    commands.add_parser("bench", help="benchmark vs the seeds and tfds.load (bench --help)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        from fast_tfds.bench import main as bench

        bench.main(argv[1:])
        return

    args = parser.parse_args(argv)
    if args.command in sized:
        demo.check_sample_size(sized[args.command], args)
    args.run(args)


if __name__ == "__main__":
    main()
