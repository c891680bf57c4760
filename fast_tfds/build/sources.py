"""Where a build's source archives come from: the manual dir, else the registered download.

A file of the archive's name in the manual dir wins over a download (a mirror,
a sample, a machine without internet); its checksum is not checked.
"""

from __future__ import annotations

import os
import re

import tensorflow_datasets as tfds
from absl import logging
from etils import epath
from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError


def source_path(
    dl_manager: tfds.download.DownloadManager, url: str, *, dataset: str, url_infos=None
) -> epath.Path:
    """The manual dir's file of the URL's name if there is one, else the download."""
    filename = url.rsplit("/", 1)[-1]
    try:
        manual = dl_manager.manual_dir / filename
    except (AssertionError, ValueError):  # No manual dir, or an empty one.
        manual = None
    if manual is not None and manual.exists():
        logging.warning(
            "%s: using %s from the manual dir instead of downloading %s; its "
            "checksum is not checked against the registered one.",
            dataset,
            manual,
            url,
        )
        return manual
    try:
        return epath.Path(dl_manager.download(url))
    except NonMatchingChecksumError as err:
        expected = url_infos.get(url) if url_infos else None
        raise SourceChecksumError(dataset, url, err, expected) from None


class SourceChecksumError(NonMatchingChecksumError):
    """A downloaded archive is not the registered one; the message says what to do instead.

    TFDS's own error spans several lines of UrlInfo reprs and points to a web
    page; this one is a single line with the way out: a manual-dir copy.
    """

    def __init__(self, dataset: str, url: str, err: NonMatchingChecksumError, expected=None):
        message = str(err)
        filename = url.rsplit("/", 1)[-1]
        # TFDS's message: "Artifact URL, downloaded to PATH, has wrong checksum:
        # * Expected: UrlInfo(size=..., checksum='...') * Got: UrlInfo(...)".
        checksums = re.findall(r"checksum='([0-9a-f]+)'", message)
        downloaded = re.search(r"downloaded to (.+?), has wrong checksum", message)
        path = epath.Path(downloaded.group(1)) if downloaded else None
        details = []
        if expected is not None:
            details.append(
                f"expected {int(expected.size):,} bytes, sha256 {expected.checksum[:12]}..."
            )
        if path is not None and path.exists() and len(checksums) == 2:
            details.append(f"got {os.path.getsize(path):,} bytes, sha256 {checksums[1][:12]}...")
        details = f" ({'; '.join(details)})" if details else ""
        removed = _remove_failed_download(path)
        super().__init__(
            f"{dataset}: the download of {url} does not match its registered checksum"
            f"{details}{removed}: the server or a proxy changed the file, or the download "
            f"was cut short. Get the file another way, put it in a folder as {filename} "
            f"and build with `tfds build {dataset} --manual_dir FOLDER` (or "
            "tfds.download.DownloadConfig(manual_dir=FOLDER)); a manual-dir file's "
            "checksum is not checked."
        )


def _remove_failed_download(path: epath.Path | None) -> str:
    """Deletes the rejected file if TFDS left it in its temporary download folder."""
    # TFDS downloads into '<name>.tmp.<uuid>/' and leaves it there on a mismatch.
    if path is None or ".tmp." not in path.parent.name or not path.exists():
        return ""
    path.parent.rmtree()
    return "; the rejected download was deleted"
