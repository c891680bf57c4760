"""Reading source archives by member, without extracting them.

A build lists an archive's members once (names and where they are), then reads
each member's bytes by random access: a zip member by name (the central
directory is read once per process), a tar member by its offset (the tars are
not compressed, so a member is one seek and one read). The same readers serve
a local build and Beam workers: they pickle without their open file.

Names are filtered and normalized as TFDS's `dl_manager.iter_archive` does (no
hidden, absolute or `..` paths), so nothing is ever written or read outside the
archive's own tree.
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from collections.abc import Iterator

from etils import epath


class _OpenedOnce:
    """Base of the readers: the file is opened on first use in each process."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._handle = None

    def __getstate__(self):  # Pickled to Beam workers without the open file.
        return {"path": self.path, "_handle": None, "_names": {}}

    def _opened(self):
        if self._handle is None:
            self._handle = self._open(epath.Path(self.path).open("rb"))
        return self._handle


class ZipMemberReader(_OpenedOnce):
    """reader(normalized member name, as `zip_members` gives it) -> the member's bytes."""

    def _open(self, fobj):
        archive = zipfile.ZipFile(fobj)
        self._names = {normpath(info.filename): info.filename for info in archive.infolist()}
        return archive

    def __call__(self, name: str) -> bytes:
        archive = self._opened()
        return archive.read(self._names.get(name, name))


class TarMemberReader(_OpenedOnce):
    """reader((offset, size)) -> the bytes of the member at that offset (from `tar_members`)."""

    def _open(self, fobj):
        return fobj

    def __call__(self, location: tuple[int, int]) -> bytes:
        offset, size = location
        handle = self._opened()
        handle.seek(offset)
        data = handle.read(size)
        if len(data) != size:
            raise OSError(f"{self.path}: read {len(data)} of {size} bytes at {offset}")
        return data


def zip_members(path: str | os.PathLike) -> Iterator[str]:
    """The normalized name of each regular file of a zip, in the zip's order."""
    with epath.Path(path).open("rb") as fobj, zipfile.ZipFile(fobj) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = normpath(info.filename)
            if name is not None:
                yield name


def tar_members(path: str | os.PathLike) -> Iterator[tuple[str, tuple[int, int]]]:
    """(name, (offset, size)) of each regular file of an uncompressed tar, in order.

    Reads only the headers.
    """
    with epath.Path(path).open("rb") as fobj, tarfile.open(fileobj=fobj, mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = normpath(member.name)
            if name is not None:
                yield name, (member.offset_data, member.size)


def normpath(path: str) -> str | None:
    """The member name TFDS's iter_archive would give, or None for one it drops."""
    # As tensorflow_datasets.core.download.extractor._normpath (private there).
    path = os.path.normpath(path)
    if (
        path.startswith(".")
        or os.path.isabs(path)
        or path.endswith("~")
        or os.path.basename(path).startswith(".")
    ):
        return None
    return path
