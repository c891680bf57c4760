"""`ProgressiveResize`: the size of each epoch, and its one-line errors."""

import pytest

from fast_tfds import Augment, ProgressiveResize
from fast_tfds.augment.progressive import check_progressive, largest
from fast_tfds.loader.options import LoaderOptions


def test_the_size_ramps_linearly_in_steps_then_stays():
    schedule = ProgressiveResize(start=160, end=224, start_epoch=2, end_epoch=6, step=32)
    sides = [schedule.size(epoch)[0] for epoch in range(9)]
    # 160 until epoch 2; 176, 192, 208 on the ramp, rounded to multiples of 32: 192,
    # 192, 192 (ties go to the even multiple, as numpy's and FFCV's round); then 224.
    assert sides == [160, 160, 160, 192, 192, 192, 224, 224, 224]
    assert all(schedule.size(e)[0] == schedule.size(e)[1] for e in range(9))
    assert schedule.largest == (224, 224)


def test_sizes_off_the_step_stay_within_start_and_end():
    schedule = ProgressiveResize(start=100, end=130, start_epoch=0, end_epoch=3, step=32)
    sides = [schedule.size(e)[0] for e in range(5)]
    assert sides[0] == 100 and sides[-1] == 130
    assert all(100 <= side <= 130 for side in sides)


def test_a_shrinking_schedule_is_allowed_and_its_largest_is_the_start():
    schedule = ProgressiveResize(start=224, end=160, start_epoch=0, end_epoch=2)
    assert [schedule.size(e)[0] for e in range(3)] == [224, 192, 160]
    assert schedule.largest == (224, 224)


def test_largest_is_the_size_itself_without_a_schedule():
    assert largest(224) == 224 and largest((96, 128)) == (96, 128) and largest(None) is None
    assert largest(ProgressiveResize(start=128, end=192)) == (192, 192)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"start": 0}, r"^ProgressiveResize\(start=0\): must be a positive int"),
        ({"end": 22.5}, r"^ProgressiveResize\(end=22\.5\): must be a positive int"),
        ({"step": -32}, r"^ProgressiveResize\(step=-32\): must be a positive int"),
        ({"start_epoch": -1}, r"^ProgressiveResize\(start_epoch=-1\): must be an epoch"),
        ({"start_epoch": 5, "end_epoch": 5}, r"end_epoch must come after start_epoch"),
    ],
)
def test_a_bad_schedule_is_one_line(fields, message):
    with pytest.raises(ValueError, match=message) as err:
        ProgressiveResize(**fields)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("augment", [None, Augment(crop=None)])
def test_it_needs_an_augmentation_that_crops(augment):
    with pytest.raises(ValueError, match=r"needs augment= with a crop") as err:
        LoaderOptions(image_size=ProgressiveResize(), augment=augment)
    assert str(err.value).startswith("as_fast_loader(image_size=ProgressiveResize(")
    assert "\n" not in str(err.value)
    for crop in (Augment(), Augment.eval()):
        check_progressive(ProgressiveResize(), crop, caller="as_fast_loader")  # no error
