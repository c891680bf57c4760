"""The loader with `mix=`: each batch is exactly `mixing.mix` of the unmixed batch (same
seed: the same order and crops) drawn from (seed, epoch, batch index), with and without
`augment=` and the cache; `set_state` resumes with the same mixes; the state's key is
unchanged without mix (a state saved before it existed still resumes); one-line errors.
What a mix does to pixels and labels is tests/augment/test_mixing.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest

import cats_vs_dogs_fast
from fast_tfds import Augment, Mix
from tests import mixing_checks

BATCH = 15  # 56 examples: 3 batches of 15 and a last, odd one of 11
CLASSES = 2
SEED = 5
TIMM = Mix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1)


def loader(data_dir, **options):
    options = {"batch_size": BATCH, "seed": SEED, "num_threads": 2, **options}
    return cats_vs_dogs_fast.as_fast_loader(
        "train", data_dir=data_dir, download_and_prepare=False, **options
    )


def epochs(batches, count=2):
    return [[tuple(np.array(t) for t in batch) for batch in batches] for _ in range(count)]


@pytest.mark.parametrize(
    "options", [{}, {"augment": Augment()}, {"augment": Augment(), "cache": True}]
)
def test_each_batch_is_mixed_by_seed_epoch_and_batch_index(cats_array_record_dir, options):
    plain = epochs(loader(cats_array_record_dir, **options))
    mixed = epochs(loader(cats_array_record_dir, mix=TIMM, **options))
    mixing_checks.assert_mixed_by_seed_epoch_and_batch_index(
        plain, mixed, TIMM, seed=SEED, classes=CLASSES, batches=4, last=11
    )


def test_the_same_seed_repeats_and_another_differs(cats_array_record_dir):
    m = Mix(mixup_alpha=1.0)
    first = epochs(loader(cats_array_record_dir, mix=m), 1)[0]
    again = epochs(loader(cats_array_record_dir, mix=m), 1)[0]
    other = epochs(loader(cats_array_record_dir, mix=m, seed=SEED + 1), 1)[0]
    mixing_checks.assert_same_seed_repeats_and_another_differs(first, again, other)


@pytest.mark.parametrize("cache", [False, True])
def test_a_resumed_iterator_continues_with_the_same_mixes(cats_array_record_dir, cache):
    options = {"augment": Augment(), "cache": cache, "mix": TIMM, "num_epochs": 2}
    whole = [
        tuple(np.array(t) for t in batch) for batch in loader(cats_array_record_dir, **options)
    ]
    stopped = iter(loader(cats_array_record_dir, **options))
    for _ in range(5):  # epoch 0 and one batch of epoch 1
        next(stopped)
    state = json.loads(json.dumps(stopped.get_state()))
    assert state["mix"] == repr(TIMM)
    restored = iter(loader(cats_array_record_dir, **options))
    restored.set_state(state)
    rest = [tuple(np.array(t) for t in batch) for batch in restored]
    assert len(rest) == 3
    for got, want in zip(rest, whole[5:], strict=True):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_the_state_key_is_unchanged_without_mix(cats_array_record_dir):
    state = iter(loader(cats_array_record_dir)).get_state()
    assert "mix" not in state  # a state saved before mix= existed has the same key
    iter(loader(cats_array_record_dir)).set_state(state)
    with pytest.raises(ValueError, match="mix: None vs"):
        iter(loader(cats_array_record_dir, mix=TIMM)).set_state(state)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mix": {"mixup_alpha": 1}}, r"^mix=\{'mixup_alpha': 1\}: must be a fast_tfds\.Mix"),
        ({"mix": TIMM, "shuffle": False}, r"^mix=: mixes training batches, and shuffle=False"),
        ({"mix": TIMM, "augment": Augment.eval()}, r"^mix=: .*the evaluation recipe"),
    ],
)
def test_bad_options_are_one_line(cats_array_record_dir, options, message):
    with pytest.raises(ValueError, match=message) as err:
        loader(cats_array_record_dir, **options)
    assert "\n" not in str(err.value)
