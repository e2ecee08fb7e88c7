"""The study tables on the docs pages, and the study paragraphs of the README and of the findings page's opening, are
regenerated from the committed ledger (tools/ledger_docs.py): every number between a ledger marker and its end is
what ``python -m tools.ledger_docs`` computes from the ledger alone, on a fresh clone, without any model or metric
file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curricula.plumbing.config import read_yaml
from curricula.study.replication import decided_word
from curricula.study.verdicts import CellVerdict
from tools.ledger_docs import OPEN, block_study, decided_cells, regenerate, replication_rows, study_state

REPO = Path(__file__).resolve().parents[1]
PAGES = [p for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
         if OPEN.search(p.read_text(encoding="utf-8"))]


def test_some_docs_page_quotes_a_ledger_and_the_readme_and_the_findings_opening_summarise_it():
    assert PAGES, "no docs page has a ledger block (<!-- ledger configs=... -->)"
    for page in (REPO / "README.md", REPO / "docs" / "findings.md"):
        assert "<!-- ledger summary configs=" in page.read_text(encoding="utf-8"), page


def cell(claim: str, dataset: str, verdict: str, effect: str, sequential: bool = True) -> CellVerdict:
    return CellVerdict(claim, claim, dataset, verdict, 15, effect, f"{verdict} ({effect}, 15 seeds)", sequential)


def test_the_summary_counts_the_decided_cells():
    cells = [cell("one", "a", "reproduced", "+2.0%"), cell("one", "b", "inconclusive", "+0.1%"),
             cell("two", "a", "equivalent", "−0.3%"), cell("two", "b", "not reproduced", "−4.0%"),
             cell("three", "b", "continue", "Δ +0.0100")]
    assert decided_cells(cells) == {"reproduced": ["one on a, +2.0%"], "equivalent": ["two on a, −0.3%"],
                                     "not reproduced": ["two on b, −4.0%"]}
    assert decided_cells([]) == {}
    one = [c for c in cells if c.dataset == "a"]  # one dataset: the claims are not suffixed with it
    assert decided_cells(one)["equivalent"] == ["two, −0.3%"]


def test_a_replication_block_names_its_replication_config():
    match = OPEN.match('<!-- ledger replication configs="a.yaml b.yaml"\n  only="d" replication="r.yaml" -->\n')
    assert match and match["kind"] == "replication" and block_study(match) == (
        ["a.yaml", "b.yaml"], {"study": {"only": ["d"]}}, "r.yaml")
    plain = OPEN.match('<!-- ledger configs="a.yaml" -->\n')
    assert plain and plain["kind"] is None and block_study(plain) == (["a.yaml"], {}, None)
    with pytest.raises(ValueError, match='a "ledger replication" block names its replication config'):
        regenerate('<!-- ledger replication configs="a.yaml" -->\n<!-- /ledger -->')


@pytest.mark.slow  # recomputes each dataset's rounds from the committed ledger (15 s each)
@pytest.mark.parametrize("dataset", ["dailydialog_pp", "wikiqa"])
def test_the_replication_config_lists_exactly_the_cells_the_committed_rounds_decided(dataset, monkeypatch):
    monkeypatch.chdir(REPO)
    configs, only = ["configs/study.yaml", "configs/study_rounds.yaml"], {"study": {"only": [dataset]}}
    state = study_state(tuple(configs), json.dumps(only, sort_keys=True))
    decided = {c.id for c in state.cells if decided_word(c.verdict) is not None}
    listed = read_yaml(REPO / "configs" / "study_replication.yaml")["study"]["replication"]["cells"]
    assert set(listed[dataset]) == decided, "configs/study_replication.yaml: list the decided cells"
    _, _, rows = replication_rows(configs, only, "configs/study_replication.yaml")
    assert [(r.original.id, r.original.verdict) for r in rows] == [
        (c.id, c.verdict) for c in state.cells if c.id in decided]


@pytest.mark.slow  # regenerates every ledger block of the page from the committed ledger (findings: 15 s)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_docs_tables_equal_the_ones_regenerated_from_the_committed_ledger(page, monkeypatch):
    monkeypatch.chdir(REPO)  # the markers name config files and the ledger relative to the repository
    text = page.read_text(encoding="utf-8")
    assert regenerate(text) == text, (f"{page.relative_to(REPO)} differs from its ledger: run `python -m "
                                      f"tools.ledger_docs` and commit the page")
    # a changed number is caught: the regenerated page puts the ledger's back
    start = OPEN.search(text).end()
    digit = next(i for i in range(start, len(text)) if text[i].isdigit())
    tampered = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
    assert regenerate(tampered) == text
