"""MacAvaney et al. (2020) §3.2-3.3, eq. 5-11: difficulty heuristics from a first-stage (BM25) ranked list.

For a query q and its ranked list D (the reference scores of the query), each document d gets a heuristic value
h in [0, 1], **1 = ranked high by BM25**:

* ``recip``: eq. 5, 1 / rank of d in D (0 when d is not in D);
* ``norm``: the score of d min-max normalised against the scores of D (eq. 8/9's norm_{q,D});
* ``kde``: the CDF at d's score of a Gaussian kernel density estimate of the scores of D, bandwidth by Scott's rule
  (eq. 10/11's KDE_{q,D}); unlike ``recip``, a relevant doc that was not retrieved still gets a value from its score.

The paper's D is an **ease** (1 = easy): pointwise (eq. 6/8/10) D = h for a relevant doc (ranked high = easy) and
1 - h for a non-relevant one (ranked high = hard); pairwise (eq. 7/9/11) D = (h(d+) - h(d-) + 1) / 2, 0.5 when both
are ranked alike. The pipeline's ``difficulty`` has 1 = hardest, i.e. :func:`difficulty_from_ease` = 1 - D.

Everything here is vectorised numpy / polars; the KDE CDF uses the closed form mean_j ndtr((x - x_j) / h), equal to
``scipy.stats.gaussian_kde(ref).integrate_box_1d(-inf, x)``, for all queries at once (no loop over queries).

Which BM25 list defines rank and score is ``bm25_list`` (:func:`bm25_lists`): ``candidates`` ranks the query's fixed
candidates by their Lucene BM25 scores (the re-ranking pool the ranker trains on); ``run`` uses the BM25 run's top k
(rank null beyond it, as in the paper, where unretrieved positives still get a KDE value from their score).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, cast, overload

import numpy as np
import polars as pl
from numpy.typing import ArrayLike, NDArray

#: Default number of evaluation points per KDE chunk: memory is about 3 x chunk_rows x (largest list) x 8 bytes.
KDE_CHUNK_ROWS = 4096
#: the heuristics h, eq. 5 / norm / KDE (each is a registered difficulty function of the same name)
HEURISTICS = ("recip", "norm", "kde")
#: the values of the ``difficulty.bm25_list`` knob
BM25_LISTS = ("candidates", "run")

Num = TypeVar("Num", float, NDArray[np.float64], pl.Series, pl.Expr)


def _floats(x: ArrayLike | pl.Series) -> NDArray[np.float64]:
    """A float64 numpy copy of ``x``; polars nulls and Python ``None`` become NaN."""
    if isinstance(x, pl.Series):
        return x.cast(pl.Float64).to_numpy().astype(np.float64, copy=True)
    return np.array(x, dtype=np.float64)


# ------------------------------------------------------------------------------------------- heuristics h
def reciprocal_rank(rank: ArrayLike | pl.Series) -> NDArray[np.float64]:
    """Eq. 5: recip_{q,D}(d) = 1 / rank_{q,D}(d), rank 1 = top of the list; in (0, 1], 1 = ranked first.

    A document not in the ranked list (rank null, NaN or 0) gets 0.0, the limit of 1 / rank as rank grows; a
    negative rank is a ValueError.
    """
    r = _floats(rank)
    if np.any(r < 0):
        raise ValueError(f"reciprocal_rank: negative rank(s) {np.unique(r[r < 0])[:5].tolist()}")
    out = np.zeros_like(r)
    inside = np.isfinite(r) & (r > 0)
    out[inside] = 1.0 / r[inside]
    return out


def minmax_norm(
    scores: ArrayLike | pl.Series, ref_min: ArrayLike | pl.Series, ref_max: ArrayLike | pl.Series
) -> NDArray[np.float64]:
    """Eq. 8/9's norm_{q,D}(d) = (s - min_D) / (max_D - min_D): the score s of d against the min and max score of
    its query's ranked list D, clipped to [0, 1] (a doc outside D may score below min_D); 1 = the top score.

    Arguments broadcast elementwise (one ref_min / ref_max per score, or scalars). When max_D == min_D (one score,
    or all equal) the ratio is undefined: a score >= max_D gets 1.0 (it ties the top), any other score 0.0. A NaN
    score, min or max gives NaN (the caller decides; :func:`macavaney_heuristics` maps a missing score to 0).
    """
    s, lo, hi = np.broadcast_arrays(_floats(scores), _floats(ref_min), _floats(ref_max))
    span = hi - lo
    flat = span == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(flat, (s >= hi).astype(np.float64), (s - lo) / np.where(flat, 1.0, span))
    out = np.clip(out, 0.0, 1.0)
    out[np.isnan(s) | np.isnan(lo) | np.isnan(hi)] = np.nan
    return out


def _group_codes(
    groups: ArrayLike | pl.Series, ref_groups: ArrayLike | pl.Series
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """Dense integer codes (0..K-1) of the groups of the values and of the references, shared; null -> -1."""
    ref = ref_groups.rename("g") if isinstance(ref_groups, pl.Series) else pl.Series("g", np.asarray(ref_groups))
    val = groups.rename("g") if isinstance(groups, pl.Series) else pl.Series("g", np.asarray(groups))
    both = pl.concat([ref, val.cast(ref.dtype)]) if ref.len() else val
    codes = (both.rank("dense").cast(pl.Int64) - 1).fill_null(-1).to_numpy()
    k = int(codes.max()) + 1 if codes.size else 0
    return codes[len(both) - val.len():], codes[: len(both) - val.len()], k


def kde_cdf(
    values: ArrayLike | pl.Series,
    groups: ArrayLike | pl.Series,
    ref_values: ArrayLike | pl.Series,
    ref_groups: ArrayLike | pl.Series,
    chunk_rows: int = KDE_CHUNK_ROWS,
) -> NDArray[np.float64]:
    """Eq. 10/11's KDE_{q,D}(d): for each value x (group g), the CDF at x of the Gaussian KDE of g's reference scores.

    The KDE of the n reference scores x_1..x_n of group g (the ``ref_values`` whose ``ref_groups`` equal g) has
    bandwidth h by scipy's Scott's rule, h = std(x, ddof=1) * n^(-1/5), and CDF(x) = mean_j ndtr((x - x_j) / h), in
    [0, 1], 1 = above every reference score (same units as the scores). This equals
    ``scipy.stats.gaussian_kde(ref).integrate_box_1d(-np.inf, x)`` (to ~1e-15) without fitting one KDE per group:
    the references are padded into a (groups x max_n) matrix (padding +inf, which contributes ndtr(-inf) = 0) and
    the values are evaluated in chunks of ``chunk_rows`` rows of that matrix, so memory stays bounded.

    Defined here where scipy raises (n == 1, or all n scores equal, i.e. zero std): the limit h -> 0, a step, i.e.
    CDF = 0.0 below the score, 0.5 at it, 1.0 above. A value whose group has no reference score (unknown group or
    null group) gets NaN; so does a NaN value; the caller decides. Non-finite reference scores are ignored; a value
    of +inf / -inf in a known group gives 1.0 / 0.0.
    """
    if chunk_rows < 1:
        raise ValueError(f"kde_cdf: chunk_rows must be >= 1, got {chunk_rows}")
    x = _floats(values)
    ref = _floats(ref_values)
    val_code, ref_code, k = _group_codes(groups, ref_groups)
    if val_code.shape != x.shape or ref_code.shape != ref.shape:
        raise ValueError("kde_cdf: values / groups (or ref_values / ref_groups) differ in length")
    keep = np.isfinite(ref) & (ref_code >= 0)
    ref, ref_code = ref[keep], ref_code[keep]
    out = np.full(x.shape, np.nan)
    if not x.size or not ref.size:
        return out
    matrix, n = _padded_references(ref, ref_code, k)
    bandwidth = _scott_bandwidths(ref, ref_code, n, k)
    lowest = matrix.min(axis=1)
    highest = np.where(np.isfinite(matrix), matrix, -np.inf).max(axis=1)
    step = (n >= 1) & (highest == lowest)  # n == 1 or zero std: scipy raises, the limit is a step

    known = val_code >= 0
    known[known] = n[val_code[known]] > 0
    known &= ~np.isnan(x)
    is_step = np.zeros_like(known)
    is_step[known] = step[val_code[known]]
    rows = np.flatnonzero(known & ~is_step & np.isfinite(x))
    _kde_rows(out, rows, x, val_code, matrix, bandwidth, n, chunk_rows)

    idx = np.flatnonzero(is_step)
    at = lowest[val_code[idx]]
    out[idx] = np.where(x[idx] > at, 1.0, np.where(x[idx] < at, 0.0, 0.5))
    infinite = known & np.isinf(x)
    out[infinite] = (x[infinite] > 0).astype(np.float64)
    return out


def _padded_references(
    ref: NDArray[np.float64], ref_code: NDArray[np.int64], k: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The (k groups x max_n) matrix of each group's reference scores in input order, padded with +inf (which adds
    ndtr(-inf) = 0 to a KDE CDF), and each group's count n."""
    n = np.bincount(ref_code, minlength=k)
    order = np.argsort(ref_code, kind="stable")
    start = np.cumsum(n) - n
    code_sorted = ref_code[order]
    matrix = np.full((k, int(n.max())), np.inf)
    matrix[code_sorted, np.arange(ref.size) - start[code_sorted]] = ref[order]
    return matrix, n


