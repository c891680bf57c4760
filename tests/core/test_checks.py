"""The checks both back ends share: options, image sizes, splits (on a real build)."""

from __future__ import annotations

import pytest

from fast_tfds.core import options, sizes, splits


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (
            lambda: options.check_int("batch_size", 0, optional=True),
            "batch_size=0: must be a positive integer or None",
        ),
        (
            lambda: options.check_int("batch_size", True, optional=True),
            "batch_size=True: must be a positive",
        ),
        (
            lambda: options.check_int("batch_size", None),
            "batch_size=None: must be a positive integer",
        ),
        (lambda: options.check_int("n", -1, minimum=0), "n=-1: must be a non-negative integer"),
        (lambda: options.check_int("n", 1, minimum=2), "n=1: must be an integer >= 2"),
        (lambda: options.check_seed(1.5), "seed=1.5: must be an integer or None"),
        (
            lambda: options.check_seed(2**64),
            r"seed=18446744073709551616: must be an integer in \[-2\*\*63, 2\*\*64\) or None",
        ),
        (lambda: options.check_bool("shuffle", 1), "shuffle=1: must be True or False"),
        (lambda: sizes.check_image_size(0), "image_size=0: must be a positive int"),
        (lambda: sizes.check_image_size((224,)), r"image_size=\(224,\): must be"),
        (lambda: sizes.check_image_size((2, 2.0)), r"image_size=\(2, 2.0\): must be"),
    ],
)
def test_a_bad_value_is_a_one_line_error_that_starts_with_the_argument(check, message):
    with pytest.raises(ValueError, match="^" + message):
        check()


def test_good_values_pass():
    options.check_int("batch_size", None, optional=True)
    options.check_int("batch_size", 1)
    options.check_int("num_workers", 0, minimum=0)
    options.check_int("num_epochs", None, optional=True)
    options.check_seed(None)
    options.check_seed(2**32 - 1)
    options.check_seed(-5)  # Any 64 bits, of either sign, in both back ends.
    options.check_seed(-(2**63))
    options.check_seed(2**64 - 1)


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan", "inf"])
def test_a_bad_timeout_in_the_environment_is_one_line_naming_it(monkeypatch, value):
    """Every timeout a user sets is read one way (`env_seconds`): a bucket's, a download's."""
    from fast_tfds.building import downloads
    from fast_tfds.cache.remote import object_stores

    for module in (downloads, object_stores):
        monkeypatch.setenv(module.TIMEOUT_ENV, value)
        message = f"^{module.TIMEOUT_ENV}='{value}': must be a positive number of seconds$"
        with pytest.raises(ValueError, match=message):
            module.timeout_s()


def test_settings_in_the_environment(monkeypatch):
    monkeypatch.setenv("FAST_TFDS_X", "")
    assert options.env_seconds("FAST_TFDS_X", 30.0) == 30.0
    assert options.env_flag("FAST_TFDS_X", True) is True
    monkeypatch.setenv("FAST_TFDS_X", "2.5")
    assert options.env_seconds("FAST_TFDS_X", 30.0) == 2.5
    for value, flag in [("0", False), ("1", True)]:
        monkeypatch.setenv("FAST_TFDS_X", value)
        assert options.env_flag("FAST_TFDS_X", not flag) is flag
    monkeypatch.setenv("FAST_TFDS_X", "yes")
    with pytest.raises(ValueError, match=r"^FAST_TFDS_X='yes': 1 or 0 \(the default: 0\)$"):
        options.env_flag("FAST_TFDS_X", False)


def test_image_sizes():
    assert sizes.check_image_size(None) is None
    assert sizes.check_image_size(96) == sizes.as_hw(96) == (96, 96)
    assert sizes.check_image_size([64, 48]) == (64, 48)
    assert sizes.stored_size((224, 224, 3)) == (224, 224)
    assert sizes.stored_size((None, None, 3)) is None
    # The requested size wins; without one, the stored size; with neither, an error.
    assert sizes.output_size((224, 224), 160, dataset="d") == (160, 160)
    assert sizes.output_size((224, 224), None, dataset="d") == (224, 224)
    assert sizes.output_size(None, (64, 48), dataset="d") == (64, 48)
    with pytest.raises(ValueError, match="^image_size=None: d keeps each image's own size"):
        sizes.output_size(None, None, dataset="d")


def test_splits_and_slices_of_a_real_build(cats_builder):
    info = cats_builder.info
    total = info.splits["train"].num_examples
    assert splits.split_info(info, "train").num_examples == total
    assert 0 < splits.split_info(info, "train[:50%]").num_examples < total
    for split, problem in (
        ("validation", "not a split or slice of cats_vs_dogs_fast/224/1.0.0 (splits: train;"),
        ("train[:0%]", "selects no examples"),
        ("train[:abc]", "not a split or slice"),
    ):
        with pytest.raises(ValueError) as excinfo:
            splits.split_info(info, split)
        message = str(excinfo.value)
        assert message.startswith(f"split={split!r}: {problem}") and "\n" not in message
