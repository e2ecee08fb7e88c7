"""The study tables on the docs pages, regenerated from the committed ledger (``python -m tools.ledger_docs``;
``--check`` writes nothing and exits 1 when a page differs): every number between a ledger marker and its end is recomputed from the ledger alone, so a page cannot
drift from the runs it quotes (tests/test_ledger_docs.py fails when they differ).

A block is opened by ``<!-- ledger configs="<config files>" only="<keys>" -->`` (the study the ledger belongs to:
``snakemake --configfile <config files> --config 'study={only: [<keys>]}'``; ``only`` may be left out) and closed by
``<!-- /ledger -->``. Its text is the ledger's runs and cost per dataset, then each recomputed round's table
(:func:`curricula.study.rounds.rounds_markdown`), and the findings page's verdict table once the ledger reaches the
study's last round.

A summary block, ``<!-- ledger summary configs=... only=... -->`` (the README's study paragraph, the findings
page's opening), is one paragraph instead (:func:`summary_text`): the ledger's runs and core-hours, the cells its
rounds decided with their verdicts and effects, and the core-hours per decided cell. README.md is regenerated with
the docs pages.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tempfile
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curricula.study.findings_page import costs_markdown
from curricula.study.ledger import Ledger
from curricula.study.ledger_runs import ledger_costs
from curricula.study.rounds import read_round, rounds_markdown

#: A block's opening and closing markers.
OPEN = re.compile(r'<!-- ledger(?P<summary> summary)? configs="(?P<configs>[^"]+)"(?: only="(?P<only>[^"]*)")? -->\n')
#: A findings cell as the verdict table writes it: ``reproduced (+2.0%, 15 seeds)``.
CELL = re.compile(r"(?P<verdict>[a-z ]+) \((?P<effect>[^,]+), (?P<seeds>\d+) seeds\)")
#: The verdicts that decide a cell (the others: inconclusive, or still open).
DECIDED = ("reproduced", "not reproduced", "equivalent")
CLOSE = "<!-- /ledger -->"


def block_study(match: re.Match[str]) -> tuple[list[str], dict[str, Any]]:
    """(config files, --config overrides) of a block's opening marker."""
    only = match.group("only")
    overrides = {"study": {"only": only.split()}} if only else {}
    return match.group("configs").split(), overrides


@dataclass(frozen=True)
class StudyState:
    """What the committed ledger of one study says: its folder, its run records and their bytes, each recomputed
    round's markdown lines, the findings page's verdict table (empty before the last round) and why the
    recomputation stopped early (None when it did not)."""

    ledger: Path
    records: list[dict[str, Any]]
    size: int
    rounds: list[str]
    verdicts: list[str]
    stopped: str | None


@functools.cache
def study_state(configs: tuple[str, ...], overrides: str) -> StudyState:
    """:class:`StudyState` of the study ``configs`` with the ``--config`` ``overrides`` (JSON), recomputed from its
    ledger once per process (a README block and a docs block of one study share it)."""
    from curricula.pipeline.study import study_plan_of
    from curricula.study.recompute import recompute

    plan = study_plan_of(list(configs), json.loads(overrides))
    ledger = Ledger(plan.layout.study_ledger)
    with tempfile.TemporaryDirectory() as tmp:
        done = recompute(plan, tmp)
        rounds = rounds_markdown([read_round(p) for p in done.rounds])
        page = Path(done.findings["findings"]).read_text(encoding="utf-8") if done.findings else ""
    return StudyState(Path(plan.layout.study_ledger), ledger.records(), sum(p.stat().st_size for p in ledger.paths()),
                      rounds, verdict_table(page) if page else [], done.stopped)


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


def decided_cells(verdicts: list[str]) -> tuple[int, dict[str, list[str]]]:
    """(cells in the verdict table, {verdict: ["<claim>[ on <dataset>], <effect>", ...]} of the decided ones; the
    dataset is named where the table has several)."""
    if not verdicts:
        return 0, {}
    datasets = [c.strip() for c in verdicts[0].strip("|").split("|")][2:]
    cells, decided = 0, {}
    for row in verdicts[2:]:
        claim, *values = [c.strip() for c in row.strip("|").split("|")][1:]
        for dataset, value in zip(datasets, values):
            match = CELL.fullmatch(value)
            cells += match is not None
            if match and match["verdict"] in DECIDED:
                where = f" on {dataset}" if len(datasets) > 1 else ""
                decided.setdefault(match["verdict"], []).append(f"{claim}{where}, {match['effect']}")
    return cells, decided


def summary_text(configs: list[str], overrides: Mapping[str, Any]) -> str:
    """A summary block's paragraph: the study's runs and core-hours, its decided cells and the cost of each."""
    state = study_state(tuple(configs), json.dumps(overrides, sort_keys=True))
    costs = ledger_costs(state.records)
    hours = float(costs["core_hours"].sum()) if costs.height else 0.0
    text = (f"From the committed ledger `{state.ledger}` (regenerated by `python -m tools.ledger_docs`): "
            f"{len(state.records)} runs on {', '.join(costs['dataset'].to_list()) or 'no dataset'}, "
            f"{hours:.2f} core-hours of training and evaluation.")
    cells, decided = decided_cells(state.verdicts)
    if not cells:
        why = f": {state.stopped}" if state.stopped else ""
        return "\n".join(wrap(f"{text} The rounds have not reached their last look{why}.")) + "\n"
    count = sum(map(len, decided.values()))
    text += f" Its rounds decided {count} of its {cells} cells"
    text += f", {hours / count:.2f} core-hours per decided cell." if count else "."
    for verdict, items in decided.items():
        text += f" {verdict.capitalize()} ({len(items)}): {'; '.join(items)}."
    return "\n".join(wrap(text)) + "\n"


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
        text_of = summary_text if match.group("summary") else block_text
        out += [text[pos:match.end()], "\n", text_of(*block_study(match)), "\n"]
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
    """Regenerate (or with ``--check`` compare) the ledger blocks of README.md and docs/*.md; exit 1 when checking finds a
    difference."""
    parser = argparse.ArgumentParser(prog="python -m tools.ledger_docs", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs")
    args = parser.parse_args(argv)
    changed = regenerate_docs([Path("README.md"), *sorted(Path("docs").rglob("*.md"))], check=args.check)
    verb = "differ from the ledger" if args.check else "regenerated"
    print(f"{len(changed)} page(s) {verb}" + "".join(f"\n  {p}" for p in changed))
    return 1 if args.check and changed else 0


__all__ = ["CELL", "CLOSE", "DECIDED", "OPEN", "StudyState", "block_study", "block_text", "decided_cells", "main",
           "regenerate", "regenerate_docs", "study_state", "summary_text", "verdict_table", "wrap"]

if __name__ == "__main__":
    sys.exit(main())
