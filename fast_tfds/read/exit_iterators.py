"""Every tf.data iterator still alive when the process ends is closed before Python's
finalization starts, so that a script which stops reading an endless dataset exits.

Why: the reader's pipelines call `tf.numpy_function`s on tf.data's own threads, and keep
calling them while prefetch buffers fill. Python's finalization ends any thread that asks
for the GIL after it has begun, and a tf.data thread ended inside a numpy function never
tells its iterator that it stopped: the iterator's destructor, which runs when the script's
globals are cleared during finalization, then waits for it for good (the process prints
its last line and hangs). The same happens to any TensorFlow pipeline with a numpy or py
function and a prefetch, ours or not.

An `atexit` function runs before finalization: destroying the iterators there (dropping
the resource an iterator owns, which is what its destructor would do moments later) lets
their threads finish their calls normally. An iterator is of no use once `atexit` runs.

Those last calls may complete a `persist=True` fill, whose file is then written out by a
thread of its own: `close_all` waits for it (`persisted.finish_writing` says why).
"""

from __future__ import annotations

import atexit
import functools
import gc

from fast_tfds.cache import persisted


@functools.cache
def close_at_exit() -> None:
    """Registers `close_all` to run at exit (once per process; should two threads make
    the first datasets at once, the second run of `close_all` finds nothing left)."""
    atexit.register(close_all)


def close_all() -> int:
    """Destroys the resource of every tf.data iterator alive in this process (eager
    iterators: `iter(dataset)`, as Keras makes them too), then waits for the persistent
    files their last calls completed to be written out; returns how many iterators."""
    from tensorflow.python.data.ops import iterator_ops, multi_device_iterator_ops

    owned = (iterator_ops.OwnedIterator, multi_device_iterator_ops.OwnedMultiDeviceIterator)
    # Asked once per type, not per object: these are ABCs, whose isinstance runs Python
    # code, and a process that imported TensorFlow holds hundreds of thousands of objects
    # (seconds at every exit, asked of each).
    is_iterator = functools.cache(lambda kind: issubclass(kind, owned))
    closed = 0
    for obj in gc.get_objects():
        if is_iterator(type(obj)):
            # The resource handle is the iterator's only reference to its C++ state:
            # dropping it runs the C++ destructor now, with the GIL released and
            # Python still able to run the numpy functions that threads are inside.
            for name in ("_iterator_resource", "_multi_device_iterator_resource"):
                if obj.__dict__.pop(name, None) is not None:
                    closed += 1
    # No iterator runs now, so no file is completed after these.
    persisted.finish_writing()
    return closed
