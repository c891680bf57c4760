"""`Augment` validates every field with one line that names it."""

from __future__ import annotations

import pytest

import fast_tfds
from fast_tfds.augment import Augment
from fast_tfds.augment.spec import check_augment


def test_the_defaults_are_the_imagenet_training_recipe():
    augment = Augment()
    assert augment == Augment.train() and fast_tfds.Augment is Augment
    assert (augment.crop, augment.scale, augment.ratio, augment.flip) == (
        "random_resized",
        (0.08, 1.0),
        (3 / 4, 4 / 3),
        True,
    )
    assert not augment.jitter and augment.random
    evaluation = Augment.eval()
    assert (evaluation.crop, evaluation.crop_fraction, evaluation.flip) == ("center", 0.875, False)
    assert not evaluation.random
    assert Augment(brightness=0.4, hue=0.1).jitter


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"crop": "random"}, "crop='random'"),
        ({"crop": True}, "crop=True"),
        ({"scale": (0.5, 0.1)}, "scale="),
        ({"scale": (0.0, 1.0)}, "scale="),
        ({"scale": (0.1, 1.5)}, "scale="),
        ({"scale": 0.5}, "scale="),
        ({"scale": ("a", 1)}, "scale="),
        ({"ratio": (4 / 3, 3 / 4)}, "ratio="),
        ({"ratio": (0, 1)}, "ratio="),
        ({"crop_fraction": 0}, "crop_fraction=0"),
        ({"crop_fraction": 1.2}, "crop_fraction=1.2"),
        ({"crop_fraction": float("nan")}, "crop_fraction=nan"),
        ({"flip": 1}, "flip=1"),
        ({"brightness": -0.1}, "brightness=-0.1"),
        ({"contrast": "0.2"}, "contrast='0.2'"),
        ({"saturation": True}, "saturation=True"),
        ({"hue": 0.6}, "hue=0.6"),
        ({"hue": -0.1}, "hue=-0.1"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_field(fields, named):
    with pytest.raises(ValueError) as err:
        Augment(**fields)
    message = str(err.value)
    assert message.startswith(named) and "\n" not in message and "must be" in message


def test_the_option_takes_an_augment_or_none():
    check_augment(None)
    check_augment(Augment())
    with pytest.raises(
        ValueError, match=r"^augment='random_resized': must be a fast_tfds\.Augment"
    ):
        check_augment("random_resized")


def test_it_is_frozen_and_replaceable():
    augment = Augment()
    with pytest.raises(AttributeError):
        augment.flip = False
    assert augment.replace(flip=False).flip is False
    assert Augment(scale=[0.2, 1]).scale == (0.2, 1.0)  # lists become tuples, hashable
    hash(Augment(scale=[0.2, 1]))
