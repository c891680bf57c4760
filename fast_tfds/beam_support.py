"""Building on Apache Beam: each dataset's per-example function, run by Beam workers.

A build given Beam options (`tfds build ... --beam_pipeline_options=...`, or
`DownloadConfig(beam_options=...)`) makes the builders return, per split,

    Create(members) ─ ParDo(read the member's bytes, make_example) ─┬─ (key, example) → TFDS writer
                                                                   └─ skipped → one JSON file

where `make_example` is the same pure function the local build runs in threads
(decode, fix the format, re-encode, resize, boxes). The driver only lists the
archive: members travel as (filename, location, extra), never as bytes, and
each worker reads the bytes itself, by random access: a zip member by name
(the zip's central directory is read once per worker), a tar member by its
offset, found by one pass over the tar's headers in the driver (the tars are not
compressed, so a member is one seek and one read). Workers must therefore reach
the source archives at the driver's path: a shared filesystem or gs:// for
--manual_dir / --download_dir.

Nothing is skipped silently: the workers' skips are collected into a file in
the build folder, which the builder adds to the split's SkipReport (and so to
metadata.json) after the pipeline ends; Beam counters `kept` and `skipped`
show progress in the runner's UI.
"""

from __future__ import annotations

import json
import os
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import apache_beam as beam
from etils import epath

from fast_tfds.builder import Skipped

SKIPPED = "skipped"
_NAMESPACE = "fast_tfds"


def examples_transform(
    members: list[tuple[str, Any, Any]],
    read_member: Callable[[Any], bytes],
    make_example: Callable[[tuple[str, bytes, Any]], Any],
    skips_path: epath.Path,
) -> beam.PTransform:
    """The PTransform (pipeline root -> (key, example)s) of one split; see the module doc."""
    return _Examples(members, read_member, make_example, os.fspath(skips_path))


class _Examples(beam.PTransform):
    def __init__(self, members, read_member, make_example, skips_path: str):
        super().__init__()
        self._members = members
        self._do_fn = _MakeExamples(read_member, make_example)
        self._skips_path = skips_path

    def expand(self, root):
        results = (
            root
            | "Members" >> beam.Create(self._members)  # Redistributed among the workers.
            | "MakeExamples" >> beam.ParDo(self._do_fn).with_outputs(SKIPPED, main="examples")
        )
        kept = results.examples | "CountKept" >> beam.combiners.Count.Globally()
        _ = (
            results[SKIPPED]
            | "ListSkipped" >> beam.combiners.ToList()
            | "WriteSkipped"
            >> beam.Map(write_skips, path=self._skips_path, kept=beam.pvalue.AsSingleton(kept))
        )
        return results.examples


class _MakeExamples(beam.DoFn):
    def __init__(self, read_member, make_example):
        self._read_member = read_member
        self._make_example = make_example
        self._kept = beam.metrics.Metrics.counter(_NAMESPACE, "kept")
        self._skipped = beam.metrics.Metrics.counter(_NAMESPACE, SKIPPED)

    def process(self, member):
        filename, location, extra = member
        # A read error is not a property of the image: it fails the work item
        # (the runner retries it), as it fails a local build.
        result = self._make_example((filename, self._read_member(location), extra))
        if isinstance(result, Skipped):
            self._skipped.inc()
            yield beam.pvalue.TaggedOutput(SKIPPED, (result.file, result.reason))
        else:
            self._kept.inc()
            yield result


def write_skips(skipped: list[tuple[str, str]], path: str, kept: int) -> None:
    data = {"kept": kept, "skipped": sorted(skipped)}
    epath.Path(path).parent.mkdir(parents=True, exist_ok=True)
    epath.Path(path).write_text(json.dumps(data))


def add_worker_skips(report, path: epath.Path) -> None:
    """Adds what the workers of one split kept and skipped to its SkipReport."""
    if not path.exists():
        raise RuntimeError(
            f"{report.dataset}/{report.split}: the Beam pipeline ended without writing "
            f"its skip list {path}; the build is incomplete"
        )
    data = json.loads(path.read_text())
    report.kept += data["kept"]
    for filename, reason in data["skipped"]:
        report.skip(filename, reason)


def counters(pipeline_result) -> dict[str, int]:
    """{'kept': n, 'skipped': n} counted by the workers of a finished pipeline."""
    query = pipeline_result.metrics().query(beam.metrics.MetricsFilter().with_namespace(_NAMESPACE))
    totals: dict[str, int] = {}
    for counter in query["counters"]:
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + counter.committed
    return totals


# -- reading members on the workers ----------------------------------------------


class _OpenedOnce:
    """Base of the readers: the file is opened on first use in each worker."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._handle = None

    def __getstate__(self):  # Pickled to the workers without the open file.
        return {"path": self.path, "_handle": None, "_names": {}}

    def _opened(self):
        if self._handle is None:
            self._handle = self._open(epath.Path(self.path).open("rb"))
        return self._handle


class ZipMemberReader(_OpenedOnce):
    """reader(member name, as `dl_manager.iter_archive` gives it) -> the member's bytes."""

    def _open(self, fobj):
        archive = zipfile.ZipFile(fobj)
        # iter_archive normalizes the names it yields ('a/./b' -> 'a/b').
        self._names = {_normpath(info.filename): info.filename for info in archive.infolist()}
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


def tar_members(path: str | os.PathLike) -> Iterator[tuple[str, tuple[int, int]]]:
    """(name, (offset, size)) of each regular file of an uncompressed tar, in order.

    Reads only the headers. Names are filtered and normalized as TFDS's
    `dl_manager.iter_archive` does (no hidden or absolute paths), so a Beam
    build sees the same members as a local one.
    """
    with epath.Path(path).open("rb") as fobj, tarfile.open(fileobj=fobj, mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = _normpath(member.name)
            if name is not None:
                yield name, (member.offset_data, member.size)


def _normpath(path: str) -> str | None:
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
