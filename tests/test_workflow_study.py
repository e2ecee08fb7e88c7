"""Studies through the Snakemake workflow, run as a user would, in a temporary working directory: several datasets
in one study, its ledger and findings page, a selection of its datasets, the sequential rounds and the ledger that
lets any machine continue them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.workflow_run import TINY, TINY_PRECOMPUTE, copy_run, jobs_of, snakemake

pytestmark = pytest.mark.slow  # Snakemake runs of tiny studies


def _study(datasets: dict, claims: dict | None = None) -> dict:
    """A study overlay over the tiny grid: TINY_PRECOMPUTE's knobs for every dataset, each dataset's own section."""
    common = {k: v for k, v in TINY_PRECOMPUTE.items() if k != "dataset"}
    claims = claims if claims is not None else {
        "additivity": {"paper": "Yang et al. 2019", "claim": "interpolating BM25 helps", "experiment": "baseline+bm25",
                       "against": "baseline", "expect": "better", "factors": ["additivity"]}}
    return {**common, "study": {"datasets": {k: {"dataset": d} for k, d in datasets.items()}, "claims": claims}}


def _tiny_dataset(name: str, train: int) -> dict:
    return {**TINY["dataset"], "name": name, "options": {**TINY["dataset"]["options"],
                                                         "max_instances": {"train": train, "dev": 10, "test": 10}}}


def assert_two_dataset_study(wd: Path) -> None:
    """The two-dataset study's outputs in ``wd``: each dataset's logs and queries, one ledger entry per trained run,
    the findings page, table and figure over both, and the cost per dataset from the ledger."""
    from curricula.study.ledger import Ledger

    for key in ("tiny", "tiny_b"):
        assert (wd / "logs" / key / "ingest.log").is_file()
    queries = {k: pl.read_parquet(wd / "results" / k / "data" / "queries.parquet") for k in ("tiny", "tiny_b")}
    assert queries["tiny"].filter(pl.col("split") == "train").height == 40
    assert queries["tiny_b"].filter(pl.col("split") == "train").height == 30
    held = Ledger(wd / "ledger" / "study").records()  # one entry per trained run, both forms (plain and +bm25) in it
    assert sorted((r["dataset"], r["arm"], r["seed"]) for r in held) == [("tiny", "baseline", 1),
                                                                        ("tiny_b", "baseline", 1)]
    assert all(r["kept_step"] is not None and r["cpu_seconds"] > 0 and "data/queries.parquet" in r["upstream"]
               for r in held)
    assert (wd / "ledger" / "study" / "study.json").is_file()
    study = wd / "results" / "report" / "study"
    page = (study / "findings.md").read_text()
    assert "| Yang et al. 2019 | interpolating BM25 helps | " in page
    assert "| tiny | 10 | 1 |" in page and "| tiny_b | 10 | 1 |" in page
    table = pl.read_parquet(study / "findings.parquet")
    assert table["dataset"].to_list() == ["tiny", "tiny_b"]
    assert set(table["verdict"]) <= {"reproduced", "not reproduced", "equivalent", "inconclusive"}
    assert (study / "findings.png").stat().st_size > 0
    # the cost per dataset, from the ledger: the run each dataset's page rests on, measured where it trained
    costs = pl.read_csv(study / "costs.csv")
    assert costs["dataset"].to_list() == ["tiny", "tiny_b"]
    assert costs["runs"].to_list() == [1, 1] and (costs["core_hours"] > 0).all()
    assert costs["machines"].to_list() == [1, 1] and costs["upstream_variants"].to_list() == [1, 1]
    assert "## Cost" in page and "| tiny_b | " in page.split("## Cost")[1]
    assert "## Verdicts against the last study" not in page


def assert_a_selection_is_its_own_family(wd: Path, again: dict) -> None:
    """``study.only`` on the finished study ``again`` in ``wd``: the selection's page, ledger and logs in folders of
    their own, the whole study's page left as it was; listing every dataset is the whole study."""
    from curricula.study.ledger import Ledger

    study = wd / "results" / "report" / "study"
    whole = (study / "findings.md").read_text()
    alone = {**again, "study": {**again["study"], "only": ["tiny_b"]}}
    assert jobs_of(snakemake(wd, "-n", config=alone).stdout) == {"study_ledger_entry", "report_study", "all"}
    out = snakemake(wd, config=alone)
    assert out.returncode == 0, out.stderr[-2000:]
    assert pl.read_parquet(study / "only=tiny_b" / "findings.parquet")["dataset"].to_list() == ["tiny_b"]
    assert (wd / "logs" / "study" / "only=tiny_b" / "report_study.log").is_file()
    assert len(Ledger(wd / "ledger" / "study" / "only=tiny_b").records()) == 1
    assert (study / "findings.md").read_text() == whole
    listed = {**again, "study": {**again["study"], "only": ["tiny_b", "tiny"]}}
    assert jobs_of(snakemake(wd, "-n", config=listed).stdout) == set()


