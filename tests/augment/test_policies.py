"""The policies' draws: torchvision's and timm's op sets, tables and magnitude meanings;
over many examples each op about equally often and magnitudes spread over their range;
draws repeat for a seed and differ for another; one-line errors naming the field."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fast_tfds.augment import draws, policies, windows
from fast_tfds.augment.policies import timm, torchvision

N = 14_000
INDICES = np.arange(N)


def _chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum())


def test_trivial_augment_chooses_each_op_about_equally_often():
    drawn = policies.parse("trivial_augment_wide").draw(7, 0, INDICES, (224, 224))
    counts = np.bincount(drawn.ops[:, 0], minlength=len(torchvision.OPS))
    # 13 degrees of freedom: a fair draw passes 60 with p < 1e-7 (the seed is fixed, so
    # it never flakes); one op drawn 1.5x as often as the others would score about 270.
    assert _chi_square(counts) < 60
    assert counts.min() > 0.8 * N / 14


def test_trivial_augment_magnitudes_spread_over_the_31_bins():
    drawn = policies.parse("trivial_augment_wide").draw(7, 0, INDICES, (224, 224))
    rotate = drawn.ops[:, 0] == torchvision.OPS.index("rotate")
    angles = drawn.magnitude[rotate, 0]
    assert np.abs(angles).max() <= 135
    levels = np.round(np.abs(angles) / (135 / 30)).astype(int)
    counts = np.bincount(levels, minlength=31)
    assert len(counts) == 31 and counts.min() > 0  # every bin of the table reached
    assert (angles < 0).mean() == pytest.approx(0.5, abs=0.06)  # signed half the time
    assert np.allclose(np.abs(angles), levels * 4.5)


def test_torchvision_tables():
    wide = torchvision.tables(31, (224, 224), wide=True)
    narrow = torchvision.tables(31, (224, 200), wide=False)
    row = {name: i for i, name in enumerate(torchvision.OPS)}
    assert wide[row["posterize"]].tolist() == [8 - round(i / 5) for i in range(31)]
    assert narrow[row["posterize"]][[0, 9, 30]].tolist() == [8, 7, 4]
    assert wide[row["rotate"], 30] == 135 and narrow[row["rotate"], 9] == pytest.approx(9)
    assert narrow[row["translate_x"], 30] == pytest.approx(150 / 331 * 200)  # the width
    assert narrow[row["translate_y"], 30] == pytest.approx(150 / 331 * 224)
    assert wide[row["translate_x"], 30] == 32 and wide[row["solarize"], 0] == 255


def test_rand_augment_uses_its_fixed_bin_and_maps_magnitudes_to_arguments():
    drawn = policies.parse("rand_augment").draw(1, 2, np.arange(2000), (224, 224))
    assert drawn.ops.shape == (2000, 2)
    names = np.array(torchvision.OPS)[drawn.ops]
    rotate = names == "rotate"
    assert set(np.abs(drawn.magnitude[rotate]).round(6)) == {9.0}
    brightness = names == "brightness"
    assert set(drawn.arguments[brightness].round(6)) == {0.73, 1.27}  # 1 -+ 0.27
    translate = names == "translate_x"
    assert set(np.abs(drawn.arguments[translate])) == {float(int(150 / 331 * 224 * 9 / 30))}
    assert set(drawn.arguments[names == "posterize"]) == {7.0}


def test_timm_config_strings():
    policy = policies.parse("rand-m9-mstd0.5-inc1")
    assert (policy.magnitude, policy.num_ops, policy.magnitude_std) == (9, 2, 0.5)
    assert policy.increasing and policy.prob == 0.5 and policy.fill == (124, 116, 104)
    other = policies.parse("rand-m7-n3-mmax12-p1.0-mstd101")
    assert (other.magnitude, other.num_ops, other.magnitude_max, other.prob) == (7, 3, 12, 1.0)
    assert other.magnitude_std == math.inf and not other.increasing
    assert policies.parse("rand-inc0").increasing  # timm's bool("0") is True


def test_timm_magnitudes_are_gaussian_around_m_and_clipped():
    drawn = policies.parse("rand-m9-mstd0.5-inc1").draw(3, 0, INDICES, (224, 224))
    levels = drawn.magnitude.reshape(-1)
    assert levels.max() <= 10 and levels.min() >= 0
    assert levels.mean() == pytest.approx(9, abs=0.05)
    assert levels[levels < 10].std() == pytest.approx(0.5, abs=0.1)
    assert drawn.applied.mean() == pytest.approx(0.5, abs=0.02)  # p = 0.5 per op
    counts = np.bincount(drawn.ops.reshape(-1), minlength=len(timm.OPS))
    assert _chi_square(counts) < 60 and len(counts) == 15


def test_timm_arguments_follow_its_level_functions():
    policy = timm.RandAugment(magnitude=5, increasing=True, prob=1.0)
    drawn = policy.draw(0, 0, np.arange(3000), (224, 200))
    names = np.array(timm.OPS)[drawn.ops]
    args = drawn.arguments
    assert set(np.abs(args[names == "rotate"])) == {15.0}
    assert set(args[names == "posterize"]) == {2.0}  # 4 - int(0.5 * 4)
    assert set(args[names == "solarize"]) == {128.0}  # 256 - int(0.5 * 256)
    assert set(args[names == "solarize_add"]) == {55.0}
    assert set(args[names == "color"].round(6)) == {0.55, 1.45}
    assert set(np.abs(args[names == "translate_x"]).round(6)) == {round(0.225 * 200, 6)}
    plain = timm.RandAugment(magnitude=5, prob=1.0).draw(0, 0, np.arange(3000), (224, 200))
    plain_names = np.array(timm.OPS)[plain.ops]
    assert set(plain.arguments[plain_names == "contrast"].round(6)) == {1.0}  # 0.5 * 1.8 + 0.1
    assert set(plain.arguments[plain_names == "posterize"]) == {2.0}


@pytest.mark.parametrize("name", ["trivial_augment_wide", "rand_augment", "rand-m9-mstd0.5-inc1"])
def test_draws_repeat_for_a_seed_and_differ_for_another(name):
    policy = policies.parse(name)
    a = policy.draw(5, 1, np.arange(64), (224, 224))
    assert a.recipes() == policy.draw(5, 1, np.arange(64), (224, 224)).recipes()
    assert a.recipes() != policy.draw(6, 1, np.arange(64), (224, 224)).recipes()
    assert a.recipes() != policy.draw(5, 2, np.arange(64), (224, 224)).recipes()
    # Per example, whatever batch it comes in: the draws of example 40 alone.
    assert a.recipes()[40] == policy.draw(5, 1, [40], (224, 224)).recipes()[0]


def test_policy_draws_leave_the_windows_alone():
    before = draws.uniforms(0, 0, np.arange(8), windows.DRAWS)
    policies.parse("rand_augment").draw(0, 0, np.arange(8), (224, 224))
    assert np.array_equal(before, draws.uniforms(0, 0, np.arange(8), windows.DRAWS))


@pytest.mark.parametrize(
    "name, options, field",
    [
        ("trivial_augment_wide", {"num_ops": 2}, "num_ops=2"),
        ("trivial_augment_wide", {"magnitude": 9}, "magnitude=9"),
        ("rand_augment", {"magnitude": 31}, "magnitude=31"),
        ("rand_augment", {"num_ops": -1}, "num_ops=-1"),
        ("rand_augment", {"num_magnitude_bins": 1}, "num_magnitude_bins=1"),
        ("rand-m9", {"num_ops": 2}, "num_ops"),
        ("rand-m9-x3", {}, "unknown section 'x3'"),
        ("rand-p2", {}, "prob=2.0"),
        ("randaugment", {}, "auto_augment='randaugment'"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_field(name, options, field):
    with pytest.raises(ValueError, match=field) as error:
        policies.parse(name, **options)
    assert "\n" not in str(error.value)
