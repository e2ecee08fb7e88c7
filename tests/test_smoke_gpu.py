"""The GPU smoke check: its committed CPU reference is whole and fit to compare with (logits that spread, losses that
move, a bf16 ranking that passes on the CPU), every check fails on a value perturbed beyond its bound (the
self-test), it passes on the CPU against a reference written here in either precision of the cross-encoder, and on
a GPU host (marker ``gpu``) it passes against the committed reference."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.built_once import built_once
from tests.conftest import REPO, original_environment
from tools.smoke.checks import MC_PASSES, MC_RANKERS, RANKERS, Sizes
from tools.smoke.gpu import REFERENCE, Report, main, read_reference, scoring_checks
from tools.smoke.selftest import self_cases, self_test
from tools.smoke.verdicts import (LOSS_REL, MIN_MOVE, MIN_SPEARMAN, MIN_SPREAD, ids_equal_but_ties, losses_verdict,
                                  mc_dropout_verdict)

#: test sizes: 256 pairs keep the bf16 Spearman's margin (0.99998 here; at 128 pairs one unlucky swap costs 1e-4)
SMALL = ["--pairs", "256", "--steps", "12"]


def test_committed_reference_holds_every_value_at_the_default_sizes():
    made, ref = read_reference(REFERENCE)
    sizes = Sizes(**made["sizes"])
    assert sizes == Sizes()
    for name in RANKERS:
        logits = ref[f"logits/{name}"]
        assert logits.shape == (sizes.pairs,) and np.isfinite(logits).all()
        assert np.ptp(logits) >= MIN_SPREAD * np.abs(logits).max()
        assert ref[f"losses/{name}"].shape == (sizes.steps,)
        assert ref[f"untrained/{name}"].shape == (sizes.compared_steps,)
    for name in MC_RANKERS:
        assert ref[f"mc/{name}"].shape == (2, MC_PASSES, min(sizes.pairs, 256))
    assert ref["logits_bf16/cross_encoder"].shape == (sizes.pairs,)
    assert ref["vectors"].shape == (sizes.texts, 384)
    assert ref["neighbour_ids"].shape == ref["neighbour_scores"].shape == (sizes.texts // 2, sizes.k + 1)
    assert made["cpu_bf16_spearman"] >= MIN_SPEARMAN
    assert {"torch", "cpu", "cpu_flags", "cpu_bf16", "precision", "models"} <= set(made)


def test_committed_losses_move_by_ten_times_their_bound():
    """A device whose backward did nothing reports the untrained losses: they differ from the CPU's by more than
    10x the bound within the compared steps, for every ranker."""
    made, ref = read_reference(REFERENCE)
    n = made["sizes"]["compared_steps"]
    for name in RANKERS:
        losses, untrained = ref[f"losses/{name}"][:n], ref[f"untrained/{name}"]
        assert np.max(np.abs(losses - untrained) / losses) >= MIN_MOVE * LOSS_REL, name
        assert not losses_verdict(np.concatenate([untrained, ref[f"losses/{name}"][n:]]), ref[f"losses/{name}"],
                                  untrained, n).ok


def test_ties_may_swap_ids_nothing_else_may():
    ref_ids, scores = np.array([[3, 1, 2, 4]]), np.array([[0.9, 0.5, 0.5, 0.1]])
    assert ids_equal_but_ties(np.array([[3, 2, 1]]), ref_ids, scores, k=3)
    assert not ids_equal_but_ties(np.array([[1, 3, 2]]), ref_ids, scores, k=3)
    assert not ids_equal_but_ties(np.array([[3, 1, 1]]), ref_ids, scores, k=3)  # an id twice
    # a tie across the k-th place: either of the tied ids may close the list
    assert ids_equal_but_ties(np.array([[3, 2]]), ref_ids, scores, k=2)
    assert not ids_equal_but_ties(np.array([[3, 4]]), ref_ids, scores, k=2)


def test_mc_dropout_fails_when_passes_do_not_differ_or_runs_do():
    made, ref = read_reference(REFERENCE)
    runs = ref["mc/cnn_qa"]
    assert mc_dropout_verdict(runs).ok
    assert not mc_dropout_verdict(np.repeat(runs[:, :1], MC_PASSES, axis=1)).ok
    assert not mc_dropout_verdict(np.stack([runs[0], runs[0] + np.float32(1e-6)])).ok


def test_self_test_sees_every_check_fail_on_its_perturbations(capsys):
    """Every check passes on the committed reference's own values and fails on each perturbation (a logit, a loss,
    a weight, an MC pass, a vector, an id, a job's card count); the profile's jobs are given, not planned here."""
    jobs = (0, [("train", 0), ("evaluate", 0), ("dense_encode_shard", 0)])
    assert self_test(REFERENCE, jobs)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(self_cases(REFERENCE, jobs)) + 1 == 18
    assert all(line.startswith("self-test ") and line.endswith(" (ok)") for line in lines[:-1])
    assert lines[-1].startswith("self-test: 17 of 17 checks")


def test_an_old_reference_is_refused_with_how_to_remake_it(tmp_path):
    old = tmp_path / "old.npz"
    np.savez(old, meta=np.array('{"sizes": {}}'), vectors=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="--write-reference"):
        read_reference(old)


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory):
    """A reference written on this CPU at test sizes, once per session (tests.built_once)."""

    def write(folder):
        assert main(["--write-reference", "--reference", str(folder / "ref.npz"), *SMALL]) == 0

    return built_once(tmp_path_factory, "smoke_reference", write) / "ref.npz"


@pytest.mark.slow
def test_smoke_passes_on_the_cpu_and_fails_on_a_wrong_value(small_reference, capsys):
    assert main(["--device", "cpu", "--reference", str(small_reference)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "17 passed, 0 failed"
    assert sum(line.startswith("PASS ") for line in lines) == 17 and not [x for x in lines if x.startswith("FAIL")]
    made, ref = read_reference(small_reference)
    scale = float(np.abs(ref["logits/convknrm"]).max())
    ref["logits/convknrm"] = ref["logits/convknrm"] + np.float32(2e-4 * scale)  # off by twice the bound
    report = Report()
    scoring_checks(report, torch.device("cpu"), Sizes(**made["sizes"]), ref, made)
    assert report.failed == 1 and report.lines[1].startswith("FAIL scoring convknrm fp32: max |logit - CPU|")


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_cross_encoders_precision_passes_on_the_cpu_either_way(small_reference, precision, capsys):
    """``auto`` is bf16 on AVX512-BF16 and AMX CPUs and fp32 on AVX2 ones (where bf16 autocast still runs,
    emulated): both resolutions pass here, whatever this CPU resolves ``auto`` to."""
    made, ref = read_reference(small_reference)
    report = Report()
    scoring_checks(report, torch.device("cpu"), Sizes(**made["sizes"]), ref, made, precision)
    assert report.failed == 0 and report.passed == 5
    assert report.lines[-1].startswith(f"PASS scoring cross_encoder auto forced {precision}: runs {precision};")


@pytest.mark.slow
def test_the_self_test_command_plans_the_profile_and_passes():
    out = subprocess.run([sys.executable, "-m", "tools.smoke.gpu", "--self-test"], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "self-test workstation profile: fails on one " in out.stdout


@pytest.mark.gpu
def test_smoke_passes_on_this_gpu():
    out = subprocess.run([sys.executable, "-m", "tools.smoke.gpu"], capture_output=True, text=True, cwd=REPO,
                         env=original_environment(), timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")