def test_a_study_runs_every_dataset_and_adding_one_schedules_only_its_jobs(tiny_run, tmp_path):
    """A two-dataset study: the tiny run's dataset (its finished jobs reused: same config, same params) and a second
    tiny chitchat cut, each under results/<key>/ with its own logs, every claim run's entry in the study's ledger,
    and the findings page over both from the ledger. Adding a third dataset schedules that dataset's jobs, its
    entries and the study report only."""
    wd = copy_run(tiny_run, tmp_path / "run")
    two = _study({"tiny": TINY["dataset"], "tiny_b": _tiny_dataset("tiny_b", 30)})
    plan = snakemake(wd, "-n", config=two)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert {j for j in jobs_of(plan.stdout) if not j.startswith("tiny_b_")} == {"study_ledger_entry", "report_study",
                                                                                "all"}
    assert "tiny_b_report_tables" not in jobs_of(plan.stdout)  # a study's targets are its findings, not each report
    out = snakemake(wd, config=two)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_two_dataset_study(wd)
    study = wd / "results" / "report" / "study"
    assert jobs_of(snakemake(wd, "-n", config=two).stdout) == set()          # nothing left to do
    # against the last study: its findings copied aside, named by study.previous; only the page is made again
    shutil.copy(study / "findings.parquet", wd / "previous.parquet")
    again = {**two, "study": {**two["study"], "previous": "previous.parquet"}}
    assert jobs_of(snakemake(wd, "-n", config=again).stdout) == {"report_study", "all"}
    assert snakemake(wd, config=again).returncode == 0
    assert "0 changed, 2 the same, 0 new, 0 no longer tested" in (study / "findings.md").read_text()
    own = {**two, "study": {**two["study"], "previous": "results/report/study/findings.parquet"}}
    out = snakemake(wd, "-n", config=own)
    assert out.returncode != 0 and "is this study's own findings table" in out.stdout + out.stderr
    html = wd / "report.html"
    out = snakemake(wd, "--report", str(html), config=two)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "findings.md" in html.read_text(errors="replace") and "tiny_b" in html.read_text(errors="replace")
    assert_a_selection_is_its_own_family(wd, again)
    three = _study({"tiny": TINY["dataset"], "tiny_b": _tiny_dataset("tiny_b", 30),
                    "tiny_c": _tiny_dataset("tiny_c", 20)})
    added = jobs_of(snakemake(wd, "-n", config=three).stdout)
    assert "tiny_c_train" in added and "tiny_c_ingest" in added
    assert {j for j in added if not j.startswith("tiny_c_")} == {"study_ledger_entry", "report_study", "all"}


def test_a_bad_study_stops_before_any_job(tmp_path):
    """One parse per class of start-up error: a check of the study's plan (each of its messages is a unit test in
    tests/test_plan.py) and the schema."""
    missing = _study({"tiny": TINY["dataset"]}, claims={
        "c": {"paper": "P", "claim": "c", "experiment": "nope", "against": "baseline", "expect": "better",
              "factors": ["scoring"]}})
    out = snakemake(tmp_path, "-n", config=missing)
    assert out.returncode != 0
    assert "config: study.claims name ['nope'], which tiny's grid does not evaluate" in out.stdout + out.stderr
    undeclared = _study({"tiny": TINY["dataset"]}, claims={
        "h": {"paper": "S", "claim": "c", "experiment": "baseline+bm25", "against": "baseline", "expect": "better"}})
    out = snakemake(tmp_path, "-n", config=undeclared)
    assert out.returncode != 0 and "config: study.claims.h.factors: missing (required)" in out.stdout + out.stderr
    assert not (tmp_path / "results").exists()


