"""`Augment` validates every field with one line that names it."""

from __future__ import annotations

import pytest

import fast_tfds
from fast_tfds.augment import Augment, policies
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
        ({"rotate": -1}, "rotate=-1"),
        ({"rotate": 181}, "rotate=181"),
        ({"rotate": "15"}, "rotate='15'"),
        ({"erase": 1.5}, "erase=1.5"),
        ({"erase": True}, "erase=True"),
        ({"auto_augment": "autoaugment"}, "auto_augment='autoaugment'"),
        ({"auto_augment": 3}, "auto_augment=3"),
        ({"auto_augment": "rand-m9-x2"}, "auto_augment='rand-m9-x2'"),
        ({"num_ops": 2}, "num_ops=2"),
        ({"magnitude": 9}, "magnitude=9"),
        ({"auto_augment": "trivial_augment_wide", "num_ops": 2}, "num_ops=2"),
        ({"auto_augment": "trivial_augment_wide", "magnitude": 9}, "magnitude=9"),
        ({"auto_augment": "rand-m9-mstd0.5-inc1", "magnitude": 9}, "magnitude=9"),
        ({"auto_augment": "rand_augment", "magnitude": 31}, "magnitude=31"),
        ({"auto_augment": "rand_augment", "num_ops": -1}, "num_ops=-1"),
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


# repr(Augment()) and repr(Augment.eval()) as the version before rotate=, auto_augment=,
# num_ops=, magnitude= and erase= wrote them: a loader's saved state keys its recipe by
# the repr (`FastLoader.state_key`), so a state saved then must still resume.
BEFORE = {
    "train": "Augment(crop='random_resized', scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333), "
    "crop_fraction=0.875, flip=True, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0)",
    "eval": "Augment(crop='center', scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333), "
    "crop_fraction=0.875, flip=False, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0)",
}


def test_recipes_without_the_stronger_fields_keep_their_repr_and_equality():
    assert repr(Augment()) == BEFORE["train"] and repr(Augment.eval()) == BEFORE["eval"]
    assert Augment(rotate=0, erase=0.0, auto_augment=None) == Augment()
    assert hash(Augment(rotate=0)) == hash(Augment())
    assert not Augment().strong and not Augment.eval().strong


def test_the_stronger_fields_show_where_on_and_make_a_recipe_random():
    strong = Augment(rotate=15, auto_augment="rand_augment", num_ops=3, erase=0.25)
    assert repr(strong).endswith(
        "hue=0.0, rotate=15.0, auto_augment='rand_augment', num_ops=3, erase=0.25)"
    )
    assert strong != Augment() and strong.strong
    for one in (Augment(rotate=1), Augment(erase=0.1), Augment(auto_augment="rand-m7-n2")):
        assert one.strong and one.replace(crop="center", flip=False).random
    assert Augment.eval().replace(rotate=0).random is False


def test_the_policy_takes_its_options():
    assert Augment(auto_augment="rand_augment").policy() == policies.parse("rand_augment")
    tuned = Augment(auto_augment="rand_augment", num_ops=1, magnitude=15).policy()
    assert (tuned.num_ops, tuned.magnitude, tuned.num_magnitude_bins) == (1, 15, 31)
    timm = Augment(auto_augment="rand-m9-mstd0.5-inc1").policy()
    assert (timm.magnitude, timm.magnitude_std, timm.increasing) == (9.0, 0.5, True)
    assert Augment().policy() is None
