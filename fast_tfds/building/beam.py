"""Building on Apache Beam: each dataset's per-example function, run by Beam workers.

A build given Beam options (`tfds build ... --beam_pipeline_options=...`, or
`DownloadConfig(beam_options=...)`) makes the builders return, per split,

    Create(members) ─ ParDo(read the member's bytes, make_example) ─┬─ (key, example) → TFDS writer
                                                                   └─ skipped → one JSON file

where `make_example` (`examples.image_example` with the dataset's features) is the
same pure function the local build runs in threads (decode, fix the format,
re-encode, resize, boxes). The driver only lists the
archive: members travel as (filename, location, extra), never as bytes, and
each worker reads the bytes itself, by random access: a zip member by name
(the zip's central directory is read once per worker), a tar member by its
offset, found by one pass over the tar's headers in the driver (see `archives`).
Workers must therefore reach the source archives at the driver's path: a shared
filesystem or gs:// for --manual_dir / --download_dir.

Nothing is skipped silently: the workers' skips are collected into a file in
the build folder, which the builder adds to the split's SkipReport (and so to
metadata.json) after the pipeline ends; Beam counters `kept` and `skipped`
show progress in the runner's UI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from absl import logging
from etils import epath

from fast_tfds.building.examples import Skipped

SKIPPED = "skipped"
_NAMESPACE = "fast_tfds"


@beam.ptransform_fn
def examples_transform(
    root,
    members: list[tuple[str, Any, Any]],
    read_member: Callable[[Any], bytes],
    make_example: Callable[[tuple[str, bytes, Any]], Any],
    skips_path: epath.Path,
):
    """The PTransform (pipeline root -> (key, example)s) of one split; see the module doc."""
    make = beam.ParDo(_MakeExamples(read_member, make_example))
    results = (
        root
        | "Members" >> beam.Create(members)  # Redistributed among the workers.
        | "MakeExamples" >> make.with_outputs(SKIPPED, main="examples")
    )
    kept = results.examples | "CountKept" >> beam.combiners.Count.Globally()
    _ = (
        results[SKIPPED]
        | "ListSkipped" >> beam.combiners.ToList()
        | "WriteSkipped"
        >> beam.Map(write_skips, path=os.fspath(skips_path), kept=beam.pvalue.AsSingleton(kept))
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


def log_counters(dataset: str, pipeline_result) -> None:
    """Logs what the workers of a finished pipeline kept and skipped (all splits)."""
    query = pipeline_result.metrics().query(beam.metrics.MetricsFilter().with_namespace(_NAMESPACE))
    totals: dict[str, int] = {}
    for counter in query["counters"]:
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + counter.committed
    logging.info(
        "%s: Beam workers kept %d images and skipped %d files (all splits).",
        dataset,
        totals.get("kept", 0),
        totals.get(SKIPPED, 0),
    )
