"""How the findings page shows a cell's verdict (the verdict matrix) and how the verdicts changed since the last
study (``study.previous``): each cell of this study against the same cell of an earlier study's findings table, both
as their verdict matrices show them (:func:`shown_verdicts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from curricula.plumbing.errors import InputFormatError
from curricula.statistics.verdicts import INCONCLUSIVE

NOT_SURVIVING = "°"  # after a decided verdict that does not survive the multiplicity adjustment


def signed(value: float, digits: int = 4) -> str:
    """``+0.0123`` / ``−0.0123`` (a true minus sign) to ``digits`` decimals; ``–`` when not finite."""
    return "–" if not math.isfinite(value) else f"{value:+.{digits}f}".replace("-", "−")


def verdict_cell(row: Mapping[str, Any]) -> str:
    """``reproduced (+2.5%)``: the verdict word and the relative effect, then :data:`NOT_SURVIVING` when the
    verdict is decided but does not survive the multiplicity adjustment (a row without ``survives`` gets none). A
    cell judged in rounds shows its sequential verdict and the seeds of its look instead, ``reproduced (+2.5%, 10
    seeds)``, without the mark (the adjustment is of the fixed tests at those seeds)."""
    pct = row["effect_pct"]
    effect = f"{signed(pct, 1)}%" if pct is not None and math.isfinite(pct) else None
    if row.get("sequential_verdict") is not None:
        seeds = f"{row['look_seeds']} seeds"
        inside = f"{effect}, {seeds}" if effect else seeds
        return f"{row['sequential_verdict']} ({inside})"
    cell = f"{row['verdict']} ({effect})" if effect else row["verdict"]
    return cell + NOT_SURVIVING if fails_adjustment(row) else cell


def fails_adjustment(row: Mapping[str, Any]) -> bool:
    """Whether a row's verdict is decided but does not survive the multiplicity adjustment (the page marks it
    :data:`NOT_SURVIVING`); a row without ``survives`` does not fail."""
    return row["verdict"] != INCONCLUSIVE and row.get("survives") is False


@dataclass(frozen=True)
class CellVerdict:
    """One (claim, dataset) cell's verdict as a study's findings table or its latest round give it: the claim's
    ``id`` and ``text``, the ``dataset``, the ``verdict`` (the sequential one where the cell is judged in rounds,
    ``continue`` while a round leaves it open), the ``seeds`` it rests on, its ``effect`` as text (the relative
    effect ``+2.0%`` from a findings table, the difference ``Δ +0.0123`` from a round), how a verdict matrix
    shows it (``shown``) and whether it is judged in rounds (``sequential``; a fixed-seed active-learning cell is
    not)."""

    id: str
    text: str
    dataset: str
    verdict: str
    seeds: int
    effect: str
    shown: str
    sequential: bool = True


def findings_cells(table: pl.DataFrame, claims: Sequence[Mapping[str, Any]]) -> list[CellVerdict]:
    """The cells of a findings table (findings.parquet) in its row order, each matched to its claim of ``claims``
    (the study's, with ``id``) by the claim's text and arms."""
    ids = {(c["claim"], c["experiment"], c["against"]): c["id"] for c in claims}
    out = []
    for r in table.iter_rows(named=True):
        sequential = r.get("sequential_verdict")
        pct = r["effect_pct"]
        effect = f"{signed(pct, 1)}%" if pct is not None and math.isfinite(pct) else "–"
        out.append(CellVerdict(ids[(r["claim"], r["experiment"], r["against"])], r["claim"], r["dataset"],
                               sequential or r["verdict"], int(r["look_seeds"] if sequential else r["seeds"]), effect,
                               verdict_cell(r), sequential is not None))
    return out


def round_cells(record: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> list[CellVerdict]:
    """The cells of a round's record (:func:`curricula.study.rounds.read_round`) in the claims' order: each cell's
    verdict after that round and the difference of its last look's test."""
    text = {c["id"]: c["claim"] for c in claims}
    out = []
    for (claim, dataset), decision in record["decisions"].items():
        effect = f"Δ {signed(record['tests'][(claim, dataset)][-1][0])}"
        out.append(CellVerdict(claim, text[claim], dataset, decision.verdict, decision.seeds, effect,
                               f"{decision.verdict} ({effect}, {decision.seeds} seeds)"))
    order = list(text)
    return sorted(out, key=lambda c: order.index(c.id))


#: The columns a previous study's findings table (findings.parquet or findings.csv) needs for :func:`verdict_changes`.
PREVIOUS_COLUMNS = ("paper", "claim", "dataset", "verdict", "seeds")
#: How a cell compares with the last study (:func:`verdict_changes`'s ``change``).
SAME, CHANGED, NEW, GONE = "same", "changed", "new", "gone"


def shown_verdicts(table: pl.DataFrame) -> pl.DataFrame:
    """Each cell's verdict as the verdict matrix reads it, without the effect: (paper, claim, dataset, verdict,
    seeds). A cell judged in rounds shows its sequential verdict and the seeds of its look; a fixed-seed cell its
    verdict, marked :data:`NOT_SURVIVING` when decided but not surviving the multiplicity adjustment, and its seeds.
    A table without the optional columns (``sequential_verdict``, ``look_seeds``, ``survives``) reads as fixed-seed
    and surviving."""
    rows = []
    for r in table.iter_rows(named=True):
        if r.get("sequential_verdict") is not None:
            rows.append((r["paper"], r["claim"], r["dataset"], r["sequential_verdict"], r["look_seeds"]))
            continue
        rows.append((r["paper"], r["claim"], r["dataset"],
                     r["verdict"] + (NOT_SURVIVING if fails_adjustment(r) else ""), r["seeds"]))
    return pl.DataFrame(rows, schema={"paper": pl.String, "claim": pl.String, "dataset": pl.String,
                                      "verdict": pl.String, "seeds": pl.Int64}, orient="row")


def read_previous_findings(path: str | Path) -> pl.DataFrame:
    """A previous study's findings table, the ``findings.parquet`` or ``findings.csv`` its ``report_study`` wrote
    (study.previous), read for :func:`verdict_changes`; a file that is missing, of another format or without the
    columns :data:`PREVIOUS_COLUMNS` is an :class:`~curricula.plumbing.errors.InputFormatError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise InputFormatError(path, None, "study.previous: no such file (a findings.parquet or findings.csv of an "
                                           "earlier study)")
    if path.suffix not in (".parquet", ".csv"):
        raise InputFormatError(path, None, f"study.previous: expected a findings .parquet or .csv, got {path.suffix!r}")
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputFormatError(path, None, f"study.previous: not a readable {path.suffix[1:]} table ({err})") from None
    missing = [c for c in PREVIOUS_COLUMNS if c not in frame.columns]
    if missing:
        raise InputFormatError(path, None, f"study.previous: not a findings table: no column {missing} (it has "
                                           f"{frame.columns})")
    return frame


def verdict_changes(table: pl.DataFrame, previous: pl.DataFrame) -> pl.DataFrame:
    """This study's verdicts (``table``) cell by cell against a previous study's (``previous``), both as the verdict
    matrix shows them (:func:`shown_verdicts`), matched on (paper, claim, dataset): ``previous_verdict``,
    ``previous_seeds``, ``verdict``, ``seeds`` and ``change``: :data:`SAME` or :data:`CHANGED` verdict, :data:`NEW`
    (no such cell before) or :data:`GONE` (not in this study). In this study's cell order, gone cells last."""
    key = ["paper", "claim", "dataset"]
    now = shown_verdicts(table).with_row_index("order")
    before = shown_verdicts(previous).rename({"verdict": "previous_verdict", "seeds": "previous_seeds"})
    joined = now.join(before, on=key, how="full", coalesce=True)
    change = (pl.when(pl.col("verdict").is_null()).then(pl.lit(GONE))
              .when(pl.col("previous_verdict").is_null()).then(pl.lit(NEW))
              .when(pl.col("verdict") == pl.col("previous_verdict")).then(pl.lit(SAME))
              .otherwise(pl.lit(CHANGED)))
    return (joined.with_columns(change=change).sort("order", nulls_last=True, maintain_order=True)
            .select(*key, "previous_verdict", "previous_seeds", "verdict", "seeds", "change"))


def verdict_changes_markdown(changes: pl.DataFrame, previous: str = "") -> list[str]:
    """The findings page's section on the verdicts that changed since the last study (a :func:`verdict_changes`
    table read from ``previous``): the counts, then a row per changed, new or gone cell."""
    counts = {c: n for c, n in changes.group_by("change").len().iter_rows()}
    source = f" (`{previous}`, study.previous)" if previous else ""
    lines = ["## Verdicts against the last study", "",
             f"Against the last study's findings{source}, cell by cell as each verdict matrix shows it (a sequential "
             f"verdict with the seeds of its look): {counts.get(CHANGED, 0)} changed, {counts.get(SAME, 0)} the "
             f"same, {counts.get(NEW, 0)} new, {counts.get(GONE, 0)} no longer tested.", ""]
    shown = changes.filter(pl.col("change") != SAME)
    if shown.is_empty():
        return lines
    lines += ["| paper | claim | dataset | last study (seeds) | this study (seeds) | change |",
              "|---|---|---|---|---|---|"]

    def cell(verdict: str | None, seeds: int | None) -> str:
        return "–" if verdict is None else f"{verdict} ({seeds})"

    for r in shown.iter_rows(named=True):
        before = cell(r["previous_verdict"], r["previous_seeds"])
        lines.append(f"| {r['paper']} | {r['claim']} | {r['dataset']} | {before} | {cell(r['verdict'], r['seeds'])} | "
                     f"{r['change']} |")
    return lines + [""]
