"""The pass clock: epochs counted in completed passes, never in iterators made."""

import pytest

from fast_tfds.core.passes import PassClock, Start, find_clock, set_epoch


def test_an_iterator_dropped_before_its_last_batch_moves_nothing():
    clock = PassClock(batches_per_epoch=5, endless=False)
    assert clock.start() == Start(0, 0)
    assert clock.start() == Start(0, 0)  # a peek, Keras' shape reads: no pass completed
    clock.completed(0)
    assert clock.start() == Start(1, 0)
    clock.completed(0)  # a late, older iterator finishing does not move it back
    assert clock.start() == Start(1, 0)


def test_set_epoch_and_position_place_the_next_iterator():
    clock = PassClock(batches_per_epoch=4, endless=True)
    clock.set_epoch(3, 2)
    assert clock.start() == Start(3, 2)
    assert clock.start() == Start(3, 2)  # until that epoch completes
    clock.completed(3)
    assert clock.start() == Start(4, 0)
    clock.set_position(9)
    assert clock.start() == Start(2, 1)


@pytest.mark.parametrize(
    ("epoch", "batch", "message"),
    [(-1, 0, "epoch=-1"), (1, 4, "batch=4: an epoch of this reader has 4"), (True, 0, "epoch")],
)
def test_bad_positions_are_one_line_errors(epoch, batch, message):
    with pytest.raises(ValueError, match=message):
        PassClock(batches_per_epoch=4, endless=False).set_epoch(epoch, batch)


def test_find_clock_follows_a_loader_view_and_names_what_is_not_a_reader():
    class Loader:
        pass_clock = PassClock(batches_per_epoch=2, endless=False)

    class TorchView:
        loader = Loader()

    set_epoch(TorchView(), 1)
    assert Loader.pass_clock.start() == Start(1, 0)
    with pytest.raises(ValueError, match="list: not a reader of fast_tfds"):
        find_clock([])
