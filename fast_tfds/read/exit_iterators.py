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

Those last calls may complete a `persist=True` fill, whose file is then written by a thread
of its own (`fast_tfds.cache.persistent.FileFill.filled`), not a daemon so that the
interpreter joins it at exit; but the interpreter joins its threads before the `atexit`
functions run, so a thread started since (here, or by a tf.data thread meanwhile) is
joined here. Left to finalization, it was ended where it next took the GIL: mid-write (no
file persisted), or, inside the checksum's `cv2.sumElems`, from a C++ destructor, and
the process died of SIGABRT (`terminate called without an active exception`).
"""

from __future__ import annotations

import atexit
import functools
import gc


@functools.cache
def close_at_exit() -> None:
    """Registers `close_all` to run at exit (once per process; should two threads make
    the first datasets at once, the second run of `close_all` finds nothing left)."""
    atexit.register(close_all)


def close_all() -> int:
    """Destroys the resource of every tf.data iterator alive in this process (eager
    iterators: `iter(dataset)`, as Keras makes them too), then joins the non-daemon
    threads started since the interpreter joined them; returns how many iterators."""
    from tensorflow.python.data.ops import iterator_ops, multi_device_iterator_ops

    owned = (iterator_ops.OwnedIterator, multi_device_iterator_ops.OwnedMultiDeviceIterator)
    closed = 0
    for obj in gc.get_objects():
        if isinstance(obj, owned):
            # The resource handle is the iterator's only reference to its C++ state:
            # dropping it runs the C++ destructor now, with the GIL released and
            # Python still able to run the numpy functions that threads are inside.
            for name in ("_iterator_resource", "_multi_device_iterator_resource"):
                if obj.__dict__.pop(name, None) is not None:
                    closed += 1
    # No iterator runs now, so no thread is started after these.
    current = threading.current_thread()
    for thread in threading.enumerate():
        if not thread.daemon and thread is not current:
            thread.join()
    return closed
