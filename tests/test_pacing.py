"""Pacing functions against the papers' definitions and hand-computed values (Penha & Hauff 2020, Su et al. 2021)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from curricula.curriculum.pacing import (
    PACINGS,
    geom_progression,
    hcl_corpus_pace,
    hcl_instance_pace,
    hcl_k0,
    linear,
    pace_mode,
    register_pacing,
    resolve_instance_pacing,
    resolve_pacing,
    resolve_steps,
    root,
    standard,
    step_pace,
    unregister_pacing,
)


def pace_fraction(spec, step, total_steps):
    return resolve_pacing(spec, total_steps).value(step)


def instance_pace_k(spec, step, total_steps, n_responses):
    return resolve_instance_pacing(spec, total_steps).k(step, n_responses)


DELTA, T = 0.33, 1000

# (name, function of step, expected value at step 0); every one must reach 1 at T = 1000
CASES = [
    ("standard", partial(standard, delta=DELTA, T=T), 1.0),
    ("step", partial(step_pace, delta=DELTA, T=T), DELTA),
    ("step_5_groups", partial(step_pace, delta=DELTA, T=T, groups=5), DELTA),
    ("linear", partial(linear, delta=DELTA, T=T), DELTA),
    ("root_2", partial(root, delta=DELTA, T=T, n=2), DELTA),
    ("root_5", partial(root, delta=DELTA, T=T, n=5), DELTA),
    ("root_10", partial(root, delta=DELTA, T=T, n=10), DELTA),
    ("geom_progression", partial(geom_progression, delta=DELTA, T=T), DELTA),
    ("hcl_corpus", partial(hcl_corpus_pace, r0=0.4, T0=200, T=T), 0.4),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize(("name", "f", "start"), CASES, ids=IDS)
def test_pacing_properties(name, f, start):
    steps = np.arange(0, T + 101)
    values = f(steps)
    assert values.shape == steps.shape and values.dtype == np.float64
    assert values[0] == pytest.approx(start)
    assert np.all(np.diff(values) >= 0), "must be non-decreasing"
    assert np.all(values > 0) and np.all(values <= 1)
    assert np.all(values[T:] == 1.0), "1 from T on"
    assert not np.all(values[:T] == 1.0) or name == "standard"


def test_scalar_in_zero_d_array_out_and_shape_kept():
    out = linear(500, DELTA, T)
    assert isinstance(out, np.ndarray) and out.shape == ()
    assert float(out) == pytest.approx(0.665)
    grid = linear(np.array([[0, 500], [1000, 2000]]), DELTA, T)
    assert grid.shape == (2, 2)
    np.testing.assert_allclose(grid, [[0.33, 0.665], [1.0, 1.0]])


def test_hand_values():
    # linear: 0.33 + 0.67 * 0.5; root_2: sqrt(0.5 * (1 - 0.33^2) + 0.33^2); geom: 0.33 * (1/0.33)^0.5 = sqrt(0.33)
    assert float(linear(500, DELTA, T)) == pytest.approx(0.665)
    assert float(linear(250, DELTA, T)) == pytest.approx(0.4975)
    assert float(root(500, DELTA, T, 2)) == pytest.approx(0.7446139939592863)
    assert float(root(500, DELTA, T, 5)) == pytest.approx(0.8712308859087781)
    assert float(geom_progression(500, DELTA, T)) == pytest.approx(0.5744562646538028)
    assert float(standard(123, DELTA, T)) == 1.0


def test_step_groups_and_table3_middle_value():
    # T = 900, 3 groups: boundaries at 300 and 600 (strictly greater starts the next group)
    got = step_pace([0, 300, 301, 600, 601, 900], DELTA, 900)
    np.testing.assert_allclose(got, [0.33, 0.33, 0.665, 0.665, 1.0, 1.0])
    # 5 groups, T = 1000: boundaries 200, 400, 600, 800; levels 0.33 + 0.67 * g / 4
    got = step_pace([200, 201, 401, 601, 801], DELTA, 1000, groups=5)
    np.testing.assert_allclose(got, [0.33, 0.4975, 0.665, 0.8325, 1.0])
    with pytest.raises(ValueError, match="groups"):
        step_pace(0, DELTA, 900, groups=1)


def test_penha_fig2_root10_early_geom_late():
    steps = np.arange(0, T + 1)
    r10 = root(steps, DELTA, T, 10)
    assert r10[125] >= 0.8
    assert int(np.argmax(r10 >= 0.8)) == 108  # (0.8^10 - 0.33^10) / (1 - 0.33^10) * 1000 = 107.36
    first_geom = int(np.argmax(geom_progression(steps, DELTA, T) >= 0.8))
    assert abs(first_geom - 800) <= 5  # ln(0.8/0.33) / ln(1/0.33) * 1000 = 798.7 -> 799
    assert first_geom == 799


def test_far_past_T_and_invalid_inputs():
    assert float(geom_progression(10**9, DELTA, 10)) == 1.0
    assert float(root(10**9, DELTA, 10, 10)) == 1.0
    with pytest.raises(ValueError, match="delta"):
        linear(0, 0.0, T)
    with pytest.raises(ValueError, match="delta"):
        root(0, 1.5, T, 2)
    with pytest.raises(ValueError, match="T must be"):
        geom_progression(0, DELTA, 0)
    with pytest.raises(ValueError, match="steps"):
        linear(-1, DELTA, T)
    with pytest.raises(ValueError, match="T0"):
        hcl_corpus_pace(0, 0.4, 2000, 2000)


def test_hcl_corpus_pace_paper_defaults():
    # Su §5.3: r0 = 0.4, T0 = 2000, T = 20000; at 11000: 0.6 / 18000 * 9000 + 0.4 = 0.7
    got = hcl_corpus_pace([0, 2000, 11000, 20000, 40000], 0.4, 2000, 20000)
    np.testing.assert_allclose(got, [0.4, 0.4, 0.7, 1.0, 1.0])


def test_hcl_instance_pace_fig2b():
    # Su Fig. 2b: k0 = 6, kT = 3, T = 8000
    steps = np.arange(0, 10001)
    h = hcl_instance_pace(steps, 6, 3, 8000)
    assert h[0] == pytest.approx(6.0)
    assert h[4000] == pytest.approx(4.5)
    assert h[2000] == pytest.approx(5.25)
    assert np.all(h[8000:] == pytest.approx(3.0))
    assert np.all(np.diff(h) <= 0)
    with pytest.raises(ValueError, match="k0 >= kT"):
        hcl_instance_pace(0, 2, 3, 8000)


def test_hcl_k0():
    assert hcl_k0(10**6) == pytest.approx(6.0)
    assert hcl_k0(1) == 0.0
    with pytest.raises(ValueError):
        hcl_k0(0)


def test_instance_pace_k():
    steps = [0, 4000, 8000, 9000]
    got = instance_pace_k({"kT": 3, "T": 8000}, steps, 40000, 10**6)
    assert got.dtype == np.int64
    assert got.tolist() == [1_000_000, 31623, 1000, 1000]  # 10^6, 10^4.5 = 31622.78, 10^3
    # explicit k0 below log10 |D|
    assert instance_pace_k({"k0": 5, "kT": 3, "T": 0.5}, [0, 20000], 40000, 10**6).tolist() == [100_000, 1000]
    # defaults: kT = 3, T = 0.9 of total_steps
    assert instance_pace_k({}, [0, 900, 5000], 1000, 10**6).tolist() == [1_000_000, 1000, 1000]
    # fewer responses than 10^kT: the whole pool throughout
    assert instance_pace_k({"kT": 3}, [0, 500, 1000], 1000, 500).tolist() == [500, 500, 500]
    with pytest.raises(ValueError, match="unknown key.*'k1'"):
        instance_pace_k({"k1": 3}, 0, 1000, 100)


def test_registry_names():
    # the papers' functions (a function registered later adds to them), each entry callable as its function
    assert set(PACINGS) >= {"standard", "step", "linear", "root_n", "geom_progression", "hcl",
                            "root_2", "root_5", "root_10"}
    assert float(PACINGS["root_10"](125, delta=DELTA, T=T)) == pytest.approx(0.8122611041370461)
    assert PACINGS["hcl"].mode == "threshold" and PACINGS["root_n"].knobs == {"delta": 0.33, "T": 0.9, "n": 2}
    assert all(entry.name == name and entry.citation for name, entry in PACINGS.items())


def test_a_registered_pacing_is_resolved_with_its_knobs_and_mode_and_removed_again():
    def toy(step, delta, T, k=1.0):
        return np.minimum(1.0, delta + (1.0 - delta) * np.minimum(np.asarray(step, dtype=np.float64), T) / T) ** k

    entry = register_pacing("toy", toy, knobs={"delta": 0.5, "T": 0.5, "k": 1.0}, mode="threshold", citation="toy")
    try:
        assert list(PACINGS)[-1] == "toy" and float(entry(5, delta=0.5, T=5)) == 1.0  # the entry calls toy
        pacing = resolve_pacing({"name": "toy", "k": 2}, 10)
        assert (pacing.mode, pacing.params) == ("threshold", (("T", 5), ("delta", 0.5), ("k", 2)))
        assert float(pacing.value(0)) == 0.25 and float(pacing.value(5)) == 1.0
        assert pace_mode({"name": "toy", "select": "fraction"}) == "fraction"
        with pytest.raises(ValueError, match="already registered"):
            register_pacing("toy", toy, knobs={})
    finally:
        unregister_pacing("toy")
    assert "toy" not in PACINGS
    with pytest.raises(ValueError, match="unknown pacing function 'toy'"):
        resolve_pacing({"name": "toy"}, 10)
    with pytest.raises(ValueError, match="mode must be one of"):
        register_pacing("toy", toy, knobs={}, mode="share")
    with pytest.raises(ValueError, match=r"\['select'\] are keys of the pacing spec"):
        register_pacing("toy", toy, knobs={"select": 1})
    with pytest.raises(ValueError, match="does not take the knobs"):
        register_pacing("toy", toy, knobs={"delta": 0.5, "T": 0.5, "n": 2})
    assert "toy" not in PACINGS


def test_resolve_steps():
    assert resolve_steps(0.9, 1000) == 900
    assert resolve_steps(0.1, 40000) == 4000
    assert resolve_steps(2000, 40000) == 2000
    assert resolve_steps(20000.0, 40000) == 20000
    assert resolve_steps(1, 50) == 50  # 1 is "all of it", not one step
    assert resolve_steps(1.0, 50) == 50
    assert resolve_steps(0.25, 10) == 3  # 2.5 rounds half up
    assert resolve_steps(0.001, 10) == 1  # at least one step
    for bad in (0, -0.5, 2.5, float("nan"), "0.9", True):
        with pytest.raises(ValueError):
            resolve_steps(bad, 100)
    with pytest.raises(ValueError, match="total_steps"):
        resolve_steps(0.5, 0)


def test_pace_fraction_specs():
    # root_2 with defaults delta 0.33, T = 0.9 * 1000 = 900: at 450 the same as 500/1000 above
    assert float(pace_fraction({"name": "root_2"}, 450, 1000)) == pytest.approx(0.7446139939592863)
    assert float(pace_fraction({"name": "root_2"}, 900, 1000)) == 1.0
    spec = {"name": "root_n", "n": 2, "delta": 0.33, "T": 0.9}
    assert float(pace_fraction(spec, 450, 1000)) == pytest.approx(0.7446139939592863)
    assert float(pace_fraction({"name": "linear", "T": 500}, 250, 1000)) == pytest.approx(0.665)
    assert float(pace_fraction({"name": "standard"}, 0, 1000)) == 1.0
    # step defaults: T = 810, boundaries 270 and 540
    got = pace_fraction({"name": "step"}, [270, 271, 541], 900)
    np.testing.assert_allclose(got, [0.33, 0.665, 1.0])
    # hcl defaults r0 0.4, T0 = 100, T = 900 of 1000: at 500, 0.6 / 800 * 400 + 0.4 = 0.7
    assert float(pace_fraction({"name": "hcl"}, 500, 1000)) == pytest.approx(0.7)
    paper = {"name": "hcl", "r0": 0.4, "T0": 2000, "T": 20000}
    np.testing.assert_allclose(pace_fraction(paper, [0, 11000, 20000], 40000), [0.4, 0.7, 1.0])
    assert pace_fraction({"name": "linear"}, np.arange(6).reshape(2, 3), 100).shape == (2, 3)


def test_pace_fraction_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"unknown pacing function 'cosine'.*root_n"):
        pace_fraction({"name": "cosine"}, 0, 100)
    with pytest.raises(ValueError, match=r"unknown pacing function None"):
        pace_fraction({}, 0, 100)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['n'\] for pacing 'root_2'.*'delta'"):
        pace_fraction({"name": "root_2", "n": 3}, 0, 100)
    with pytest.raises(ValueError, match=r"\['delta'\] for pacing 'hcl'.*'r0'"):
        pace_fraction({"name": "hcl", "delta": 0.3}, 0, 100)


def test_pace_mode():
    assert pace_mode({"name": "root_2"}) == "fraction"
    assert pace_mode({"name": "standard"}) == "fraction"
    assert pace_mode({"name": "hcl"}) == "threshold"
    assert pace_mode({"name": "hcl", "select": "fraction"}) == "fraction"
    assert pace_mode({"name": "geom_progression", "select": "threshold"}) == "threshold"
    with pytest.raises(ValueError, match="select mode 'top'"):
        pace_mode({"name": "hcl", "select": "top"})
    with pytest.raises(ValueError, match="unknown pacing function"):
        pace_mode({"name": "nope"})


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4", float("nan"), float("inf"), None])
def test_whole_number_refuses_anything_but_a_count_and_names_the_key(bad):
    from curricula.plumbing.errors import whole_number

    assert whole_number(4.0, "x") == 4 and isinstance(whole_number(4.0, "x"), int)
    with pytest.raises(ValueError, match=r"^experiments\.a\.negatives\.m: need an integer >= 1, got "):
        whole_number(bad, "experiments.a.negatives.m")