def test_a_sequential_study_trains_the_next_round_only_for_undecided_cells(tiny_run, tmp_path, monkeypatch):
    """study.sequential with looks [2, 3]: each dataset's own targets train the first look's seeds only; the
    checkpoint study_round judges every cell after a round and lists the arms of the open cells, and exactly those
    arms train the next round's seeds; the findings carry each cell's sequential verdict at its look; a second
    invocation schedules nothing."""
    from curricula.plumbing.keys import without_bm25
    from curricula.statistics.sequential_verdicts import CONTINUE
    from curricula.study.rounds import read_round

    wd = copy_run(tiny_run, tmp_path / "run")
    claims = {
        "additivity": {"paper": "Yang et al. 2019", "claim": "interpolating BM25 helps", "experiment": "baseline+bm25",
                       "against": "baseline", "expect": "better", "factors": ["additivity"]},
        "hinge": {"paper": "S", "claim": "a hinge on random negatives helps", "experiment": "hinged",
                  "against": "baseline", "expect": "better", "factors": ["loss", "negatives"]},
        # the baseline's spec under another name trains the same models: d = 0, equivalent at the first look
        "twin": {"paper": "T", "claim": "the baseline's twin is the baseline", "experiment": "twin",
                 "against": "baseline", "expect": "better", "factors": ["loss"]}}
    cfg = _study({"tiny": TINY["dataset"]}, claims)
    cfg["experiments"] = {"hinged": {"loss": "hinge", "negatives": {"mode": "random"}}, "twin": {}}
    cfg["study"].update(sequential={"enabled": True, "looks": [2, 3]})
    plan = snakemake(wd, "-n", config=cfg)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "study_round" in jobs_of(plan.stdout) and "report_study" in jobs_of(plan.stdout)
    assert set(re.findall(r"seed=(-?\d+)", plan.stdout)) == {"1", "2"}  # the first look; no seed 3 yet
    out = snakemake(wd, config=cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    rounds = wd / "results" / "report" / "study" / "rounds"
    first = read_round(rounds / "round=1.json")
    assert first["round"] == 1 and first["looks"] == [2, 3]
    assert first["multiplicity"] == "holm" and first["hypotheses"] == 6  # one family: 3 cells x 2 hypotheses
    assert set(first["decisions"]) == {("additivity", "tiny"), ("hinge", "tiny"), ("twin", "tiny")}
    assert first["decisions"][("twin", "tiny")].verdict == "equivalent"  # decided at look 1: twin trains no seed 3
    open_cells = [cell for cell, d in first["decisions"].items() if d.verdict == CONTINUE]
    assert (rounds / "round=2.json").exists() == bool(open_cells)
    final = read_round(rounds / ("round=2.json" if open_cells else "round=1.json"))
    assert all(d.verdict != CONTINUE for d in final["decisions"].values())
    arms = {arm for cell in open_cells for arm in (claims[cell[0]]["experiment"], claims[cell[0]]["against"])}
    assert {arm for _, arm in first["next"]} == arms
    expected = {}
    for (_, arm), count in final["trained"].items():
        expected[without_bm25(arm)] = max(count, expected.get(without_bm25(arm), 0))
        assert count == (3 if arm in arms else 2)
    res = wd / "results" / "tiny" / "experiments"
    trained = {p.name: sorted(int(s.name.removeprefix("seed=")) for s in p.iterdir() if (s / "model").exists())
               for p in res.iterdir()}
    assert trained == {name: list(range(1, n + 1)) for name, n in expected.items()}
    assert trained["twin"] == [1, 2]
    table = pl.read_parquet(wd / "results" / "report" / "study" / "findings.parquet")
    by_claim = dict(zip(table["claim"], table.iter_rows(named=True)))
    for (claim_id, _), decision in final["decisions"].items():
        row = by_claim[claims[claim_id]["claim"]]
        assert (row["sequential_verdict"], row["look_seeds"], row["seeds"]) == (decision.verdict, decision.seeds,
                                                                                 decision.seeds)
        assert row["p_boundary"] == pytest.approx(decision.p_boundary)
    assert "sequential (seeds, p boundary)" in (wd / "results" / "report" / "study" / "findings.md").read_text()
    again = snakemake(wd, "-n", config=cfg)
    assert again.returncode == 0 and jobs_of(again.stdout) == set(), again.stdout[-2000:]
    _the_ledger_resumes_anywhere_and_recomputes_the_findings(wd, tmp_path, cfg, monkeypatch)


def _the_ledger_resumes_anywhere_and_recomputes_the_findings(wd: Path, tmp_path: Path, cfg: dict, monkeypatch):
    """The study's ledger alone: recomputing its rounds and findings gives the run's bytes; a fresh working directory
    with only the ledger copied over trains nothing the ledger holds and writes the same findings page."""
    from curricula.pipeline.study import study_plan_of
    from curricula.study.recompute import check_complete, recompute

    study = wd / "results" / "report" / "study"
    monkeypatch.chdir(wd)
    done = recompute(study_plan_of([wd / "config.test.yaml"]), tmp_path / "from_ledger")
    check_complete(done)
    for path in done.rounds:
        assert path.read_bytes() == (study / "rounds" / path.name).read_bytes(), path.name
    for name, path in done.findings.items():
        if name != "figure":
            assert path.read_bytes() == (study / path.name).read_bytes(), name
    fresh = tmp_path / "fresh"
    shutil.copytree(wd / "ledger", fresh / "ledger")
    plan = snakemake(fresh, "-n", config=cfg)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert jobs_of(plan.stdout) == {"study_round", "report_study", "all"}  # nothing trained, no stage before it
    out = snakemake(fresh, config=cfg)
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (fresh / "results" / "tiny").exists()
    for name in ("findings.md", "findings.csv", "findings.parquet", "costs.csv"):
        assert (fresh / "results" / "report" / "study" / name).read_bytes() == (study / name).read_bytes(), name
