"""What the `fast-tfds` commands' parsers share (a module of its own: `fast_tfds.cli`
imports every command's module)."""

from __future__ import annotations

import argparse


def documented_parser(commands, name: str, doc: str, **options) -> argparse.ArgumentParser:
    """The parser of `fast-tfds NAME`, whose --help prints `doc` (its module's docstring) as
    written; `options` go to `add_parser` (its `help`)."""
    return commands.add_parser(
        name, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **options
    )
