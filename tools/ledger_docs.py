"""The study tables on the docs pages, regenerated from the committed ledger (``python -m tools.ledger_docs``;
``--check`` writes nothing and exits 1 when a page differs): every number between a ledger marker and its end is
recomputed from the ledger alone, so a page cannot drift from the runs it quotes (tests/test_ledger_docs.py fails
when they differ).

A block is opened by ``<!-- ledger configs="<config files>" only="<keys>" -->`` (the study the ledger belongs to:
``snakemake --configfile <config files> --config 'study={only: [<keys>]}'``; ``only`` may be left out) and closed by
``<!-- /ledger -->``. Its text is the ledger's runs and cost per dataset, then each recomputed round's table
(:func:`curricula.study.rounds.rounds_markdown`), and the findings page's verdict table once the ledger reaches the
study's last round.

A summary block, ``<!-- ledger summary configs=... only=... -->`` (the README's study paragraph, the findings
page's opening), is one paragraph instead (:func:`summary_text`): the ledger's runs and core-hours, the cells its
rounds decided with their verdicts and effects, and the core-hours per decided cell. With
``replication="<config file>"`` (the study's ``study.replication`` overlay) it goes on with the replication: its runs
and core-hours, the cells replicated, contradicted, undecided and pending, and the core-hours per replicated cell.

A replication block, ``<!-- ledger replication configs=... only=... replication=<config file> -->``, is the table
of the replicated cells: each cell's verdict on the original draw and on the fresh one side by side, and how they
stand (:func:`replication_text`; replicated only where both decided the same verdict). A marker may break its line
before ``only`` or ``replication``. README.md is regenerated with the docs pages.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from curricula.study.findings_page import costs_markdown
from curricula.study.ledger import Ledger
from curricula.study.ledger_runs import ledger_costs
from curricula.study.replication import (
    CONTRADICTED,
    PENDING,
    REPLICATED,
    UNDECIDED,
    ReplicationRow,
    decided_word,
    side_by_side,
)
from curricula.study.rounds import read_round, rounds_markdown
from curricula.study.verdicts import CellVerdict, findings_cells, round_cells

#: A block's opening and closing markers.
OPEN = re.compile(r'<!-- ledger(?: (?P<kind>summary|replication))? configs="(?P<configs>[^"]+)"'
                  r'(?:\s+only="(?P<only>[^"]*)")?(?:\s+replication="(?P<replication>[^"]+)")? -->\n')
CLOSE = "<!-- /ledger -->"


def block_study(match: re.Match[str]) -> tuple[list[str], dict[str, Any], str | None]:
    """(config files, --config overrides, the replication's config file or None) of a block's opening marker."""
    only = match.group("only")
    overrides = {"study": {"only": only.split()}} if only else {}
    return match.group("configs").split(), overrides, match.group("replication")


@dataclass(frozen=True)
class StudyState:
    """What the committed ledger of one study says: its folder, its run records and their bytes, each recomputed
    round's markdown lines, the findings page's verdict table (empty before the last round), why the
    recomputation stopped early (None when it did not), every cell's verdict (from the findings, else from the
    latest round; none before the first) and the study's ``study.replication`` settings (None for none)."""

    ledger: Path
    records: list[dict[str, Any]]
    size: int
    rounds: list[str]
    verdicts: list[str]
    stopped: str | None
    cells: list[CellVerdict]
    replication: Mapping[str, Any] | None


@functools.cache
def study_state(configs: tuple[str, ...], overrides: str) -> StudyState:
    """:class:`StudyState` of the study ``configs`` with the ``--config`` ``overrides`` (JSON), recomputed from its
    ledger once per call of :func:`regenerate_docs` (a README block and a docs block of one study share it)."""
    from curricula.pipeline.study import study_plan_of
    from curricula.study.recompute import recompute

    plan = study_plan_of(list(configs), json.loads(overrides))
    ledger = Ledger(plan.layout.study_ledger)
    with tempfile.TemporaryDirectory() as tmp:
        done = recompute(plan, tmp)
        records = [read_round(p) for p in done.rounds]
        rounds = rounds_markdown(records)
        page = Path(done.findings["findings"]).read_text(encoding="utf-8") if done.findings else ""
        cells = (findings_cells(pl.read_parquet(done.findings["parquet"]), plan.claims) if done.findings
                 else round_cells(records[-1], plan.claims) if records else [])
    return StudyState(Path(plan.layout.study_ledger), ledger.records(), sum(p.stat().st_size for p in ledger.paths()),
                      rounds, verdict_table(page) if page else [], done.stopped, cells,
                      plan.settings.get("replication"))


