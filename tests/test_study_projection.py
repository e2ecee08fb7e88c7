"""bench/study_projection.py: the expected number of the study's cells that seeds in rounds would decide, from a
dataset's measured variance components (here the default run's 4-seed chitchat AP, tests/data)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO

FIXTURE = REPO / "tests" / "data" / "chitchat_ap_4seeds.parquet"


def bench():
    spec = importlib.util.spec_from_file_location("study_projection", REPO / "bench" / "study_projection.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:]]


def test_the_projection_reads_components_and_counts_decisions_that_grow_with_the_cap_and_fall_with_the_seed_sd(capsys):
    projection = bench()
    assert projection.looks_up_to(20) == (5, 10, 15, 20) and projection.looks_up_to(8) == (2, 4, 6, 8)
    components, queries, base = projection.dataset_components(str(FIXTURE))
    assert queries == 1500 and base == pytest.approx(0.4692, abs=1e-4) and components[0] == pytest.approx(
        0.0158 ** 2, rel=0.01)
    with pytest.raises(ValueError, match="at least 8 seeds"):
        projection.looks_up_to(6)
    assert projection.main(["--dataset", f"chitchat={FIXTURE}", "--caps", "8,40", "--draws", "300"]) == 0
    (_, sd, _, _, cap8, few, *_), (*_, cap40, many, _, _, _, _) = rows(capsys.readouterr().out)
    assert (sd, cap8, cap40) == ("0.0158", "8", "40")
    assert 0 <= float(few) < float(many) <= 10  # more seeds decide more of the 10 cells
    projection.main(["--dataset", f"chitchat={FIXTURE}", "--caps", "40", "--draws", "300", "--sd-seed",
                     "chitchat=0.08"])
    (_, sd, *_, noisy, _, _, _, _), = rows(capsys.readouterr().out)
    assert sd == "0.0800" and float(noisy) < float(many)  # a noisier model decides fewer
    with pytest.raises(SystemExit):
        projection.main(["--dataset", f"douban={FIXTURE}"])
    # one family over the datasets given, as the rounds judge it: Holm over 9 sequential claims' cells per dataset
    projection.main(["--dataset", f"chitchat={FIXTURE}", "--caps", "40", "--draws", "300", "--family", "holm",
                     "--thresholds", "normal"])
    (name, _, _, _, cap, adjusted, of, _, _, family), = rows(capsys.readouterr().out)
    assert (name, cap, of, family) == ("chitchat", "40", "9", "holm")
    assert float(adjusted) < float(many)  # the family's thresholds are stricter than one cell's

