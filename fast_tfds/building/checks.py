"""Structure checks: a source archive that is not the dataset's own fails the build, before
anything is written.

A damaged file (empty, truncated, not an image) is a skip: counted, listed in
the metadata, and the build goes on. A source whose layout is wrong is not:
a Cats zip without PetImages/Cat and PetImages/Dog, Stanford archives whose
listed images are in unknown breed folders, or whose lists and images do not
match, an archive of another dataset under the right name. Building from such
a source would "succeed" with a handful of images. The rule, the same for both
datasets (`require_mostly_usable`):

    a build fails if more than MAX_SHARE (10%) of the items it checks, and more
    than MAX_COUNT (5) of them, cannot be used for a structural reason, or if
    none can be used.

The count keeps small look-alike samples with a few deliberate oddities (the
test data, `fast-tfds sample`) building; the share catches any real-size
source that is not the dataset's own. The real archives have no structural
problem at all.
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from collections.abc import Mapping, Sequence

from etils import epath

from fast_tfds.building.errors import BuildError

MAX_SHARE = 0.10
MAX_COUNT = 5


class SourceStructureError(BuildError, ValueError):
    """A source archive does not have the dataset's layout; nothing was built."""


def require_mostly_usable(
    dataset: str,
    *,
    source: str,
    items: str,
    total: int,
    unusable: Mapping[str, Sequence[str]],
    hint: str,
) -> None:
    """Raises SourceStructureError if the structural problems break the rule above.

    Args:
      dataset: the dataset's name, first in the message.
      source: what was checked, e.g. 'kagglecatsanddogs_5340.zip'.
      items: what `total` counts, e.g. 'files' or 'images listed in lists.tar'.
      total: how many items were checked.
      unusable: {reason: [names of the items unusable for that reason]}.
      hint: what to check, the last sentence of the message.
    """
    bad = sum(len(names) for names in unusable.values())
    none_usable = bad >= total
    too_many = bad > MAX_SHARE * total and bad > MAX_COUNT
    if not (none_usable or too_many):
        return
    reasons = "; ".join(
        f"{len(names):,} x {reason} (e.g. {names[0]})"
        for reason, names in sorted(unusable.items(), key=lambda kv: -len(kv[1]))
        if names
    )
    found = f"no {items}"
    if total:
        found = f"{bad:,} of the {total:,} {items} cannot be used: {reasons}"
    raise SourceStructureError(
        f"{dataset}: the source ({source}) does not look like {dataset}'s: {found}. "
        f"Nothing was built (a build fails when more than {MAX_SHARE:.0%} of them, and "
        f"more than {MAX_COUNT}, are unusable). {hint}"
    )


def require_archive(path: epath.Path, kind: str, dataset: str) -> None:
    """Raises SourceStructureError unless `path` is a `kind` ('zip' or 'tar') archive."""
    is_kind = {"zip": zipfile.is_zipfile, "tar": tarfile.is_tarfile}[kind]
    with epath.Path(path).open("rb") as fobj:
        if is_kind(fobj):
            return
        fobj.seek(0)
        head = fobj.read(512)
    raise SourceStructureError(
        f"{dataset}: {os.fspath(path)} is not a {kind} archive ({_looks_like(head)}): "
        f"is it the right file? Put the dataset's own {epath.Path(path).name} in its place."
    )


def _looks_like(head: bytes) -> str:
    if not head:
        return "it is empty"
    if head.startswith(b"PK"):
        return "it is a zip archive"
    if head[257:262] == b"ustar":
        return "it is a tar archive"
    if head.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed"
    if head.lstrip()[:1] == b"<":
        return "it is an HTML or XML page"
    return f"it starts with {head[:8]!r}"
