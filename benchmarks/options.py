"""The options every benchmark spells the same way: the generated sample's size
(`--images-per-class`), the interleaved rounds (`--rounds`), and the one check that
every count of theirs goes through, so that a bad count is the same one-line error
(`--rounds=0: must be at least 1`) whichever benchmark it was given to."""

from __future__ import annotations

import argparse


def add_images_per_class(p: argparse.ArgumentParser, default: int | None, help: str = "") -> None:
    """--images-per-class: photos per class of the generated sample (built once per size in
    --workdir and reused); `default` per benchmark (None: the benchmark decides later)."""
    p.add_argument(
        "--images-per-class",
        type=int,
        default=default,
        help=help or f"size of the generated sample: photos per class (default {default})",
    )


def add_rounds(p: argparse.ArgumentParser, default: int | None, help: str = "") -> None:
    """--rounds: how many times each row is timed, the rows interleaved in every round."""
    p.add_argument(
        "--rounds",
        type=int,
        default=default,
        help=help or f"interleaved rounds (default {default})",
    )


def check_counts(
    p: argparse.ArgumentParser, args: argparse.Namespace, more: dict | None = None
) -> None:
    """--images-per-class and --rounds (where the parser has them and they were given or
    defaulted) and the counts in `more` ({flag: value}) of at least 1, else the parser's
    one-line error naming the flag and its value."""
    counts = {
        "--images-per-class": getattr(args, "images_per_class", None),
        "--rounds": getattr(args, "rounds", None),
        **(more or {}),
    }
    for flag, value in counts.items():
        if value is not None and value < 1:
            p.error(f"{flag}={value}: must be at least 1")
