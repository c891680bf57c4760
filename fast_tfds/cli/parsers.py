"""What the `fast-tfds` commands' parsers share."""

from __future__ import annotations

import argparse


def documented_command(commands, name: str, doc: str | None, help: str) -> argparse.ArgumentParser:
    """Command `name`'s parser (`help`: its line in `fast-tfds --help`), whose own --help
    shows `doc`, its module's docstring, with the docstring's line breaks kept."""
    return commands.add_parser(
        name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
