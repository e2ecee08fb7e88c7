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

Which BM25 list defines MacAvaney's rank and score is the ``bm25_list`` knob
(:func:`curricula.difficulty.macavaney.bm25_lists`). With ``bm25_list: run`` the functions registered with
``run_pairs`` (MacAvaney's) are also scored on the BM25 run's pairs of the training queries
(:func:`scores_run_pairs`), so that an experiment with ``negatives.mode: bm25`` can weigh every negative it draws
(MacAvaney §4.3: negatives from the BM25 top 100); the query-level functions keep the candidate pairs, and the
joined table gives them their query's value on those rows.

Each function is registered once, below, with its paper, level, inputs, knobs, the orientation and range of its
raw value, whether it scores the run's pairs, and its computation (:func:`curricula.difficulty.registry.register`);
adding a function is one more ``register(...)`` call (here, or in a plugin module the config's ``plugins`` names).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

from curricula.data.ingest import candidate_pairs
from curricula.difficulty import hcl, macavaney, penha
from curricula.difficulty.macavaney import BM25_LISTS, bm25_lists
from curricula.difficulty.registry import (
    FUNCTIONS,
    INPUT_TABLES,
    ORIENTATIONS,
    DifficultyFunction,
    Inputs,
    check_names,
    lookup,
    pair_level,
    register,
    unregister,
)
from curricula.plugins import load_environment_plugins
from curricula.plumbing.contracts import (
    CANDIDATE_SCORES,
    RUN,
    TEACHER_SCORES,
    VECTORS,
    TableSpec,
)

__all__ = [
    "BM25_LISTS", "FUNCTIONS", "INPUT_TABLES", "DifficultyFunction", "Inputs", "bm25_lists", "check_names",
    "combine_difficulty", "ORIENTATIONS",
    "INPUT_SPECS", "difficulty_spec", "difficulty_table", "function_difficulty", "function_knobs", "log_difficulty",
    "lookup", "needed_inputs", "pair_level", "register", "scores_run_pairs", "spearman_matrix", "unregister",
]

log = logging.getLogger(__name__)

#: the table contract of each extra input table
INPUT_SPECS: dict[str, TableSpec] = {"candidate_scores": CANDIDATE_SCORES, "run": RUN, "teacher": TEACHER_SCORES,
                                     "query_vectors": VECTORS, "doc_vectors": VECTORS}


# ----------------------------------------------------------------------------------------------- the functions
def _sigma_sm(x: Inputs) -> pl.DataFrame:
    # curricula.models.hf imports torch: only when sigma_SM is computed, never when Snakemake imports this module
    from curricula.models.hf import input_embeddings, load_tokenizer

    model = x.knobs["sm_model"]
    emb = input_embeddings(model).numpy()
    return penha.sigma_sm(x.pairs, x.queries, x.docs, load_tokenizer(model), emb, x.knobs["sm_words"])


def _heuristic(name: str) -> Callable[[Inputs], pl.DataFrame]:
    def compute(x: Inputs) -> pl.DataFrame:
        return macavaney.heuristic_difficulty(x.pairs, x.tables["candidate_scores"], x.tables.get("run"),
                                              x.knobs["bm25_list"], name)
    return compute


PENHA = "Penha & Hauff 2020, Table 2"
COUNT = (0.0, math.inf)  # a count, a mean count, a standard deviation or a loss: never negative, no upper bound
register("random", PENHA, level="query", uses_seed=True, raw_range=(0.0, 1.0),
         compute=lambda x: penha.by_rank(penha.random(x.pairs, x.knobs["seed"]), x.pairs))
register("turns", PENHA, level="query", raw_range=COUNT,
         compute=lambda x: penha.by_rank(penha.turns(x.queries), x.pairs))
register("u_words", PENHA, level="query", raw_range=COUNT,
         compute=lambda x: penha.by_rank(penha.u_words(x.queries), x.pairs))
register("r_words", PENHA, level="query", raw_range=COUNT,
         compute=lambda x: penha.by_rank(penha.r_words(x.pairs, x.docs), x.pairs))
register("sigma_sm", PENHA, level="query", knobs=("sm_words", "sm_model"), raw_range=COUNT,
         compute=lambda x: penha.by_rank(_sigma_sm(x), x.pairs))
register("sigma_bm25", PENHA, level="query", inputs=("candidate_scores",), raw_range=COUNT,
         compute=lambda x: penha.by_rank(penha.sigma_bm25(x.pairs, x.tables["candidate_scores"]), x.pairs))
register("bert_pred", PENHA, level="query", inputs=("teacher",), raw_range=(-1.0, 1.0),
         compute=lambda x: penha.by_rank(penha.bert_pred(x.pairs, x.tables["teacher"]), x.pairs))
register("bert_loss", PENHA, level="query", inputs=("teacher",), raw_range=COUNT,
         compute=lambda x: penha.by_rank(penha.bert_loss(x.pairs, x.tables["teacher"]), x.pairs))
# raw = MacAvaney's heuristic h in [0, 1] (1 = ranked high); the BM25 list is the candidates' scores, or the BM25
# run's when bm25_list is "run", and then the run's training pairs are scored too
register("recip", "MacAvaney et al. 2020, eq. 5-7", level="pair", inputs=("candidate_scores",),
         conditional_inputs={"run": {"bm25_list": "run"}}, knobs=("bm25_list",), compute=_heuristic("recip"),
         orientation="relevance", raw_range=(0.0, 1.0), run_pairs=True)
register("norm", "MacAvaney et al. 2020, eq. 8-9", level="pair", inputs=("candidate_scores",),
         conditional_inputs={"run": {"bm25_list": "run"}}, knobs=("bm25_list",), compute=_heuristic("norm"),
         orientation="relevance", raw_range=(0.0, 1.0), run_pairs=True)
register("kde", "MacAvaney et al. 2020, eq. 10-11", level="pair", inputs=("candidate_scores",),
         conditional_inputs={"run": {"bm25_list": "run"}}, knobs=("bm25_list",), compute=_heuristic("kde"),
         orientation="relevance", raw_range=(0.0, 1.0), run_pairs=True)
# raw = the similarity G(c, r+), a cosine: larger is easier
register("hcl_corpus", "Su et al. 2021, eq. 2", level="query", inputs=("query_vectors", "doc_vectors"),
         orientation="easier", raw_range=(-1.0, 1.0),
         compute=lambda x: hcl.hcl_corpus(x.pairs, x.tables["query_vectors"], x.tables["doc_vectors"]))


# ----------------------------------------------------------------------------------------------- the pipeline
def needed_inputs(functions: Sequence[str], bm25_list: str = "candidates", *,
                  knobs: Mapping[str, Any] | None = None) -> set[str]:
    """The extra tables the configured functions read (the difficulty rule's conditional inputs).

    A conditional input (:func:`register`'s ``conditional_inputs``) is decided by the knob values: ``bm25_list``,
    updated by ``knobs`` (e.g. a job's :func:`function_knobs`).
    """
    check_names(functions, "difficulty functions")
    values = {"bm25_list": bm25_list, **(knobs or {})}
    return {name for f in functions for name in FUNCTIONS[f].needed_inputs(values)}


def difficulty_spec(functions: Sequence[str]) -> TableSpec:
    """The table contract for a given list of functions (column set depends on the config)."""
    cols: dict[str, PolarsDataType] = {"qid": pl.String, "docid": pl.String, "rel": pl.Int32}
    for f in functions:
        cols[f"{f}_raw"] = pl.Float64
        cols[f] = pl.Float64
    return TableSpec("difficulty", cols, key=("qid", "docid"))


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
    knobs: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """The difficulty table (see the module docstring) of ``pairs`` (qid, docid, rel) for ``functions``.

    The keyword tables are the extra inputs (:data:`INPUT_TABLES`); ``seed``, ``bm25_list``, ``sm_words`` and
    ``sm_model`` are knob values, updated by ``knobs`` (knobs of functions registered later).
    """
    values = {"seed": seed, "bm25_list": bm25_list, "sm_words": sm_words, "sm_model": sm_model, **(knobs or {})}
    given = {"candidate_scores": candidate_scores, "run": run, "teacher": teacher, "query_vectors": query_vectors,
             "doc_vectors": doc_vectors}
    present = {name: table for name, table in given.items() if table is not None}
    check_names(functions, "difficulty functions")
    base = pairs.select("qid", "docid", pl.col("rel").cast(pl.Int32)).sort("qid", "docid")
    out = base
    for f in functions:
        fn = FUNCTIONS[f]
        need = fn.needed_inputs(values)
        absent = sorted(name for name in need if name not in present)
        if absent:
            raise ValueError(f"difficulty {f}: needs the table(s) {absent}")
        frame = fn.compute(Inputs(base, queries, docs, {name: present[name] for name in need}, fn.knob_values(values)))
        cols = [*fn.key, f"{f}_raw", f]
        lacking = [c for c in cols if c not in frame.columns]
        if lacking:
            raise ValueError(f"difficulty {f}: its compute returned no column(s) {lacking}")
        out = out.join(frame.select(cols), on=list(fn.key), how="left")
    ordered = ["qid", "docid", "rel"] + [c for f in functions for c in (f"{f}_raw", f)]
    out = out.select(ordered).sort("qid", "docid")
    missing = {c: out[c].null_count() for c in ordered[3:] if out[c].null_count()}
    if missing:
        raise ValueError(f"difficulty: null values in {missing} (an input table lacks some training pairs)")
    return out


def spearman_matrix(table: pl.DataFrame, functions: Sequence[str]) -> pl.DataFrame:
    """Spearman rank correlation between the difficulty columns over the table's rows (function x function)."""
    # scipy.stats takes ~0.3 s to import: kept out of Snakemake's parse of the workflow (which imports this module)
    from scipy.stats import spearmanr

    cols = [f for f in functions if table[f].n_unique() > 1]
    if len(cols) < 2:
        return pl.DataFrame({"function": cols, **{c: [1.0] for c in cols}})
    rho = spearmanr(table.select(cols).to_numpy()).statistic
    if np.ndim(rho) == 0:  # scipy returns a scalar for two columns
        rho = np.array([[1.0, rho], [rho, 1.0]])
    return pl.DataFrame({"function": cols, **{c: [float(x) for x in rho[:, j]] for j, c in enumerate(cols)}})


def function_knobs(function: str, cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The knobs one function's job depends on: its registered ``difficulty`` keys (read from ``cfg``, the config's
    ``difficulty`` section), and ``seed`` if it uses the seed (``random`` only). An unknown function is a ValueError.
    """
    fn = lookup(function)
    knobs = {k: cfg[k] for k in fn.knobs}
    if fn.uses_seed:
        knobs["seed"] = seed
    return knobs


def scores_run_pairs(function: str, knobs: Mapping[str, Any]) -> bool:
    """Whether ``function``'s training table also covers the BM25 run's pairs of the training queries
    (:func:`curricula.difficulty.macavaney.with_run_pairs`): a function registered with ``run_pairs`` whose knobs
    ``knobs`` (:func:`function_knobs`) read the run, i.e. MacAvaney's ``recip``, ``norm`` and ``kde`` with
    ``bm25_list: run``, so that the trainer can weigh the negatives ``negatives.mode: bm25`` draws from the run."""
    fn = lookup(function)
    return fn.run_pairs and "run" in fn.needed_inputs(knobs)


def function_difficulty(ingest: Mapping[str, pl.DataFrame], extra: Mapping[str, pl.DataFrame], function: str,
                        knobs: Mapping[str, Any], relevant_min: int = 1, split: str = "train") -> pl.DataFrame:
    """One scoring function's table over the training pairs (qid, docid, rel, f_raw, f; rule
    ``difficulty_function``), its size and ranges logged.

    ``split="test"`` scores the test pairs instead (rule ``difficulty_test``, for the report's figures of test
    effectiveness by difficulty bucket); rank-based difficulties are then ranks among the test queries.

    The scored pairs are the split's candidate pairs (:func:`curricula.data.ingest.candidate_pairs`); on the training
    split, a function for which :func:`scores_run_pairs` holds (MacAvaney's with ``bm25_list: run``) is also scored
    on the BM25 run's pairs of the training queries within the training pool, the negatives ``negatives.mode:
    bm25`` draws (:func:`curricula.difficulty.macavaney.with_run_pairs`; non-relevant rows, so the curriculum's
    instances, the relevant rows, are unchanged).

    ``ingest`` holds the ingest frames (queries, docs, qrels, candidates; :func:`curricula.data.ingest.read_ingest`),
    ``extra`` the extra tables this function needs (:func:`needed_inputs`, each read with its contract in
    :data:`INPUT_SPECS`); ``knobs`` is :func:`function_knobs`. One job per function means adding a function to the
    config computes only that function, and a function's table changes only when its own inputs do.
    """
    pairs = candidate_pairs(ingest, splits=(split,), relevant_min=relevant_min)
    tables: dict[str, Any] = dict(extra)
    if split == "train" and scores_run_pairs(function, knobs):
        pairs, tables["candidate_scores"] = macavaney.with_run_pairs(pairs, tables["run"], ingest["qrels"],
                                                                     tables["candidate_scores"], relevant_min)
    table = difficulty_table(pairs, ingest["queries"], ingest["docs"], [function], knobs=knobs, **tables)
    log.info("difficulty %s (%s): %d pairs of %d queries; difficulty mean %.3f, raw range [%.4g, %.4g]",
             function, split, table.height, table["qid"].n_unique(), table[function].mean(),
             table[f"{function}_raw"].min(), table[f"{function}_raw"].max())
    return table


def combine_difficulty(tables: Sequence[pl.DataFrame], functions: Sequence[str]) -> pl.DataFrame:
    """The one-row-per-training-pair difficulty table from per-function tables.

    Every table scores the same pairs, except that the pair-level tables may also hold the BM25 run's pairs
    (:func:`scores_run_pairs`). The rows are the pair-level tables' (a superset of the query-level tables' pairs;
    the query-level tables' when there is no pair-level function), and a query-level function's value is its
    query's on every row (one value per query, checked)."""
    if not tables:
        raise ValueError("no difficulty function configured")
    by_level: dict[bool, list[tuple[str, pl.DataFrame]]] = {}
    for f, table in zip(functions, tables):
        by_level.setdefault(pair_level(f), []).append((f, table))
    for group in by_level.values():  # tables of one level score the same pairs
        first = group[0][1].height
        for f, table in group[1:]:
            if table.height != first:
                raise ValueError(f"difficulty {f}: {table.height} rows, expected {first} (stale per-function table?)")
    pair_tables, query_tables = by_level.get(True, []), by_level.get(False, [])
    out = (pair_tables or query_tables)[0][1].select("qid", "docid", "rel")
    if pair_tables and query_tables:
        (pair_name, pair_rows), (query_name, query_rows) = pair_tables[0], query_tables[0]
        if query_rows.join(pair_rows, on=["qid", "docid"], how="anti").height:
            raise ValueError(f"difficulty {pair_name}: {pair_rows.height} rows, expected at least the "
                             f"{query_rows.height} pairs of {query_name} (stale per-function table?)")
    for f, table in zip(functions, tables):
        if pair_level(f):
            out = out.join(table.select("qid", "docid", f"{f}_raw", f), on=["qid", "docid"], how="left")
            continue
        per_query = table.select("qid", f"{f}_raw", f).unique()
        if per_query["qid"].is_duplicated().any():
            raise ValueError(f"difficulty {f}: a query-level function with more than one value for a query")
        out = out.join(per_query, on="qid", how="left")
    missing = [c for c in out.columns if out[c].null_count()]
    if missing:
        raise ValueError(f"difficulty: per-function tables disagree on the training pairs (nulls in {missing})")
    return out.sort("qid", "docid")


def log_difficulty(table: pl.DataFrame, functions: Sequence[str]) -> None:
    """Log the joined difficulty table's size (rule ``difficulty``, :func:`combine_difficulty`) and the Spearman
    correlation of its functions' difficulties over the training pairs: how far the functions agree on what is hard."""
    log.info("difficulty: %d training pairs of %d queries, functions %s", table.height, table["qid"].n_unique(),
             functions)
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=2, tbl_width_chars=250):
        log.info("Spearman correlation of the difficulties over the training pairs:\n%s",
                 spearman_matrix(table, functions))


# a plugin module named by the config's `plugins` registers its functions in a job's process too (curricula.plugins)
load_environment_plugins()
