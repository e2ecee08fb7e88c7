"""The GPU smoke check: its committed CPU reference is whole, it passes on the CPU against a reference written here,
it fails when a value is off, and on a GPU host (marker ``gpu``) it passes against the committed reference."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from curricula.smoke.checks import RANKERS, Sizes, ids_equal_but_ties
from curricula.smoke.gpu import REFERENCE, Report, main, read_reference, scoring_checks
from tests.conftest import REPO, original_environment


def test_committed_reference_holds_every_value_at_the_default_sizes():
    made, ref = read_reference(REFERENCE)
    sizes = Sizes(**made["sizes"])
    assert sizes == Sizes()
    for name in RANKERS:
        assert ref[f"logits/{name}"].shape == (sizes.pairs,) and np.isfinite(ref[f"logits/{name}"]).all()
        assert ref[f"losses/{name}"].shape == (sizes.steps,)
    assert ref["vectors"].shape == (sizes.texts, 384)
    assert ref["neighbour_ids"].shape == ref["neighbour_scores"].shape == (sizes.texts // 2, sizes.k)


def test_ties_may_swap_ids_nothing_else_may():
    ref_ids, scores = np.array([[3, 1, 2]]), np.array([[0.9, 0.5, 0.5]])
    assert ids_equal_but_ties(np.array([[3, 2, 1]]), ref_ids, scores)
    assert not ids_equal_but_ties(np.array([[1, 3, 2]]), ref_ids, scores)


@pytest.mark.slow
def test_smoke_passes_on_the_cpu_and_fails_on_a_wrong_value(tmp_path, capsys):
    reference = tmp_path / "ref.npz"
    assert main(["--write-reference", "--reference", str(reference), "--pairs", "24", "--steps", "11"]) == 0
    assert main(["--device", "cpu", "--reference", str(reference)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "17 passed, 0 failed"
    assert sum(line.startswith("PASS ") for line in lines) == 17 and not [x for x in lines if x.startswith("FAIL")]
    made, ref = read_reference(reference)
    ref["logits/convknrm"] = ref["logits/convknrm"] + np.float32(2e-4)  # off by more than the bound
    report = Report()
    scoring_checks(report, torch.device("cpu"), Sizes(**made["sizes"]), ref)
    assert report.failed == 1 and report.lines[1].startswith("FAIL scoring convknrm fp32: max |logit - CPU| 2.00e-04")


@pytest.mark.gpu
def test_smoke_passes_on_this_gpu():
    out = subprocess.run([sys.executable, "-m", "curricula.smoke.gpu"], capture_output=True, text=True, cwd=REPO,
                         env=original_environment(), timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")