def _scott_bandwidths(
    ref: NDArray[np.float64], ref_code: NDArray[np.int64], n: NDArray[np.int64], k: int
) -> NDArray[np.float64]:
    """Scott's rule per group, as scipy's ``gaussian_kde``: h = std(ddof=1) * n^(-1/5) (two-pass variance; 0 for a
    group of one score or of equal scores)."""
    safe_n = np.maximum(n, 1)
    mean = np.bincount(ref_code, weights=ref, minlength=k) / safe_n
    var = np.bincount(ref_code, weights=(ref - mean[ref_code]) ** 2, minlength=k) / np.maximum(n - 1, 1)
    return np.sqrt(var) * safe_n ** (-0.2)


def _kde_rows(out: NDArray[np.float64], rows: NDArray[np.int64], x: NDArray[np.float64],
              val_code: NDArray[np.int64], matrix: NDArray[np.float64], bandwidth: NDArray[np.float64],
              n: NDArray[np.int64], chunk_rows: int) -> None:
    """Write CDF(x) = mean_j ndtr((x - x_j) / h) (eq. 10/11's KDE) into ``out`` at the positions ``rows``, each
    against its group's row of ``matrix`` (:func:`_padded_references`), ``chunk_rows`` values at a time."""
    from scipy.special import ndtr  # here, not at the top: the Snakefile's start-up imports this module

    for lo in range(0, rows.size, chunk_rows):
        idx = rows[lo: lo + chunk_rows]
        g = val_code[idx]
        z = matrix[g]  # fancy indexing copies: work in place
        np.subtract(x[idx, None], z, out=z)
        z /= bandwidth[g, None]
        ndtr(z, out=z)
        out[idx] = z.sum(axis=1) / n[g]


