"""A dataset of a results tree as PyTerrier frames: topics, qrels, the candidates with BM25's scores, and files.

PyTerrier's frames are pandas frames with fixed column names: topics ``qid, query``; qrels ``qid, docno, label``;
a result frame ``qid, docno, score, rank`` (``rank`` 0 = best, PyTerrier's convention), with the query's columns
and the document's ``text`` beside them when a re-ranker needs them. Here a query's ``query`` is the pipeline's
query text (a dialogue context is its turns joined by newlines) and, for a dialogue dataset (a query with more than
one turn), ``turns`` holds the turns as a list. The candidates are the pairs the evaluate stage re-ranks
(:func:`curricula.data.ingest.candidate_pairs`: the dataset's candidate list plus any judged relevant document), each
with Lucene's BM25 score (``bm25/candidate_scores.parquet``), so BM25 there is the ``bm25`` reference ranker.
Nothing here imports PyTerrier: the frames are pandas, the files are Parquet (read with ``pd.read_parquet``) and
TREC text (``pt.io.read_qrels``, ``pt.io.read_results``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import polars as pl

from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest
from curricula.evaluation.metrics import trec_order
from curricula.evaluation.rerank import ranked, reference_scores
from curricula.plumbing.atomic import write_file_atomically, write_text_atomically
from curricula.plumbing.contracts import write_trec_run
from curricula.plumbing.layout import Layout

SPLITS = ("train", "dev", "test")
#: the run tag of the exported BM25 runs (the evaluate stage's tag of the same reference)
BM25_TAG = "bm25"


def is_dialogue(queries: pl.DataFrame) -> bool:
    """Whether any query is a dialogue context of more than one turn (then the frames carry ``turns``)."""
    return bool((queries["turns"].list.len() > 1).any())


def topics_table(queries: pl.DataFrame, split: str, turns: bool) -> pl.DataFrame:
    """PyTerrier topics of one split, sorted by qid: ``qid, query`` (the query text) and, with ``turns``, the
    dialogue's turns as a list."""
    chosen = queries.filter(pl.col("split") == split).sort("qid")
    return chosen.select("qid", pl.col("text").alias("query"), *(["turns"] if turns else []))


def qrels_table(qrels: pl.DataFrame, queries: pl.DataFrame, split: str) -> pl.DataFrame:
    """PyTerrier qrels of one split's queries: ``qid, docno, label`` with the dataset's grades (trec_eval counts a
    label >= 1 as relevant, so a dataset with ``relevant_min`` above 1 passes ``AP(rel=relevant_min)`` to
    ``pt.Experiment``), sorted by qid, docno."""
    qids = queries.filter(pl.col("split") == split)["qid"].implode()
    chosen = qrels.filter(pl.col("qid").is_in(qids)).sort("qid", "docid")
    return chosen.select("qid", pl.col("docid").alias("docno"), pl.col("rel").cast(pl.Int64).alias("label"))


def candidates_table(data: Mapping[str, pl.DataFrame], bm25_scores: str | Path, split: str, turns: bool,
                     relevant_min: int = 1) -> pl.DataFrame:
    """The candidates the evaluate stage re-ranks on one split as a PyTerrier result frame: ``qid, query[, turns],
    docno, text, score, rank``, ``score`` Lucene's BM25 score of the pair (higher = more relevant) and ``rank`` its
    0-based place in trec_eval's order (score descending, ties by docno descending), sorted by qid, rank."""
    pairs = candidate_pairs(data, splits=(split,), relevant_min=relevant_min)
    scored = pairs.join(reference_scores(bm25_scores, pairs), on=["qid", "docid"])
    ordered = trec_order(scored).with_columns(rank=pl.col("_pos").cast(pl.Int64) - 1)
    columns: list[str | pl.Expr] = ["qid", pl.col("context").alias("query")]
    if turns:
        ordered = ordered.join(data["queries"].select("qid", "turns"), on="qid", how="left")
        columns.append("turns")
    return ordered.select(*columns, pl.col("docid").alias("docno"), pl.col("response").alias("text"), "score",
                          "rank").sort("qid", "rank")


@dataclass(frozen=True)
class Frames:
    """One split of a dataset as PyTerrier frames (pandas): ``topics``, ``qrels`` and ``candidates`` (BM25 on the
    evaluate stage's candidates, :func:`candidates_table`)."""

    topics: pd.DataFrame
    qrels: pd.DataFrame
    candidates: pd.DataFrame


def read_data(root: str | Path) -> dict[str, pl.DataFrame]:
    """The ingest tables of a dataset's results folder ``root`` (``results/<dataset>``)."""
    layout = Layout.at(root)
    return read_ingest({name: layout.data(name) for name in INGEST_TABLES})


def split_tables(root: str | Path, split: str = "test", relevant_min: int = 1) -> dict[str, pl.DataFrame]:
    """{topics, qrels, candidates} of one split of the results folder ``root`` as polars frames with PyTerrier's
    column names (:func:`topics_table`, :func:`qrels_table`, :func:`candidates_table`)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    data = read_data(root)
    turns = is_dialogue(data["queries"])
    bm25 = Layout.at(root).bm25()["candidate_scores"]
    return {"topics": topics_table(data["queries"], split, turns),
            "qrels": qrels_table(data["qrels"], data["queries"], split),
            "candidates": candidates_table(data, bm25, split, turns, relevant_min)}


def read_frames(root: str | Path, split: str = "test", relevant_min: int = 1) -> Frames:
    """One split of the results folder ``root`` (``results/<dataset>``) as PyTerrier frames (pandas), the test
    split by default: the queries, judgements and candidates every ranker of the pipeline was evaluated on."""
    tables = split_tables(root, split, relevant_min)
    return Frames(**{name: frame.to_pandas() for name, frame in tables.items()})


def trec_qrels_text(qrels: pl.DataFrame) -> str:
    """TREC qrels lines ``qid 0 docno label`` of a PyTerrier qrels table (what ``pt.io.read_qrels`` reads)."""
    lines = qrels.select(pl.format("{} 0 {} {}", "qid", "docno", "label")).to_series().to_list()
    return "".join(f"{line}\n" for line in lines)


def export_frames(root: str | Path, out_dir: str | Path, splits: Sequence[str] = SPLITS,
                  relevant_min: int = 1) -> dict[str, Path]:
    """Write every split of the results folder ``root`` into ``out_dir`` as files PyTerrier reads, atomically:
    ``<split>.topics.parquet``, ``<split>.candidates.parquet`` (``pd.read_parquet`` gives the frames of
    :func:`read_frames`), ``<split>.qrels`` (TREC qrels, ``pt.io.read_qrels``) and ``<split>.bm25.res`` (BM25's run
    of the candidates in TREC format, ``pt.io.read_results``; for the test split the same run as
    ``references/bm25/test.run``). Returns {``<split>.<kind>``: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for split in splits:
        tables = split_tables(root, split, relevant_min)
        for kind in ("topics", "candidates"):
            frame = tables[kind]
            written[f"{split}.{kind}"] = write_file_atomically(out / f"{split}.{kind}.parquet", frame.write_parquet)
        written[f"{split}.qrels"] = write_text_atomically(out / f"{split}.qrels", trec_qrels_text(tables["qrels"]))
        scores = tables["candidates"].select("qid", pl.col("docno").alias("docid"), "score")
        written[f"{split}.bm25"] = write_trec_run(ranked(scores), out / f"{split}.bm25.res", BM25_TAG)
    return written
