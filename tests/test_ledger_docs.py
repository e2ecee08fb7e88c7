"""The study tables on the docs pages are regenerated from the committed ledger (tools/ledger_docs.py):
every number between a ledger marker and its end is what ``python -m tools.ledger_docs`` computes from the
ledger alone, on a fresh clone, without any model or metric file."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import tools.ledger_docs
from tools.ledger_docs import OPEN, regenerate

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (REPO / "docs").rglob("*.md") if OPEN.search(p.read_text(encoding="utf-8")))


def test_some_docs_page_quotes_a_ledger():
    assert PAGES, "no docs page has a ledger block (<!-- ledger configs=... -->)"


@pytest.fixture
def block_texts(monkeypatch) -> dict:
    """tools.ledger_docs.block_text remembered per (config files, overrides) for the test (a block's text is a
    function of its study's ledger, which the test leaves alone): {(configs, overrides): times it was asked for}."""
    asked: dict = {}
    original = tools.ledger_docs.block_text
    compute = functools.cache(lambda configs, overrides: original(list(configs), json.loads(overrides)))

    def block_text(configs, overrides):
        key = (tuple(configs), json.dumps(overrides, sort_keys=True))
        asked[key] = asked.get(key, 0) + 1
        return compute(*key)

    monkeypatch.setattr(tools.ledger_docs, "block_text", block_text)
    return asked


@pytest.mark.slow  # regenerates every ledger block of the page from the committed ledger (findings: 15 s)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_docs_tables_equal_the_ones_regenerated_from_the_committed_ledger(page, monkeypatch, block_texts):
    monkeypatch.chdir(REPO)  # the markers name config files and the ledger relative to the repository
    text = page.read_text(encoding="utf-8")
    assert regenerate(text) == text, (f"{page.relative_to(REPO)} differs from its ledger: run `python -m "
                                      f"curricula.cli ledger docs` and commit the page")
    # a changed number is caught: the regenerated page puts the ledger's back
    start = OPEN.search(text).end()
    digit = next(i for i in range(start, len(text)) if text[i].isdigit())
    tampered = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
    assert regenerate(tampered) == text
    # each block's text was asked for by both regenerations (computed once from the ledger, then remembered)
    assert block_texts and all(times >= 2 for times in block_texts.values())
