"""The study tables on the docs pages, regenerated from the committed ledger (``python -m tools.ledger_docs``;
``--check`` writes nothing and exits 1 when a page differs): every number between a ledger marker and its end is recomputed from the ledger alone, so a page cannot
drift from the runs it quotes (tests/test_ledger_docs.py fails when they differ).

A block is opened by ``<!-- ledger configs="<config files>" only="<keys>" -->`` (the study the ledger belongs to:
``snakemake --configfile <config files> --config 'study={only: [<keys>]}'``; ``only`` may be left out) and closed by
``<!-- /ledger -->``. Its text is the ledger's runs and cost per dataset, then each recomputed round's table
(:func:`curricula.study.rounds.rounds_markdown`), and the findings page's verdict table once the ledger reaches the
study's last round.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curricula.study.findings_page import costs_markdown
from curricula.study.ledger import Ledger
from curricula.study.ledger_runs import ledger_costs
from curricula.study.rounds import read_round, rounds_markdown

#: A block's opening and closing markers.
OPEN = re.compile(r'<!-- ledger configs="(?P<configs>[^"]+)"(?: only="(?P<only>[^"]*)")? -->\n')
CLOSE = "<!-- /ledger -->"


def block_study(match: re.Match[str]) -> tuple[list[str], dict[str, Any]]:
    """(config files, --config overrides) of a block's opening marker."""
    only = match.group("only")
    overrides = {"study": {"only": only.split()}} if only else {}
    return match.group("configs").split(), overrides


def block_text(configs: list[str], overrides: Mapping[str, Any]) -> str:
    """A block's generated text: the study's ledger summarised and its rounds (and findings) recomputed."""
    from curricula.pipeline.study import study_plan_of
    from curricula.study.recompute import recompute

    plan = study_plan_of(configs, overrides)
    ledger = Ledger(plan.layout.study_ledger)
    records = ledger.records()
    size = sum(p.stat().st_size for p in ledger.paths())
    lines = [*wrap(f"Regenerated from `{plan.layout.study_ledger}` by `python -m tools.ledger_docs`: "
                   f"{len(records)} runs, {size / 1e6:.2f} MB; their CPU time and where they came from:"), ""]
    lines += [line for line in costs_markdown(ledger_costs(records)) if line.startswith("|")] + [""]
    with tempfile.TemporaryDirectory() as tmp:
        done = recompute(plan, tmp)
        for line in rounds_markdown([read_round(p) for p in done.rounds]):
            if line.startswith("## "):
                lines.append("#" + line)
            else:  # tables as they are, prose at the docs' width
                lines += [line] if line.startswith("|") or not line else wrap(line)
        if done.findings:
            page = Path(done.findings["findings"]).read_text(encoding="utf-8")
            lines += ["#### Findings", "", *verdict_table(page), ""]
    if done.stopped:
        lines += [*wrap(f"Next: {done.stopped}."), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def wrap(text: str) -> list[str]:
    """A paragraph as lines of at most 120 characters (the docs' prose width)."""
    return textwrap.wrap(text, width=120, break_long_words=False, break_on_hyphens=False)


def verdict_table(page: str) -> list[str]:
    """The first markdown table of a findings page (its verdict matrix)."""
    rows = [line for line in page.splitlines() if line.startswith("|")]
    first = page.splitlines().index(rows[0]) if rows else 0
    out = []
    for line in page.splitlines()[first:]:
        if not line.startswith("|"):
            break
        out.append(line)
    return out


def regenerate(text: str) -> str:
    """``text`` (a docs page) with every ledger block's text generated anew."""
    out, pos = [], 0
    for match in OPEN.finditer(text):
        end = text.find(CLOSE, match.end())
        if end < 0:
            raise ValueError(f"a ledger block opened at character {match.start()} is never closed ({CLOSE})")
        out += [text[pos:match.end()], "\n", block_text(*block_study(match)), "\n"]
        pos = end
    return "".join(out) + text[pos:]


def regenerate_docs(paths: list[str | Path], check: bool = False) -> list[Path]:
    """Regenerate the ledger blocks of the docs pages ``paths``; the pages whose blocks changed (with ``check``,
    nothing is written)."""
    changed = []
    for path in map(Path, paths):
        text = path.read_text(encoding="utf-8")
        if not OPEN.search(text):
            continue
        new = regenerate(text)
        if new != text:
            changed.append(path)
            if not check:
                path.write_text(new, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with ``--check`` compare) the ledger blocks of docs/*.md; exit 1 when checking finds a
    difference."""
    parser = argparse.ArgumentParser(prog="python -m tools.ledger_docs", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs")
    args = parser.parse_args(argv)
    changed = regenerate_docs(sorted(Path("docs").rglob("*.md")), check=args.check)
    verb = "differ from the ledger" if args.check else "regenerated"
    print(f"{len(changed)} page(s) {verb}" + "".join(f"\n  {p}" for p in changed))
    return 1 if args.check and changed else 0


__all__ = ["CLOSE", "OPEN", "block_study", "block_text", "main", "regenerate", "regenerate_docs", "verdict_table",
           "wrap"]

if __name__ == "__main__":
    sys.exit(main())
