"""Where a build's source archives come from: the manual dir, else the registered download.

A file of the archive's name in the manual dir wins over a download (a mirror,
a sample, a machine without internet); its checksum is not checked.

A download that cannot work ends the build with one `BuildError` that names the
URL, the cause in a few words and the way out (the file, in a folder passed as
the manual dir), instead of TFDS's traceback from inside `requests`:

- before TFDS downloads, `downloads.check_url` looks at the URL, so that a name
  that does not resolve, a refused connection, an HTTP 4xx or an HTML page fail
  in seconds instead of after TFDS's ten retries (about 3.5 minutes);
- what TFDS's download still raises (a connection cut mid-way, a file that is
  not the registered one) is caught here and said the same way.

TFDS leaves a failed download in its temporary folder (`<name>.tmp.<uuid>/`);
the folders that appeared during the failed call are removed here. The build
lock (`guard.build_lock`) makes them this build's own.
"""

from __future__ import annotations

import hashlib
import urllib.parse

import requests
import tensorflow_datasets as tfds
from absl import logging
from etils import epath
from tensorflow_datasets.core.download import resource as resource_lib
from tensorflow_datasets.core.download import util as download_util
from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError

from fast_tfds.building import checks, downloads, once
from fast_tfds.building.errors import BuildError

# The archive kind a source file must be, by the extension of its URL's name.
_ARCHIVE_KINDS = {".zip": "zip", ".tar": "tar"}


def source_path(
    dl_manager: tfds.download.DownloadManager,
    url: str,
    *,
    dataset: str,
    url_infos=None,
    build_command: str | None = None,
) -> epath.Path:
    """The manual dir's file of the URL's name if there is one, else the download.

    `build_command` is the `tfds build` command that builds this dataset (see
    `fast_tfds.core.commands.tfds_build_command`), which the errors complete with `--manual_dir`.
    """
    build_command = build_command or f"tfds build {dataset}"
    filename = filename_of(url)
    try:
        manual = dl_manager.manual_dir / filename
    except (AssertionError, ValueError):  # No manual dir, or an empty one.
        manual = None
    if manual is not None and manual.exists():
        once.log_once(
            logging.WARNING,
            "%s: using %s from the manual dir instead of downloading %s; its "
            "checksum is not checked against the registered one.",
            dataset,
            manual,
            url,
        )
        kind = _ARCHIVE_KINDS.get(epath.Path(filename).suffix)
        if kind:  # A wrong file here is not caught by a checksum.
            checks.require_archive(manual, kind, dataset)
        return manual

    expected = (url_infos or {}).get(url)
    others = [filename_of(u) for u in (url_infos or {}) if u != url]
    if not _in_download_cache(dl_manager, dataset, url, expected):
        try:
            downloads.check_url(url, expected_size=expected.size if expected else None)
        except downloads.DownloadProblem as problem:
            raise DownloadFailedError(
                dataset, url, problem.reason, others, build_command=build_command
            ) from None

    temporary = _download_tmp_dirs(dl_manager, dataset)
    try:
        return epath.Path(dl_manager.download(url))
    except NonMatchingChecksumError:
        logging.debug("%s: TFDS's checksum error for %s", dataset, url, exc_info=True)
        rejected = _remove_new_tmp_dirs(dl_manager, dataset, temporary)
        raise SourceChecksumError(
            dataset, url, expected, rejected, build_command=build_command
        ) from None
    except (download_util.DownloadError, requests.RequestException, OSError) as err:
        logging.debug("%s: the download of %s failed", dataset, url, exc_info=True)
        _remove_new_tmp_dirs(dl_manager, dataset, temporary)
        reason = downloads.describe(err).reason
        raise DownloadFailedError(
            dataset, url, reason, others, build_command=build_command
        ) from None


def filename_of(url: str) -> str:
    return urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]


def _manual_dir_remedy(filename: str, others: list[str], build_command: str) -> str:
    also = ""
    if others:
        also = f" ({' and '.join(others)} too, if they cannot be downloaded either)"
    return (
        f"Get {filename} another way, put it in a folder{also} and build with "
        f"`{build_command} --manual_dir FOLDER`, or in Python pass "
        "download_config=tfds.download.DownloadConfig(manual_dir=FOLDER); a manual-dir "
        "file's checksum is not checked."
    )


class DownloadFailedError(BuildError):
    """A source archive could not be downloaded; the message says why and how to build without."""

    def __init__(
        self,
        dataset: str,
        url: str,
        reason: str,
        others: list[str] = (),
        *,
        build_command: str,
    ):
        self.url = url
        self.reason = reason
        super().__init__(
            f"{dataset}: cannot download {url}: {reason}. "
            + _manual_dir_remedy(filename_of(url), list(others), build_command)
        )


class SourceChecksumError(BuildError, NonMatchingChecksumError):
    """A downloaded archive is not the registered one; the message says what to do instead.

    TFDS's own error spans several lines of UrlInfo reprs and points to a web
    page; this one is a single line with the way out: a manual-dir copy.
    `rejected` is the (size, sha256) of the rejected file, which `source_path`
    has already deleted, or None if it was not found.
    """

    def __init__(self, dataset: str, url: str, expected=None, rejected=None, *, build_command: str):
        details = []
        if expected is not None:
            details.append(
                f"expected {int(expected.size):,} bytes, sha256 {expected.checksum[:12]}..."
            )
        if rejected is not None:
            size, sha256 = rejected
            details.append(f"got {size:,} bytes, sha256 {sha256[:12]}...")
        details = f" ({'; '.join(details)})" if details else ""
        deleted = "; the rejected download was deleted" if rejected is not None else ""
        super().__init__(
            f"{dataset}: the download of {url} does not match its registered checksum"
            f"{details}{deleted}: the server or a proxy changed the file, or the download "
            "was cut short. " + _manual_dir_remedy(filename_of(url), [], build_command)
        )


# -- TFDS's download folder ------------------------------------------------------


def _in_download_cache(dl_manager, dataset: str, url: str, expected) -> bool:
    """Whether TFDS will take `url` from its download folder instead of the network.

    The same places TFDS's DownloadManager looks (`_download_or_get_cache`):
    `<download_dir>[/<dataset>]/<name from the URL and the sha256>`, or from
    the URL alone when no checksum is registered, with its `.INFO` file.
    """
    checksums = [None] if expected is None else [expected.checksum, None]
    for folder in (dl_manager.download_dir / dataset, dl_manager.download_dir):
        for checksum in checksums:
            if resource_lib.is_locally_cached(folder / resource_lib.get_dl_fname(url, checksum)):
                return True
    return False


def _download_tmp_dirs(dl_manager, dataset: str) -> set[epath.Path]:
    folder = dl_manager.download_dir / dataset
    return set(folder.glob("*.tmp.*")) if folder.exists() else set()


def _remove_new_tmp_dirs(dl_manager, dataset: str, before: set[epath.Path]):
    """Deletes TFDS's temporary download folders made since `before`.

    Returns the (size, sha256) of the file found in them, if there was one.
    """
    found = None
    for folder in sorted(_download_tmp_dirs(dl_manager, dataset) - before):
        for path in folder.iterdir():
            if path.is_file():
                with path.open("rb") as f:
                    found = (path.stat().length, hashlib.file_digest(f, "sha256").hexdigest())
        folder.rmtree()
    return found
