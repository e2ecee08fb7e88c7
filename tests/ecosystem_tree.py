"""A tiny results tree built in-process for the ecosystem tests (no Snakemake, no JVM): real chitchat queries and
candidates written as the ingest stage writes them, stand-in BM25 scores, dense vectors and neighbours, difficulty
tables, curricula, and trained runs' ``config.json`` files, each at the path the results layout gives it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.curriculum import ordering
from curricula.data import chitchat
from curricula.data.ingest import INGEST_TABLES, candidate_pairs
from curricula.difficulty import difficulty_spec, difficulty_table
from curricula.experiments.spec import TrainSpec, parse_train_spec, spec_record
from curricula.experiments.specs import resolve_ranker
from curricula.plumbing.contracts import CANDIDATE_SCORES, NEIGHBORS, VECTORS, write_table
from curricula.plumbing.layout import Layout
from curricula.plumbing.row_groups import write_grouped_table

CAPS = {"train": 16, "dev": 4, "test": 6}
#: the ranker every run here names (a 1-layer, mean-pooled cut of the packaged MiniLM, fp32, short pairs)
CROSS_ENCODER = {"ranker": "cross_encoder", "model": "minilm", "layers": 1, "pooling": "mean", "max_length": 32,
                 "precision": "fp32", "device": "cpu", "score_batch_size": 16}


def tiny_data(seed: int = 11) -> dict[str, pl.DataFrame]:
    """The ingest tables of a few real chitchat dialogues (contexts of up to three turns)."""
    data = chitchat.load({}, max_instances=CAPS, seed=seed, max_context_turns=3)
    return {name: frame for name, (frame, _) in data.tables().items()}


def write_ingest(layout: Layout, data: Mapping[str, pl.DataFrame]) -> None:
    for name, spec in INGEST_TABLES.items():
        write_table(data[name], layout.data(name), spec)


def overlap_scores(data: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """A stand-in for Lucene's BM25 candidate scores: the words a context and a response share, for every
    candidate pair of every split."""
    pairs = candidate_pairs(data, splits=("train", "dev", "test"))
    shared = [float(len(set(c.lower().split()) & set(r.lower().split())))
              for c, r in zip(pairs["context"].to_list(), pairs["response"].to_list())]
    return pairs.select("qid", "docid").with_columns(score=pl.Series(shared, dtype=pl.Float64))


def write_dense(layout: Layout, data: Mapping[str, pl.DataFrame], dim: int = 8, depth: int = 12) -> None:
    """Seeded unit vectors of every query and doc (a relevant doc's near its query's, so that G(c, r+) is high and
    HCL's guard drops only some neighbours), and each training query's ``depth`` nearest docs of the training pool
    by inner product (the neighbour table's score), as the dense stage writes them."""
    rng = np.random.default_rng(7)

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)

    queries = dict(zip(data["queries"]["qid"].to_list(), unit(rng.normal(size=(data["queries"].height, dim)))))
    docs = dict(zip(data["docs"]["docid"].to_list(), unit(rng.normal(size=(data["docs"].height, dim)))))
    for q, d in data["qrels"].filter(pl.col("rel") > 0).select("qid", "docid").iter_rows():
        docs[d] = unit(queries[q] + 0.5 * rng.normal(size=dim))
    for kind, vectors in (("queries", queries), ("docs", docs)):
        frame = pl.DataFrame({"id": list(vectors), "vector": pl.Series(np.stack(list(vectors.values())),
                                                                       dtype=pl.Array(pl.Float32, dim))})
        write_table(frame, layout.dense_vectors(kind), VECTORS)
    train = data["queries"].filter(pl.col("split") == "train")["qid"].to_list()
    pool = sorted(set(candidate_pairs(data)["docid"].to_list()))
    rows = []
    for q in train:
        g = np.array([float(np.dot(queries[q], docs[d])) for d in pool])
        for rank, i in enumerate(np.argsort(-g, kind="stable")[:depth]):
            rows.append((q, pool[i], rank + 1, float(g[i])))
    frame = pl.DataFrame(rows, schema=dict(NEIGHBORS.columns), orient="row").sort("qid", "rank")
    write_grouped_table([frame], layout.dense()["neighbors"], NEIGHBORS, by="qid", size=4)


def pair_heuristic(data: Mapping[str, pl.DataFrame], name: str = "recip") -> pl.DataFrame:
    """A stand-in for one of MacAvaney's pair-level tables (``recip``): a seeded h in [0, 1] per training pair
    (``<name>_raw``) and the difficulty 1 - h for a relevant pair, h for a negative (``<name>``)."""
    pairs = candidate_pairs(data)
    h = np.random.default_rng(3).random(pairs.height)
    rel = pairs["rel"].to_numpy() > 0
    return pairs.select("qid", "docid", pl.col("rel").cast(pl.Int32)).with_columns(
        pl.Series(f"{name}_raw", h), pl.Series(name, np.where(rel, 1.0 - h, h)))


def write_difficulty(layout: Layout, data: Mapping[str, pl.DataFrame], shard_size: int = 7) -> None:
    """The ``u_words`` (query level) and a stand-in ``recip`` (pair level) difficulty tables, and the ``u_words``
    curriculum in shards of ``shard_size``."""
    table = difficulty_table(candidate_pairs(data), data["queries"], data["docs"], ["u_words"], seed=5)
    write_table(table, layout.difficulty_function("u_words"), difficulty_spec(["u_words"]))
    write_table(pair_heuristic(data), layout.difficulty_function("recip"), difficulty_spec(["recip"]))
    ordered = ordering.curriculum_order(ordering.training_instances(table, "u_words"), seed=0)
    ordering.write_curriculum(ordered, layout.curriculum("u_words"), shard_size)


def write_run(layout: Layout, experiment: str, seed: int, values: Mapping[str, Any]) -> TrainSpec:
    """A trained run's ``config.json`` (as the train stage writes it) of the run mapping ``values`` over
    :data:`CROSS_ENCODER`; returns its spec."""
    spec = parse_train_spec(resolve_ranker({**CROSS_ENCODER, **values}))
    path = Path(layout.train(experiment, seed)["config"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"seed": seed, "spec": spec_record(spec)}, indent=2, default=str))
    return spec


def tiny_vectors(path: Path, dim: int = 8) -> Path:
    """A word-vector file in fastText's ``.vec`` format holding a few words (the other word pieces start seeded):
    small word embeddings for the fast rankers, so that a test scores them in a fraction of a second."""
    rng = np.random.default_rng(0)
    words = ["i", "you", "the", "a", "to", "is", "what", "do", "that", "it"]
    lines = [f"{len(words)} {dim}", *(f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=dim)) for w in words)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build_tree(root: Path) -> tuple[Layout, dict[str, pl.DataFrame]]:
    """The whole tiny tree under ``root`` (``<root>/results/tiny``): its layout and ingest frames."""
    layout = Layout(results=str(root / "results"), dataset="tiny")
    data = tiny_data()
    write_ingest(layout, data)
    write_table(overlap_scores(data), layout.bm25()["candidate_scores"], CANDIDATE_SCORES)
    return layout, data