def block_text(configs: list[str], overrides: Mapping[str, Any]) -> str:
    """A block's generated text: the study's ledger summarised and its rounds (and findings) recomputed."""
    state = study_state(tuple(configs), json.dumps(overrides, sort_keys=True))
    lines = [*wrap(f"Regenerated from `{state.ledger}` by `python -m tools.ledger_docs`: "
                   f"{len(state.records)} runs, {state.size / 1e6:.2f} MB; their CPU time and where they came from:"),
             ""]
    lines += [line for line in costs_markdown(ledger_costs(state.records)) if line.startswith("|")] + [""]
    for line in state.rounds:
        if line.startswith("## "):
            lines.append("#" + line)
        else:  # tables as they are, prose at the docs' width
            lines += [line] if line.startswith("|") or not line else wrap(line)
    if state.verdicts:
        lines += ["#### Findings", "", *state.verdicts, ""]
    if state.stopped:
        lines += [*wrap(f"Next: {state.stopped}."), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def decided_cells(cells: list[CellVerdict]) -> dict[str, list[str]]:
    """{verdict: ["<claim>[ on <dataset>], <effect>", ...]} of the decided ``cells``, verdicts in the order met; the
    dataset is named where the cells are on several."""
    several = len({c.dataset for c in cells}) > 1
    decided: dict[str, list[str]] = {}
    for cell in cells:
        if decided_word(cell.verdict) is not None:
            where = f" on {cell.dataset}" if several else ""
            decided.setdefault(cell.verdict, []).append(f"{cell.text}{where}, {cell.effect}")
    return decided


def study_hours(state: StudyState) -> float:
    """The core-hours of a study's ledger runs."""
    costs = ledger_costs(state.records)
    return float(costs["core_hours"].sum()) if costs.height else 0.0


def summary_text(configs: list[str], overrides: Mapping[str, Any], replication: str | None = None) -> str:
    """A summary block's paragraph: the study's runs and core-hours, its decided cells and the cost of each, then,
    with a ``replication`` config file, how many of them its replication found again (:func:`replication_summary`)."""
    state = study_state(tuple(configs), json.dumps(overrides, sort_keys=True))
    costs = ledger_costs(state.records)
    hours = study_hours(state)
    text = (f"From the committed ledger `{state.ledger}` (regenerated by `python -m tools.ledger_docs`): "
            f"{len(state.records)} runs on {', '.join(costs['dataset'].to_list()) or 'no dataset'}, "
            f"{hours:.2f} core-hours of training and evaluation.")
    if not state.verdicts:
        why = f": {state.stopped}" if state.stopped else ""
        return "\n".join(wrap(f"{text} The rounds have not reached their last look{why}.")) + "\n"
    rounds = [cell for cell in state.cells if cell.sequential]
    decided = decided_cells(rounds)
    count = sum(map(len, decided.values()))
    text += f" Its rounds decided {count} of its {len(rounds)} cells"
    text += f", {hours / count:.2f} core-hours per decided cell." if count else "."
    for verdict, items in decided.items():
        text += f" {verdict.capitalize()} ({len(items)}): {'; '.join(items)}."
    if replication:
        text += " " + replication_summary(configs, overrides, replication, hours)
    return "\n".join(wrap(text)) + "\n"


def replication_rows(configs: list[str], overrides: Mapping[str, Any], replication: str
                     ) -> tuple[StudyState, int, list[ReplicationRow]]:
    """The replication's state (the study ``configs`` with the ``replication`` file over them), its draw, and a row
    per replicated cell pairing the original's verdict with its replica's
    (:func:`curricula.study.replication.side_by_side`)."""
    original = study_state(tuple(configs), json.dumps(overrides, sort_keys=True))
    replica = study_state((*configs, replication), json.dumps(overrides, sort_keys=True))
    if not replica.replication:
        raise ValueError(f"{replication}: no study.replication section")
    kept = {c.dataset for c in original.cells}
    cells = {key: ids for key, ids in replica.replication["cells"].items() if key in kept}
    draw = int(replica.replication["draw"])
    return replica, draw, side_by_side(original.cells, replica.cells, cells, draw)


def replication_summary(configs: list[str], overrides: Mapping[str, Any], replication: str, hours: float) -> str:
    """The summary's sentences on a replication: its runs and core-hours, how many cells it replicated, contradicted,
    left undecided or has still to decide, the core-hours per replicated cell (the original's and the replication's),
    and the cells replicated and contradicted."""
    replica, draw, rows = replication_rows(configs, overrides, replication)
    spent = study_hours(replica)
    counts = Counter(row.status for row in rows)
    text = (f"Their replication on a fresh draw (draw {draw}: another split of the same pool, fresh seeds; "
            f"`{replica.ledger}`) holds {len(replica.records)} runs, {spent:.2f} core-hours: of its {len(rows)} cells "
            + ", ".join(f"{counts[s]} {s}" for s in (REPLICATED, CONTRADICTED, UNDECIDED, PENDING)))
    text += (f"; {(hours + spent) / counts[REPLICATED]:.2f} core-hours per replicated cell." if counts[REPLICATED]
             else "; none replicated yet.")
    for status in (REPLICATED, CONTRADICTED):
        items = [f"{row.original.text}, {row.original.verdict} then {row.replica.shown}" for row in rows
                 if row.status == status and row.replica is not None]
        if items:
            text += f" {status.capitalize()} ({len(items)}): {'; '.join(items)}."
    return text


def replication_text(configs: list[str], overrides: Mapping[str, Any], replication: str | None) -> str:
    """A replication block's text: each replicated cell's verdict on the original draw and on the fresh one side by
    side, and how they stand (replicated only where both decided the same verdict)."""
    if not replication:
        raise ValueError('a "ledger replication" block names its replication config (replication="<file>")')
    replica, _, rows = replication_rows(configs, overrides, replication)
    original = study_state(tuple(configs), json.dumps(overrides, sort_keys=True))
    lines = [*wrap(f"Regenerated from `{original.ledger}` and `{replica.ledger}` by `python -m tools.ledger_docs`: "
                   f"{len(replica.records)} runs of the replication so far."), "",
             "| claim | dataset | original draw | fresh draw | replication |", "|---|---|---|---|---|"]
    for row in rows:
        again = row.replica.shown if row.replica is not None else "no round yet"
        lines.append(f"| {row.original.text} | {row.original.dataset} | {row.original.shown} | {again} | "
                     f"{row.status} |")
    if replica.stopped:
        lines += ["", *wrap(f"Next: {replica.stopped}.")]
    return "\n".join(lines) + "\n"


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
        configs, overrides, replication = block_study(match)
        kind = match.group("kind")
        generated = (summary_text(configs, overrides, replication) if kind == "summary"
                     else replication_text(configs, overrides, replication) if kind == "replication"
                     else block_text(configs, overrides))
        out += [text[pos:match.end()], "\n", generated, "\n"]
        pos = end
    return "".join(out) + text[pos:]


def regenerate_docs(paths: list[str | Path], check: bool = False) -> list[Path]:
    """Regenerate the ledger blocks of the docs pages ``paths``; the pages whose blocks changed (with ``check``,
    nothing is written). The ledgers are read afresh: a process that appended runs since its last call sees them."""
    study_state.cache_clear()
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
    """Regenerate (or with ``--check`` compare) the ledger blocks of README.md and docs/*.md; exit 1 when checking
    finds a difference."""
    parser = argparse.ArgumentParser(prog="python -m tools.ledger_docs", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs")
    args = parser.parse_args(argv)
    changed = regenerate_docs([Path("README.md"), *sorted(Path("docs").rglob("*.md"))], check=args.check)
    verb = "differ from the ledger" if args.check else "regenerated"
    print(f"{len(changed)} page(s) {verb}" + "".join(f"\n  {p}" for p in changed))
    return 1 if args.check and changed else 0


__all__ = ["CLOSE", "OPEN", "StudyState", "block_study", "block_text", "decided_cells", "main", "regenerate",
           "regenerate_docs", "replication_rows", "replication_summary", "replication_text", "study_hours",
           "study_state", "summary_text", "verdict_table", "wrap"]

if __name__ == "__main__":
    sys.exit(main())
