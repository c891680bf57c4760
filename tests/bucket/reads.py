"""Reads from the emulated bucket in a child process, with their outputs sent back.

TensorFlow reads its gs:// settings (proxy, CA bundle, token) from the environment of
the process, so each read runs in a child that has `Bucket.env()`. The child prints
one `OUTPUTS <name> <json>` line per read: every example as `tests.pairs.Output`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import forks
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

# Cached reads with persist=True, one after another, each once a line comes on stdin (at
# once where stdin is closed): a test that sends the lines one by one counts each read's
# requests alone. PLAN (`persisting`): [kind, data_dir, cache_dir, local_dir or null] each;
# KIND: tf-augment, tf-plain, loader, loader-augment. Each reports two epochs as KIND:gs0
# and KIND:gs1, after (with a local_dir) the same read of the local copy, persist=False, as
# KIND:local0 and KIND:local1; then `DONE KIND`.
PERSIST = """
import gc, os
import cats_vs_dogs_fast
import fast_tfds

def source(kind, data_dir, cache_dir, persist):
    common = dict(batch_size=8, shuffle=False, seed=3, download_and_prepare=False, cache=True,
                  persist=persist, cache_dir=cache_dir, data_dir=data_dir)
    if kind.endswith("augment"):
        common["augment"] = fast_tfds.Augment()
    if kind.startswith("tf"):
        import tensorflow as tf
        dtype = {"dtype": tf.uint8} if kind == "tf-augment" else {}
        return cats_vs_dogs_fast.as_fast_dataset("train", **common, **dtype)
    return cats_vs_dogs_fast.as_fast_loader("train", **common)

for kind, data_dir, cache_dir, local_dir in json.loads(os.environ["PLAN"]):
    sys.stdin.readline()
    if local_dir:
        local = source(kind, local_dir, cache_dir, False)
        for k in range(2):
            report(f"{kind}:local{k}", local)
        del local
    gs = source(kind, data_dir, cache_dir, True)
    for k in range(2):
        report(f"{kind}:gs{k}", gs)
    del gs
    gc.collect()  # its shard copies end with it, before the next read is counted
    print("DONE", kind, flush=True)
"""


def persisting(*plan: tuple[str, str, Path, Path | None]) -> dict[str, str]:
    """`PERSIST`'s environment for its reads: (kind, data_dir, cache_dir, local copy or
    None) each, in the order they run."""
    rows = [
        [kind, data_dir, os.fspath(cache), None if local is None else os.fspath(local)]
        for kind, data_dir, cache, local in plan
    ]
    return {"PLAN": json.dumps(rows)}


def _output(row) -> Output:
    digest, label, filename, boxes = row
    boxes = None if boxes is None else tuple(tuple(b) for b in boxes)
    return Output(digest, label, filename, boxes)


def start(bucket: Bucket, code: str, args=(), own_interpreter: bool = False, **env: str) -> Child:
    """A child running `PREAMBLE` + `code`, with `args` in its sys.argv: a fork of a server
    that has imported TensorFlow where the code allows (`tests.forks.child`), unless
    `own_interpreter`."""
    make = Child if own_interpreter else forks.child
    return make(
        [sys.executable, "-c", PREAMBLE + code, *args],
        cwd=REPO,
        env=child_env(bucket, **env),
        stdin=subprocess.PIPE,
    )


def ended(
    child: Child, timeout: float = TIMEOUT_S, read: str = ""
) -> tuple[dict[str, list[Output]], str]:
    """({name: outputs}, its `ERROR` line or "") of a child that has ended well; `read`:
    its output that the test has taken already (`Child.until`)."""
    found, error = {}, ""
    for line in (read + child.rest(timeout)).splitlines():
        if line.startswith("OUTPUTS "):
            _, name, rows = line.split(" ", 2)
            found[name] = [_output(row) for row in json.loads(rows)]
        elif line.startswith("ERROR "):
            error = line
    code = child.wait(60)
    assert code == 0, f"the child failed ({code}): {child.stderr_text()[-4000:]}"
    return found, error


def outputs_of(child: Child, timeout: float = TIMEOUT_S, read: str = "") -> dict[str, list[Output]]:
    """{name: outputs} of every read the child reported, once it has ended well."""
    found, error = ended(child, timeout, read)
    assert not error, error
    return found


def run(bucket: Bucket, code: str, **env: str) -> tuple[dict[str, list[Output]], str]:
    """({name: outputs}, stderr) of `code` run in a child that reads `bucket`."""
    child = start(bucket, code, **env)
    child.stdin.close()
    found = outputs_of(child)
    return found, child.stderr_text()
