"""Where the dense model G ranks each context's true reply, before and after fine-tuning G (issue 30 item 2).

HCL (Su et al. 2021) draws its negatives from G's top-k neighbours of each context, so how well G ranks the true
reply says how close those negatives are to it. Given two finished run folders (``ROOT_A`` with G as shipped,
``ROOT_B`` with G fine-tuned, ``dense.finetune.enabled: true``), this reads each one's
``results/<dataset>/dense/neighbors.parquet`` (lazily: only the rows of relevant pairs) and ingest queries and
qrels, and prints one Markdown table per split, before and after side by side
(:func:`curricula.retrieval.dense.positive_ranks`, :func:`curricula.retrieval.dense.positive_rank_summary`; rule
``dense_positive_ranks`` logs the same figures for one run).

Ranks are G's: 1 = G's most similar response among the context's split. The median counts a true reply outside
the top k as rank k + 1 (shown as "> k" when it lands there). k is the deepest rank in each neighbours table
(``dense.neighbors_k``, or the split's pool when that is smaller) unless ``--k`` says otherwise. Asserts nothing.

    .venv/bin/python analyses/g_rank.py --before ROOT_A --after ROOT_B [--dataset chitchat] [--relevant-min 1] [--k K]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.plumbing.contracts import NEIGHBORS, QRELS, QUERIES, read_table, scan_table  # noqa: E402
from curricula.plumbing.layout import Layout  # noqa: E402
from curricula.retrieval.dense import positive_rank_summary, positive_ranks  # noqa: E402

#: (column, row label, kind) of the printed table, in order
ROWS = [
    ("queries", "contexts with a true reply", "count"),
    ("median_rank", "median rank of the true reply (1 = best)", "rank"),
    ("at_1", "true reply at rank 1", "share"),
    ("top_10", "within top 10", "share"),
    ("top_100", "within top 100", "share"),
    ("top_k", "within top k", "share"),
    ("outside_k", "outside top k", "share"),
]


def summarize(root: Path, dataset: str, relevant_min: int = 1, k: int | None = None) -> pl.DataFrame:
    """The ``POSITIVE_RANKS`` summary per split of one run folder (``root/results/<dataset>/``)."""
    res = Layout(str(root / "results"), dataset)
    nb = scan_table(res.dense()["neighbors"], NEIGHBORS)
    if k is None:
        k = nb.select(pl.col("rank").max()).collect(engine="streaming").item()
        if k is None:
            raise SystemExit(f"{res / 'dense' / 'neighbors.parquet'} is empty")
    queries = read_table(res.data("queries"), QUERIES, columns=["qid", "split"])
    qrels = read_table(res.data("qrels"), QRELS)
    return positive_rank_summary(positive_ranks(nb, qrels, queries, relevant_min), int(k))


def cell(row: dict | None, column: str, kind: str) -> str:
    if row is None:
        return "-"
    value = row[column]
    if kind == "count":
        return f"{value:,}"
    if kind == "rank":
        return f"> {row['k']:,}" if value > row["k"] else f"{value:,g}"
    return f"{100 * value:.1f}%"


def change(before: dict | None, after: dict | None, column: str, kind: str) -> str:
    if before is None or after is None or kind == "count":
        return ""
    if kind == "share":
        return f"{100 * (after[column] - before[column]):+.1f} pt"
    if before[column] > before["k"] or after[column] > after["k"]:
        return ""  # a median outside the top k has no size
    return f"{after[column] - before[column]:+,g}"


def markdown(before: pl.DataFrame, after: pl.DataFrame) -> str:
    """One Markdown table per split (train, dev, test order), rows of :data:`ROWS`, columns before / after / change."""
    by_split = [{r["split"]: r for r in t.iter_rows(named=True)} for t in (before, after)]
    splits = [s for s in ("train", "dev", "test") if s in by_split[0] or s in by_split[1]]
    out = []
    for split in splits:
        b, a = by_split[0].get(split), by_split[1].get(split)
        ks = "/".join(sorted({f"{r['k']:,}" for r in (b, a) if r is not None}))
        out += [f"### {split} (k = {ks}; outside the top k counts as k + 1 in the median)", "",
                "| | before | after | change |", "|---|---:|---:|---:|"]
        out += [f"| {label} | {cell(b, col, kind)} | {cell(a, col, kind)} | {change(b, a, col, kind)} |"
                for col, label, kind in ROWS]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="run folder with G as shipped (holds results/)")
    ap.add_argument("--after", type=Path, required=True, help="run folder with G fine-tuned (holds results/)")
    ap.add_argument("--dataset", default="chitchat", help="dataset name under results/ (default chitchat)")
    ap.add_argument("--relevant-min", type=int, default=1, help="qrels rel counted as relevant (default 1)")
    ap.add_argument("--k", type=int, default=None, help="neighbour list depth (default: each table's deepest rank)")
    args = ap.parse_args(argv)
    before = summarize(args.before, args.dataset, args.relevant_min, args.k)
    after = summarize(args.after, args.dataset, args.relevant_min, args.k)
    print(f"G's rank of the true reply, {args.dataset}: before = {args.before}, after = {args.after}\n")
    print(markdown(before, after))
    counts = [dict(zip(t["split"], t["queries"])) for t in (before, after)]
    if counts[0] != counts[1]:
        print(f"note: the two runs rank different contexts ({counts[0]} vs {counts[1]} per split)")


if __name__ == "__main__":
    main()
