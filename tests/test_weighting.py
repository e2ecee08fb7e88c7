"""MacAvaney et al. (2020) eq. 3 curriculum weights on hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from curricula.curriculum.weighting import curriculum_weight, ease_from_difficulty, iteration_of


def test_eq3_hand_values():
    # D = 0.2, m = 10: W = 0.2 + (i / 10) * 0.8
    assert float(curriculum_weight(0.2, 0, 10)) == pytest.approx(0.2)
    assert float(curriculum_weight(0.2, 5, 10)) == pytest.approx(0.6)
    assert float(curriculum_weight(0.2, 9, 10)) == pytest.approx(0.92)
    assert float(curriculum_weight(0.2, 10, 10)) == 1.0
    assert float(curriculum_weight(0.2, 37, 10)) == 1.0


def test_m_inf_keeps_ease():
    for m in (math.inf, "inf"):
        assert float(curriculum_weight(0.2, 0, m)) == pytest.approx(0.2)
        assert float(curriculum_weight(0.2, 10**6, m)) == pytest.approx(0.2)


def test_anti_curriculum_uses_one_minus_ease():
    # D^ = 1 - 0.2 = 0.8: W = 0.8 + 0.5 * 0.2 = 0.9 at i = 5, m = 10
    assert float(curriculum_weight(0.2, 5, 10, anti=True)) == pytest.approx(0.9)
    assert float(curriculum_weight(0.2, 0, 10, anti=True)) == pytest.approx(0.8)
    assert float(curriculum_weight(0.2, 10, 10, anti=True)) == 1.0
    assert float(curriculum_weight(0.2, 3, "inf", anti=True)) == pytest.approx(0.8)


def test_elementwise_and_broadcast():
    got = curriculum_weight(np.array([0.0, 0.5, 1.0]), 5, 10)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, [0.5, 0.75, 1.0])
    np.testing.assert_allclose(curriculum_weight(0.2, np.array([0, 5, 10, 11]), 10), [0.2, 0.6, 1.0, 1.0])
    np.testing.assert_allclose(curriculum_weight([0.0, 1.0], 2, 4, anti=True), [1.0, 0.5])
    assert curriculum_weight(np.zeros((2, 3)), 1, 10).shape == (2, 3)


def test_invalid_inputs():
    for ease in (1.2, -0.1, float("nan"), [0.5, 2.0]):
        with pytest.raises(ValueError, match="ease"):
            curriculum_weight(ease, 0, 10)
    for m in (0, -1, float("nan"), "infinite", "10", None, True):
        with pytest.raises(ValueError, match="m must be"):
            curriculum_weight(0.5, 0, m)
    with pytest.raises(ValueError, match="iteration"):
        curriculum_weight(0.5, -1, 10)


def test_ease_from_difficulty():
    np.testing.assert_allclose(ease_from_difficulty([0.0, 0.25, 1.0]), [1.0, 0.75, 0.0])
    # hardest sample (difficulty 1) gets the lowest weight at the start, equal weights after m
    np.testing.assert_allclose(curriculum_weight(ease_from_difficulty([1.0, 0.0]), 0, 10), [0.0, 1.0])
    with pytest.raises(ValueError, match="difficulty"):
        ease_from_difficulty(1.5)


def test_iteration_of():
    assert iteration_of(0) == 0
    assert np.asarray(iteration_of([0, 31, 32, 63, 64, 100])).tolist() == [0, 0, 1, 1, 2, 3]
    assert np.asarray(iteration_of(np.array([9, 10, 25]), iteration_steps=10)).tolist() == [0, 1, 2]
    assert iteration_of(np.array([64.0])).dtype == np.int64
    for bad in (-1, 1.5, [3, -2]):
        with pytest.raises(ValueError, match="steps"):
            iteration_of(bad)
    with pytest.raises(ValueError, match="iteration_steps"):
        iteration_of(5, iteration_steps=0)


def test_early_stopping_waits_for_every_curriculum_axis():
    """MacAvaney's weights reach 1 after m iterations (eq. 3): patience counts only after max(steps, m * 32)."""
    from curricula.curriculum.weighting import weighting_steps
    from curricula.experiments.spec import CurriculumSpec, freeze, resolve_arm

    def curriculum_length(axes: dict) -> int:
        return resolve_arm(CurriculumSpec(weighting=freeze(axes["weighting"])), axes["steps"]).end

    assert weighting_steps(20, 32) == 640 and weighting_steps(0.5, 32) == 16 and weighting_steps("inf", 32) == math.inf
    recip = {"scoring": "recip", "iteration_steps": 32}
    assert curriculum_length({"steps": 400, "weighting": {**recip, "m": 20}}) == 640
    assert curriculum_length({"steps": 400, "weighting": {**recip, "m": 5}}) == 400
    assert curriculum_length({"steps": 400, "weighting": {**recip, "m": "inf"}}) == 400  # W = D for ever
    assert curriculum_length({"steps": 400, "weighting": None}) == 400
