"""Every difficulty scoring function of the four papers, computed into one table (``difficulty/difficulty.parquet``).

One row per training (query, candidate) pair: ``qid``, ``docid``, ``rel`` (1 = relevant, i.e. grade >=
``relevant_min``), then for each configured function ``f`` two Float64 columns: ``f_raw``, the value as the paper
defines it, and ``f``, the difficulty in [0, 1] with **1 = hardest**. The instance each paper sorts is recovered
from these rows:

* query-level functions (Penha & Hauff 2020 Table 2, and Su et al. 2021 eq. 2 ``hcl_corpus``) have one value per
  query, repeated on each of its rows; the training sampler takes one row per qid;
* pair-level functions (MacAvaney et al. 2020 eq. 5-11: ``recip``, ``norm``, ``kde``) differ per candidate:
  ``f_raw`` is the heuristic h of the document (reciprocal rank, min-max normalised score, KDE CDF; 1 = ranked
  high by BM25) and ``f`` = 1 - D_point (eq. 6/8/10: D = h for a relevant doc, 1 - h for a non-relevant one; the
  paper's D is an *ease*). The pairwise form D_pair(d+, d-) = (h(d+) - h(d-) + 1) / 2 (eq. 7/9/11) is formed from
  two rows' ``f_raw`` by :func:`curricula.difficulty.macavaney.pairwise`.

Which BM25 list defines rank and score for MacAvaney's functions is ``bm25_list``: ``candidates`` ranks the query's
fixed candidates by their Lucene BM25 scores (the re-ranking pool the ranker trains on); ``run`` uses the BM25 run's
top k (rank null beyond it, as in the paper, where unretrieved positives still get a KDE value from their score).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.difficulty import hcl, penha
from curricula.ingest import candidate_pairs, read_ingest
from curricula.tables import TableSpec

log = logging.getLogger(__name__)

#: function name -> the inputs it needs beyond the ingest tables
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "random": (),
    "turns": (),
    "u_words": (),
    "r_words": (),
    "sigma_sm": (),
    "sigma_bm25": ("candidate_scores",),
    "bert_pred": ("teacher",),
    "bert_loss": ("teacher",),
    "recip": ("candidate_scores", "run"),
    "norm": ("candidate_scores", "run"),
    "kde": ("candidate_scores", "run"),
    "hcl_corpus": ("query_vectors", "doc_vectors"),
}
MACAVANEY = ("recip", "norm", "kde")
BM25_LISTS = ("candidates", "run")


def needed_inputs(functions: Sequence[str], bm25_list: str = "candidates") -> set[str]:
    """The extra tables the configured functions read (the difficulty rule's conditional inputs)."""
    unknown = [f for f in functions if f not in FUNCTIONS]
    if unknown:
        raise ValueError(f"unknown difficulty function(s) {unknown}; known: {list(FUNCTIONS)}")
    out = {name for f in functions for name in FUNCTIONS[f]}
    if bm25_list != "run":
        out.discard("run")
    return out


def difficulty_spec(functions: Sequence[str]) -> TableSpec:
    """The table contract for a given list of functions (column set depends on the config)."""
    cols: dict[str, pl.DataType] = {"qid": pl.String, "docid": pl.String, "rel": pl.Int32}
    for f in functions:
        cols[f"{f}_raw"] = pl.Float64
        cols[f] = pl.Float64
    return TableSpec("difficulty", cols, key=("qid", "docid"))


def bm25_lists(pairs: pl.DataFrame, candidate_scores: pl.DataFrame, run: pl.DataFrame | None,
               bm25_list: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pairs with the doc's ``score`` and ``rank``, the per-query reference list (qid, score)) for MacAvaney.

    ``candidates``: rank among the query's candidates by BM25 score descending, ties by docid ascending (Lucene's
    order). ``run``: rank in the BM25 run (null when not retrieved); the reference is the run's scores.
    """
    if bm25_list not in BM25_LISTS:
        raise ValueError(f"bm25_list must be one of {BM25_LISTS}, got {bm25_list!r}")
    scored = pairs.join(candidate_scores.select("qid", "docid", "score"), on=["qid", "docid"], how="left")
    if bm25_list == "candidates":
        ranked = scored.with_columns(pl.col("score").fill_null(0.0)).sort(
            ["qid", "score", "docid"], descending=[False, True, False]
        ).with_columns(rank=pl.int_range(1, pl.len() + 1).over("qid").cast(pl.Int32))
        out = pairs.join(ranked.select("qid", "docid", "score", "rank"), on=["qid", "docid"], how="left")
        return out, ranked.select("qid", "score")
    if run is None:
        raise ValueError("bm25_list 'run' needs the BM25 run table")
    out = scored.join(run.select("qid", "docid", "rank"), on=["qid", "docid"], how="left")
    ref = run.filter(pl.col("qid").is_in(pairs["qid"].unique().implode())).select("qid", "score")
    return out, ref


def difficulty_table(
    pairs: pl.DataFrame,
    queries: pl.DataFrame,
    docs: pl.DataFrame,
    functions: Sequence[str],
    *,
    seed: int = 42,
    candidate_scores: pl.DataFrame | None = None,
    run: pl.DataFrame | None = None,
    teacher: pl.DataFrame | None = None,
    query_vectors: pl.DataFrame | None = None,
    doc_vectors: pl.DataFrame | None = None,
    bm25_list: str = "candidates",
    sm_words: int = penha.SM_WORDS,
    sm_model: str = "minilm",
) -> pl.DataFrame:
    """The difficulty table (see the module docstring) of ``pairs`` (qid, docid, rel) for ``functions``."""
    needed_inputs(functions, bm25_list)
    base = pairs.select("qid", "docid", pl.col("rel").cast(pl.Int32)).sort("qid", "docid")
    query_level: list[pl.DataFrame] = []
    for f in functions:
        if f == "random":
            qids = base["qid"].unique().sort()
            query_level.append(pl.DataFrame({"qid": qids, "random_raw": penha.random_score(qids, seed)}))
        elif f == "turns":
            query_level.append(penha.turns(queries))
        elif f == "u_words":
            query_level.append(penha.u_words(queries))
        elif f == "r_words":
            query_level.append(penha.r_words(base, docs))
        elif f == "sigma_sm":
            from curricula.hf import input_embeddings, load_tokenizer

            emb = input_embeddings(sm_model).numpy()
            query_level.append(penha.sigma_sm(base, queries, docs, load_tokenizer(sm_model), emb, sm_words))
        elif f == "sigma_bm25":
            query_level.append(penha.sigma_bm25(base, candidate_scores))
        elif f == "bert_pred":
            query_level.append(penha.bert_pred(base, teacher))
        elif f == "bert_loss":
            query_level.append(penha.bert_loss(base, teacher))
        elif f == "hcl_corpus":
            query_level.append(hcl.hcl_corpus(base, query_vectors, doc_vectors))
    out = base
    for frame in query_level:
        name = next(c for c in frame.columns if c.endswith("_raw"))
        f = name.removesuffix("_raw")
        frame = frame.filter(pl.col("qid").is_in(base["qid"].unique().implode())).sort("qid")
        if f not in frame.columns:  # Penha's functions: rank-based difficulty among the training queries
            frame = frame.with_columns(penha.percentile_difficulty(frame[name]).alias(f))
        out = out.join(frame.select("qid", name, f), on="qid", how="left")
    if any(f in MACAVANEY for f in functions):
        from curricula.difficulty import macavaney

        with_bm25, reference = bm25_lists(base, candidate_scores, run, bm25_list)
        heur = macavaney.macavaney_heuristics(with_bm25, reference)
        for f in MACAVANEY:
            if f in functions:
                out = out.join(heur.select("qid", "docid", pl.col(f).alias(f"{f}_raw"),
                                           (1.0 - pl.col(f"{f}_point")).alias(f)), on=["qid", "docid"], how="left")
    ordered = ["qid", "docid", "rel"] + [c for f in functions for c in (f"{f}_raw", f)]
    out = out.select(ordered).sort("qid", "docid")
    missing = {c: out[c].null_count() for c in ordered[3:] if out[c].null_count()}
    if missing:
        raise ValueError(f"difficulty: null values in {missing} (an input table lacks some training pairs)")
    return out


def spearman_matrix(table: pl.DataFrame, functions: Sequence[str]) -> pl.DataFrame:
    """Spearman rank correlation between the difficulty columns over the table's rows (function x function)."""
    from scipy.stats import spearmanr

    cols = [f for f in functions if table[f].n_unique() > 1]
    if len(cols) < 2:
        return pl.DataFrame({"function": cols, **{c: [1.0] for c in cols}})
    rho = spearmanr(table.select(cols).to_numpy()).statistic
    if np.ndim(rho) == 0:  # scipy returns a scalar for two columns
        rho = np.array([[1.0, rho], [rho, 1.0]])
    return pl.DataFrame({"function": cols, **{c: [float(x) for x in rho[:, j]] for j, c in enumerate(cols)}})


#: the config keys of the ``difficulty`` section each function reads (so a knob re-runs only its functions)
FUNCTION_KNOBS: dict[str, tuple[str, ...]] = {
    "sigma_sm": ("sm_words", "sm_model"),
    "recip": ("bm25_list",),
    "norm": ("bm25_list",),
    "kde": ("bm25_list",),
}


def function_knobs(function: str, cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The knobs one function's job depends on: its ``difficulty`` keys, and the seed for ``random`` only."""
    knobs = {k: cfg[k] for k in FUNCTION_KNOBS.get(function, ())}
    if function == "random":
        knobs["seed"] = seed
    return knobs


def difficulty_function_stage(data: Mapping[str, str | Path], out_path: str | Path, function: str,
                              knobs: Mapping[str, Any], relevant_min: int = 1, split: str = "train") -> pl.DataFrame:
    """Rule ``difficulty_function``: one scoring function over the training pairs (qid, docid, rel, f_raw, f).

    ``split="test"`` scores the test pairs instead (rule ``difficulty_test``, for the report's figures of test
    effectiveness by difficulty bucket); rank-based difficulties are then ranks among the test queries.

    ``data`` names the ingest tables (queries, docs, qrels, candidates) and the extra tables this function needs
    (:func:`needed_inputs`); ``knobs`` is :func:`function_knobs`. One job per function means adding a function
    to the config computes only that function, and a function's table changes only when its own inputs do.
    """
    from curricula.tables import CANDIDATE_SCORES, RUN, TEACHER_SCORES, VECTORS, read_table, write_table

    bm25_list = knobs.get("bm25_list", "candidates")
    ingest = read_ingest(data)
    queries, docs = ingest["queries"], ingest["docs"]
    pairs = candidate_pairs(ingest, splits=(split,), relevant_min=relevant_min)
    specs = {"candidate_scores": CANDIDATE_SCORES, "run": RUN, "teacher": TEACHER_SCORES,
             "query_vectors": VECTORS, "doc_vectors": VECTORS}
    extra = {name: read_table(data[name], specs[name]) for name in needed_inputs([function], bm25_list)}
    options = {k: knobs[k] for k in ("sm_words", "sm_model") if k in knobs}
    table = difficulty_table(pairs, queries, docs, [function], seed=knobs.get("seed", 42), bm25_list=bm25_list,
                             **options, **extra)
    write_table(table, out_path, difficulty_spec([function]))
    log.info("difficulty %s (%s): %d pairs of %d queries; difficulty mean %.3f, raw range [%.4g, %.4g]",
             function, split, table.height, table["qid"].n_unique(), table[function].mean(),
             table[f"{function}_raw"].min(), table[f"{function}_raw"].max())
    return table


def combine_difficulty(tables: Sequence[pl.DataFrame], functions: Sequence[str]) -> pl.DataFrame:
    """The one-row-per-training-pair difficulty table from per-function tables (same pairs in each)."""
    if not tables:
        raise ValueError("no difficulty function configured")
    out = tables[0].select("qid", "docid", "rel")
    for f, table in zip(functions, tables):
        if table.height != out.height:
            raise ValueError(f"difficulty {f}: {table.height} rows, expected {out.height} (stale per-function table?)")
        out = out.join(table.select("qid", "docid", f"{f}_raw", f), on=["qid", "docid"], how="left")
    missing = [c for c in out.columns if out[c].null_count()]
    if missing:
        raise ValueError(f"difficulty: per-function tables disagree on the training pairs (nulls in {missing})")
    return out.sort("qid", "docid")


def difficulty_stage(paths: Mapping[str, str | Path], out_path: str | Path, functions: Sequence[str]) -> pl.DataFrame:
    """Rule ``difficulty``: join the per-function tables into ``difficulty/difficulty.parquet``; log Spearman."""
    from curricula.tables import read_table, write_table

    functions = list(functions)
    table = combine_difficulty([read_table(paths[f], difficulty_spec([f])) for f in functions], functions)
    write_table(table, out_path, difficulty_spec(functions))
    log.info("difficulty: %d training pairs of %d queries, functions %s", table.height, table["qid"].n_unique(),
             functions)
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=2, tbl_width_chars=250):
        log.info("Spearman correlation of the difficulties over the training pairs:\n%s",
                 spearman_matrix(table, functions))
    return table
