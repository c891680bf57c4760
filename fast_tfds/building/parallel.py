"""Ordered, bounded parallel map for build-time work.

Pillow releases the GIL while it decodes, resizes and encodes, so threads give
a near-linear speed-up for image normalization without pickling anything.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Items in flight per worker: enough to keep every thread busy, few enough that
# an 800 MB archive is never held in memory at once.
WINDOW_PER_WORKER = 4


def default_window() -> int:
    """How many items `ordered_thread_map` has in flight by default (read ahead of the output)."""
    return WINDOW_PER_WORKER * (os.cpu_count() or 1)


def ordered_thread_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int | None = None,
) -> Iterator[R]:
    """Yields fn(item) for each item, in input order, computing ahead in threads.

    At most a window of WINDOW_PER_WORKER items per worker is in flight (with the
    default workers, `default_window()`), so an 800 MB archive is never held in
    memory at once, and a consumer that stops after n results has made the input
    yield at most n - 1 + window items. Where fn raises (or the consumer stops), the
    items not started yet are not computed.
    """
    workers = workers or os.cpu_count() or 1
    window = WINDOW_PER_WORKER * workers
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= window:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            # An item that failed, or a consumer that stopped, ends the map: the items
            # not started yet never start (the pool waits only for those running).
            for future in pending:
                future.cancel()