# ------------------------------------------------------------------------------------------- D (ease) forms
@overload
def pointwise(h: pl.Expr, relevant: pl.Series | pl.Expr) -> pl.Expr: ...
@overload
def pointwise(h: float | NDArray[np.float64] | pl.Series, relevant: pl.Expr) -> pl.Expr: ...
@overload
def pointwise(h: pl.Series, relevant: ArrayLike | pl.Series) -> pl.Series: ...
@overload
def pointwise(h: float | NDArray[np.float64], relevant: ArrayLike) -> NDArray[np.float64]: ...
def pointwise(h: float | NDArray[np.float64] | pl.Series | pl.Expr,
              relevant: ArrayLike | pl.Series | pl.Expr) -> NDArray[np.float64] | pl.Series | pl.Expr:
    """Eq. 6 / 8 / 10: D_point = h for a relevant doc (s > 0), 1 - h for a non-relevant one; in [0, 1], 1 = easy.

    ``h`` is the doc's recip, norm or KDE value. Works on numpy arrays / scalars (returns float64 numpy) and on
    polars Series or expressions (``relevant`` a boolean Series / expression; returns the same kind).
    """
    if isinstance(h, pl.Expr) or isinstance(relevant, pl.Expr):
        # the overloads take an expression h only with a Series or expression relevant
        return pl.when(cast("pl.Series | pl.Expr", relevant)).then(h).otherwise(1.0 - h)
    if isinstance(h, pl.Series):
        rel = relevant if isinstance(relevant, pl.Series) else pl.Series(np.asarray(relevant, dtype=bool))
        return pl.select(pl.when(rel).then(h).otherwise(1.0 - h)).to_series().alias(h.name)
    hv = _floats(h)
    return np.where(np.asarray(relevant, dtype=bool), hv, 1.0 - hv)


