"""The study tables on the docs pages, and the study paragraphs of the README and of the findings page's opening, are
regenerated from the committed ledger (tools/ledger_docs.py): every number between a ledger marker and its end is
what ``python -m tools.ledger_docs`` computes from the ledger alone, on a fresh clone, without any model or metric
file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.ledger_docs import OPEN, decided_cells, regenerate

REPO = Path(__file__).resolve().parents[1]
PAGES = [p for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
         if OPEN.search(p.read_text(encoding="utf-8"))]


def test_some_docs_page_quotes_a_ledger_and_the_readme_and_the_findings_opening_summarise_it():
    assert PAGES, "no docs page has a ledger block (<!-- ledger configs=... -->)"
    for page in (REPO / "README.md", REPO / "docs" / "findings.md"):
        assert "<!-- ledger summary configs=" in page.read_text(encoding="utf-8"), page


def test_the_summary_counts_the_decided_cells_of_a_verdict_table():
    table = ["| paper | claim | a | b |", "|---|---|---|---|",
             "| P | one | reproduced (+2.0%, 15 seeds) | inconclusive (+0.1%, 20 seeds) |",
             "| P | two | equivalent (−0.3%, 20 seeds) | not reproduced (−4.0%, 5 seeds) |",
             "| P | three | — | continue (+1.0%, 10 seeds) |"]
    cells, decided = decided_cells(table)
    assert cells == 5  # the dash is no cell of the study
    assert decided == {"reproduced": ["one on a, +2.0%"], "equivalent": ["two on a, −0.3%"],
                       "not reproduced": ["two on b, −4.0%"]}
    assert decided_cells([]) == (0, {})
    one = [row.rsplit("|", 2)[0] + "|" for row in table]  # one dataset: the claims are not suffixed with it
    assert decided_cells(one)[1]["equivalent"] == ["two, −0.3%"]


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
