"""Reads from the emulated bucket in a child process, with their outputs sent back.

TensorFlow reads its gs:// settings (proxy, CA bundle, token) from the environment of
the process, so each read runs in a child that has `Bucket.env()`. The child prints
one `OUTPUTS <name> <json>` line per read: every example as `tests.pairs.Output`.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.bucket.emulated import Bucket, child_env
from tests.children import TIMEOUT_S, Child
from tests.helpers import REPO
from tests.pairs import Output

# The child's preamble: `report(name, source)` sends back one read's examples.
PREAMBLE = """
import json, sys
from tests.pairs import epoch

def report(name, source):
    outputs = [list(o) for o in epoch(source)]
    print("OUTPUTS", name, json.dumps(outputs), flush=True)
"""

# A cached read with persist=True, two epochs reported as gs0 and gs1. KIND: tf-augment,
# tf-plain, loader, loader-augment; DATA_DIR: the bucket's; CACHE_DIR; LOCAL_DIR (optional):
# first the same read of the local copy, persist=False, as local0 and local1.
PERSIST = """
import os
import cats_vs_dogs_fast
import fast_tfds

kind = os.environ["KIND"]

def source(data_dir, persist):
    common = dict(batch_size=8, shuffle=False, seed=3, download_and_prepare=False, cache=True,
                  persist=persist, cache_dir=os.environ["CACHE_DIR"], data_dir=data_dir)
    if kind.endswith("augment"):
        common["augment"] = fast_tfds.Augment()
    if kind.startswith("tf"):
        import tensorflow as tf
        dtype = {"dtype": tf.uint8} if kind == "tf-augment" else {}
        return cats_vs_dogs_fast.as_fast_dataset("train", **common, **dtype)
    return cats_vs_dogs_fast.as_fast_loader("train", **common)

if os.environ.get("LOCAL_DIR"):
    local = source(os.environ["LOCAL_DIR"], False)
    for k in range(2):
        report(f"local{k}", local)
gs = source(os.environ["DATA_DIR"], True)
for k in range(2):
    report(f"gs{k}", gs)
"""


def _output(row) -> Output:
    digest, label, filename, boxes = row
    boxes = None if boxes is None else tuple(tuple(b) for b in boxes)
    return Output(digest, label, filename, boxes)


def start(bucket: Bucket, code: str, args=(), **env: str) -> Child:
    """A child running `PREAMBLE` + `code`, with `args` in its sys.argv."""
    return Child(
        [sys.executable, "-c", PREAMBLE + code, *args],
        cwd=REPO,
        env=child_env(bucket, **env),
        stdin=subprocess.PIPE,
    )


def ended(child: Child, timeout: float = TIMEOUT_S) -> tuple[dict[str, list[Output]], str]:
    """({name: outputs}, its `ERROR` line or "") of a child that has ended well."""
    found, error = {}, ""
    for line in child.rest(timeout).splitlines():
        if line.startswith("OUTPUTS "):
            _, name, rows = line.split(" ", 2)
            found[name] = [_output(row) for row in json.loads(rows)]
        elif line.startswith("ERROR "):
            error = line
    code = child.wait(60)
    assert code == 0, f"the child failed ({code}): {child.stderr_text()[-4000:]}"
    return found, error


def outputs_of(child: Child, timeout: float = TIMEOUT_S) -> dict[str, list[Output]]:
    """{name: outputs} of every read the child reported, once it has ended well."""
    found, error = ended(child, timeout)
    assert not error, error
    return found


def run(bucket: Bucket, code: str, **env: str) -> tuple[dict[str, list[Output]], str]:
    """({name: outputs}, stderr) of `code` run in a child that reads `bucket`."""
    child = start(bucket, code, **env)
    child.stdin.close()
    found = outputs_of(child)
    return found, child.stderr_text()