def pairwise(h_pos: Num, h_neg: Num) -> Num:
    """Eq. 7 / 9 / 11: D_pair(q, d+, d-) = (h(d+) - h(d-) + 1) / 2; in [0, 1], 1 = easy (the positive ranked at the
    top, the negative not retrieved), 0 = hardest, 0.5 when both have the same h. Elementwise, any numeric kind."""
    return (h_pos - h_neg + 1.0) / 2.0


def difficulty_from_ease(ease: Num) -> Num:
    """The pipeline's ``difficulty`` (1 = hardest) from the paper's D (1 = easiest): 1 - D. Elementwise."""
    return 1.0 - ease


# ------------------------------------------------------------------------------------------- frame level
def macavaney_heuristics(
    pairs: pl.DataFrame,
    reference: pl.DataFrame,
    *,
    relevant_min: int = 1,
    chunk_rows: int = KDE_CHUNK_ROWS,
    heuristics: Sequence[str] = HEURISTICS,
) -> pl.DataFrame:
    """``pairs`` with the heuristics h (``recip``, ``norm``, ``kde``, eq. 5 / norm / KDE, 1 = ranked high) and their
    pointwise D (``recip_point``, ``norm_point``, ``kde_point``, eq. 6 / 8 / 10, 1 = easy) as Float64 columns;
    ``heuristics`` names a subset to compute (only the KDE is costly).

    ``pairs``: qid, docid, rel (int, relevant when rel >= ``relevant_min``; null is an error), score (the doc's own
    first-stage score, may be null), rank (null when the doc is not in the ranked list), other columns kept.
    ``reference``: qid, score, the ranked list D of each query; its min / max define ``norm`` and its scores the
    KDE (null / NaN reference scores are dropped). Row order of ``pairs`` is kept.

    A null (or NaN) ``score`` gives recip = norm = kde = 0 (a doc without a score is treated as unranked); a query
    with no reference score gives null ``norm`` / ``kde`` (and their ``_point``) for its scored docs, so the caller
    can tell that its ranked list is missing; ``recip`` depends only on ``rank``.
    """
    missing = [c for c in ("qid", "docid", "rel", "score", "rank") if c not in pairs.columns]
    missing += [f"reference.{c}" for c in ("qid", "score") if c not in reference.columns]
    if missing:
        raise ValueError(f"macavaney_heuristics: missing column(s) {missing}")
    unknown = [h for h in heuristics if h not in HEURISTICS]
    if unknown:
        raise ValueError(f"macavaney_heuristics: unknown heuristic(s) {unknown}; known: {list(HEURISTICS)}")
    if pairs["rel"].null_count():
        raise ValueError(f"macavaney_heuristics: {pairs['rel'].null_count()} null rel value(s)")
    ref = reference.select("qid", pl.col("score").cast(pl.Float64)).filter(
        pl.col("score").is_not_null() & pl.col("score").is_finite()
    )
    bounds = ref.group_by("qid").agg(pl.col("score").min().alias("_min"), pl.col("score").max().alias("_max"))
    keyed = pairs.select("qid").join(bounds, on="qid", how="left", maintain_order="left")

    score = _floats(pairs["score"])
    no_score = np.isnan(score)
    compute = {
        "recip": lambda: reciprocal_rank(pairs["rank"]),
        "norm": lambda: minmax_norm(score, keyed["_min"], keyed["_max"]),
        "kde": lambda: kde_cdf(score, pairs["qid"], ref["score"], ref["qid"], chunk_rows=chunk_rows),
    }
    relevant = (pairs["rel"] >= relevant_min).to_numpy()
    cols = {}
    for name in (h for h in HEURISTICS if h in heuristics):
        h = compute[name]()
        h[no_score] = 0.0
        cols[name] = pl.Series(name, h, dtype=pl.Float64, nan_to_null=True)
        cols[f"{name}_point"] = pl.Series(f"{name}_point", pointwise(h, relevant), dtype=pl.Float64, nan_to_null=True)
    return pairs.with_columns(**cols)


