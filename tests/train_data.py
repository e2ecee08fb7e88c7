"""The few real chitchat instances, training knobs and helpers that the training tests share (tests/test_train.py,
tests/test_negatives.py, tests/test_train_runs.py; also tests/test_difficulty.py and tests/test_tuning.py). ``data``
and ``table`` are module-scoped fixtures: a test module imports them by name, and pytest finds them there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curricula.curriculum import ordering as cur
from curricula.curriculum.negatives import NegativeSampler, resolve_negatives
from curricula.data import chitchat
from curricula.data.ingest import candidate_pairs
from curricula.difficulty import difficulty_table
from curricula.experiments.spec import TrainSpec, parse_train_spec
from curricula.experiments.specs import merge_experiment, resolve_ranker
from curricula.plumbing.contracts import NEIGHBORS


CAPS = {"train": 40, "dev": 8, "test": 8}
TRAIN = dict(model="minilm", layers=1, max_length=32, steps=6, batch_size=4, lr=1e-4, eps=1e-8, weight_decay=0.0,
             warmup=0.1, optimizer="adamw", loss="pointwise_ce", margin=1.0,
             negatives={"mode": "random", "m": 1, "depth": 100, "pacing": None}, eval_every=3, eval_metric="AP",
             dev_queries=None, checkpoint_every=2, score_batch_size=64, device="cpu", precision="fp32", threads=2)


@pytest.fixture(scope="module")
def data() -> dict[str, pl.DataFrame]:
    d = chitchat.load({}, max_instances=CAPS, seed=11, max_context_turns=3)
    return {name: df for name, (df, _) in d.tables().items()}


@pytest.fixture(scope="module")
def table(data) -> pl.DataFrame:
    pairs = candidate_pairs(data)
    return difficulty_table(pairs, data["queries"], data["docs"], ["random", "u_words"], seed=5)


def folder_for(table: pl.DataFrame, scoring: str, root: Path, shard_size: int = 7, seed: int = 0) -> Path:
    out = root / scoring
    cur.write_curriculum(cur.curriculum_order(cur.training_instances(table, scoring), seed), out, shard_size)
    return out


def sampler(data, spec, **kw) -> NegativeSampler:
    return NegativeSampler(resolve_negatives(spec, 100), queries=data["queries"], docs=data["docs"],
                           qrels=data["qrels"], candidates=data["candidates"], seed=4, **kw)


def relevant_of(data) -> dict[str, set[str]]:
    return {q: set(g["docid"]) for (q,), g in data["qrels"].filter(pl.col("rel") > 0).group_by("qid")}


def train_qids(data) -> list[str]:
    return data["queries"].filter(pl.col("split") == "train")["qid"].sort().to_list()


def train_pool(data) -> list[str]:
    """The training response pool's docids, sorted (the train queries' candidates)."""
    return sorted(set(data["candidates"].join(data["queries"].filter(pl.col("split") == "train"), on="qid")["docid"]))


def guard_fixture(data, n_stored: int = 30, dim: int = 8, trained: bool = True):
    """Random dense vectors for the train queries and pool docs, and the exact top-``n_stored`` neighbour table
    they give (score = inner product, as the dense stage writes it). ``trained``: each query vector points at one
    sum of its relevant docs (a G that ranks the true reply near the top), else it is random too."""
    qids = train_qids(data)
    pool_docs = train_pool(data)
    rng = np.random.default_rng(9)
    Q, D = rng.standard_normal((len(qids), dim)), rng.standard_normal((len(pool_docs), dim))
    if trained:
        rel, row = relevant_of(data), {d: j for j, d in enumerate(pool_docs)}
        Q = np.stack([4 * sum(D[row[d]] for d in rel[q]) + Q[i] for i, q in enumerate(qids)])
    G = Q @ D.T
    rows = []
    for i, q in enumerate(qids):
        order = np.argsort(-G[i], kind="stable")[:n_stored]
        rows += [(q, pool_docs[j], r + 1, float(G[i, j])) for r, j in enumerate(order)]
    neighbors = pl.DataFrame(rows, schema=dict(NEIGHBORS.columns), orient="row")
    vec = pl.Array(pl.Float32, dim)
    qv = pl.DataFrame({"id": qids, "vector": Q.astype(np.float32)}, schema={"id": pl.String, "vector": vec})
    dv = pl.DataFrame({"id": pool_docs, "vector": D.astype(np.float32)}, schema={"id": pl.String, "vector": vec})
    Q32, D32 = Q.astype(np.float32), D.astype(np.float32)
    g = {(q, d): float(Q32[i] @ D32[j]) for i, q in enumerate(qids) for j, d in enumerate(pool_docs)}
    return neighbors, qv, dv, g


def spec_of(**over) -> dict:
    return merge_experiment(TRAIN, over)


def train_spec(**over) -> TrainSpec:
    """The typed spec of :func:`spec_of`'s run mapping, the ranker's defaults filled (what train_ranker takes)."""
    return parse_train_spec(resolve_ranker(spec_of(**over)))
