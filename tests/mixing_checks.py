"""The checks that tests/read/test_mix.py (tf.data) and tests/loader/test_mix.py (the
loader) both make of batches read with `mix=`: one check, two back ends."""

from __future__ import annotations

import numpy as np

from fast_tfds.augment import mixing


def assert_mixed_by_seed_epoch_and_batch_index(
    plain, mixed, mix, *, seed: int, classes: int, batches: int, last: int
) -> None:
    """`mixed` ([[(images, targets), ...] of each epoch], numpy) is exactly `mixing.mix` of
    `plain` (the same read without `mix=`) drawn from (seed, epoch, batch index): pixels,
    float32 one-hot targets that sum to 1, lambda < 1 when `mix` mixes; `batches` a epoch,
    the last of `last` pictures, whose middle one (odd: its own partner) stays; and both
    MixUp and CutMix batches among those checked."""
    kinds = set()
    for epoch, (plain_batches, mixed_batches) in enumerate(zip(plain, mixed, strict=True)):
        assert len(mixed_batches) == batches and len(mixed_batches[-1][0]) == last
        for index, ((images, labels), (got, targets)) in enumerate(
            zip(plain_batches, mixed_batches, strict=True)
        ):
            want, want_targets, lam = mixing.mix(
                images.copy(), labels, classes, mix, seed=seed, epoch=epoch, batch=index
            )
            kinds.add(mix.draw(seed, epoch, index, *images.shape[1:3])[1] is not None)
            np.testing.assert_array_equal(got, want)
            assert targets.dtype == np.float32 and targets.shape == (len(images), classes)
            np.testing.assert_allclose(targets, want_targets, atol=1e-6)
            np.testing.assert_allclose(targets.sum(1), 1, atol=1e-6)
            assert lam < 1 or not mix.mixes
        if last % 2:
            middle = plain_batches[-1][0][last // 2]  # the odd batch's middle picture stays
            np.testing.assert_array_equal(mixed_batches[-1][0][last // 2], middle)
    assert kinds == {False, True}  # both MixUp and CutMix batches were checked


def assert_same_seed_repeats_and_another_differs(first, again, other) -> None:
    """Three epochs' [(images, targets), ...]: `again` of the same seed as `first` is the
    same batch for batch; `other` (another seed) mixes no batch alike."""
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert sum(np.array_equal(a[0], c[0]) for a, c in zip(first, other, strict=True)) == 0