def bm25_lists(pairs: pl.DataFrame, candidate_scores: pl.DataFrame, run: pl.DataFrame | None,
               bm25_list: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pairs with the doc's ``score`` and ``rank``, the per-query reference list (qid, score)) for the heuristics.

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


def with_run_pairs(pairs: pl.DataFrame, run: pl.DataFrame, qrels: pl.DataFrame, candidate_scores: pl.DataFrame,
                   relevant_min: int = 1) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``pairs`` (qid, docid, rel) plus the BM25 run's pairs of their queries, ``candidate_scores`` plus those
    pairs' run scores).

    With ``bm25_list: run`` the trainer may draw its negatives from the run (``negatives.mode: bm25``), so the
    heuristics must be scored on every (query, doc) such a sampler can draw: each query of ``pairs`` with every doc
    of its run (all of the run's k; ``negatives.depth`` cuts a prefix) that is among the docs of ``pairs`` (for the
    training candidate pairs: the training response pool, the only docs a sampler draws). An added pair's ``rel`` is
    1 when its qrels grade is >= ``relevant_min``, else 0 (with :func:`curricula.data.ingest.candidate_pairs`, which
    already holds every relevant doc, an added pair is always non-relevant), and its BM25 score, which
    :func:`bm25_lists` reads from ``candidate_scores``, is the run's (the same Lucene BM25 score; the added pairs
    are not candidates). The pairs already in ``pairs`` keep their rows, so their values are unchanged. The pairs
    come back sorted by qid, docid.
    """
    keys = ["qid", "docid"]
    pairs = pairs.select(*keys, "rel")
    qids = pairs["qid"].unique().implode()
    docids = pairs["docid"].unique().implode()
    added = (run.filter(pl.col("qid").is_in(qids) & pl.col("docid").is_in(docids))
             .select("qid", "docid", pl.col("score").cast(pl.Float64))
             .join(pairs.select(keys), on=keys, how="anti"))
    grade = qrels.select(*keys, (pl.col("rel") >= relevant_min).cast(pairs.schema["rel"]).alias("rel"))
    labelled = added.join(grade, on=keys, how="left").with_columns(pl.col("rel").fill_null(0))
    out_pairs = pl.concat([pairs, labelled.select(pairs.columns)], how="vertical_relaxed").sort(keys)
    scores = labelled.select(keys + ["score"]).join(candidate_scores.select(keys), on=keys, how="anti")
    out_scores = pl.concat([candidate_scores.select(*keys, pl.col("score").cast(pl.Float64)), scores])
    return out_pairs, out_scores


def heuristic_difficulty(pairs: pl.DataFrame, candidate_scores: pl.DataFrame, run: pl.DataFrame | None,
                         bm25_list: str, heuristic: str) -> pl.DataFrame:
    """One heuristic as a difficulty function of the pairs (qid, docid, rel): (qid, docid, ``{h}_raw`` = h,
    ``{h}`` = :func:`difficulty_from_ease` of the pointwise D, eq. 6 / 8 / 10), with the BM25 list ``bm25_list``."""
    with_bm25, reference = bm25_lists(pairs, candidate_scores, run, bm25_list)
    heur = macavaney_heuristics(with_bm25, reference, heuristics=(heuristic,))
    return heur.select("qid", "docid", pl.col(heuristic).alias(f"{heuristic}_raw"),
                       difficulty_from_ease(pl.col(f"{heuristic}_point")).alias(heuristic))
