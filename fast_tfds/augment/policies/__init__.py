"""Automatic-augmentation policies: per example, which ops with which arguments.

- `torchvision`: `TrivialAugmentWide` and `RandAugment`, torchvision's op sets and
  magnitude tables (31 bins).
- `timm`: timm's RandAugment config strings ("rand-m9-mstd0.5-inc1", ...), its op set
  and its 0-10 magnitude scale.

A policy's `draw(seed, epoch, indices, output_size)` gives each example's recipe:
(op name, argument) pairs in order, as `fast_tfds.augment.warp.plan` takes them, from
(seed, epoch, example) alone (`fast_tfds.augment.draws`). `fill` is the colour its
geometric ops bring in from outside the frame.
"""

from __future__ import annotations

from fast_tfds.augment.policies import timm, torchvision

NAMES = ("trivial_augment_wide", "rand_augment")


def parse(name: str, **options):
    """The policy named `name`: torchvision's "trivial_augment_wide" (option:
    num_magnitude_bins) or "rand_augment" (options: num_ops, magnitude,
    num_magnitude_bins), or a timm config string starting with "rand-" (no options: the
    string holds them)."""
    check_options(name, options)
    if not isinstance(name, str):
        raise ValueError(f"auto_augment={name!r}: must be a string")
    if name == "trivial_augment_wide":
        return torchvision.TrivialAugmentWide(**options)
    if name == "rand_augment":
        return torchvision.RandAugment(**options)
    if name.startswith("rand-") or name == "rand":
        if options:
            raise ValueError(
                f"{', '.join(sorted(options))}: a timm config string holds its own options "
                f"(e.g. 'rand-m9-n2'), not keywords"
            )
        return timm.RandAugment.parse(name)
    raise ValueError(
        f"auto_augment={name!r}: must be 'trivial_augment_wide', 'rand_augment' or a timm "
        "config string such as 'rand-m9-mstd0.5-inc1'"
    )


def check_options(name, options: dict) -> None:
    """num_ops= and magnitude= only with auto_augment="rand_augment" (`name`; None: no
    policy is on): the others draw their own, and a timm config string holds its own."""
    for field in ("num_ops", "magnitude"):
        if field not in options or name == "rand_augment":
            continue
        if name is None:
            why = "no policy is on"
        elif isinstance(name, str) and name.startswith("rand"):
            why = "a timm config string holds its own, e.g. 'rand-m9-n2'"
        else:
            why = f"{name} draws its own"
        raise ValueError(
            f"{field}={options[field]!r}: must be left out: only auto_augment='rand_augment' "
            f"takes {field} ({why})"
        )
