"""The active-learning loop (Wang et al. 2020 Algorithm 2) with DASL and its baselines as acquisition functions.

One job = one (method, seed). The unit of annotation is a train *query* with all its candidates (Wang's sample X).
Each round trains a ranker from scratch (§4.3, after Hu et al.; the same seed every round is this project's
choice) on the labeled queries (true labels from the dataset's qrels, simulating the annotator) plus, for ``dasl``,
the pseudo-labeled ones, then records dev and test MRR/MAP and queries ``budget`` labels:

* ``random``: uniform among the unlabeled queries;
* ``bald``: highest MC-dropout mutual information on the top-1 choice (:func:`curricula.active.acquisition.bald`);
* ``coreset``: k-center greedy on the bi-encoder embeddings of the dense stage (:func:`k_center_greedy`);
* ``dal``: highest expected loss EL (Algorithm 1), no pseudo-labels;
* ``dasl``: self-paced pseudo-labelling inside the round (Algorithm 2 lines 2-9: lambda = that ``lambda0_quantile``
  (default 0.1, as the authors' code) of the unlabeled queries' EL under the round's first model (or, with the
  quantile null, the fixed ``lambda0``), train, pseudo-label the unlabeled queries with EL < lambda (EL <= lambda
  with the quantile, as the authors' code: :func:`curricula.active.acquisition.self_paced_indicators`) by the model's
  top answer (with ``require_agreement``, only those whose MC-dropout passes all put that answer on top, as the
  authors' code does; the quantile is then of those queries' EL), lambda *= mu; stop when dev stops improving or
  after ``spl_iterations``; pseudo-labels are recomputed every iteration and dropped at the next round), then
  acquires by EL like ``dal``;
* ``all``: one round with every train query labeled (the upper reference of Table 1).

After every finished round the state (labeled queries, curve rows) is written atomically to ``state.json`` in the
job's checkpoint folder; a re-run resumes after the last finished round. All randomness of round r derives from
(seed, r), so a resumed job ends with the same curve as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import torch

from curricula.active.acquisition import (
    METHODS,
    bald,
    expected_loss,
    k_center_greedy,
    passes_agree_on_top,
    pseudo_positive,
    quantile_lambda0,
    random_pick,
    self_paced_indicators,
    spl_lambda,
    top_uncertain,
)
from curricula.data.ingest import candidate_pairs
from curricula.evaluation.metrics import measure_means
from curricula.evaluation.rerank import ranker_metrics, ranker_per_query
from curricula.experiments.spec import TrainSpec, spec_record
from curricula.experiments.train import dev_metric
from curricula.models import build_ranker, ranker_class
from curricula.models.base import mc_dropout_probabilities
from curricula.models.runtime import JobRuntime, start_job
from curricula.plumbing.atomic import write_text_atomically
from curricula.plumbing.contracts import TableSpec
from curricula.training.core import FitConfig, fit
from curricula.training.losses import element_losses, weighted_mean

log = logging.getLogger(__name__)

ACTIVE_CURVE = TableSpec(
    "active_curve",
    {"round": pl.Int64, "labeled": pl.Int64, "labeled_fraction": pl.Float64, "pseudo_labeled": pl.Int64,
     "spl_iterations": pl.Int64, "dev_RR": pl.Float64, "dev_AP": pl.Float64, "test_RR": pl.Float64,
     "test_AP": pl.Float64},
    key=("round",),
)

ACTIVE_TEST_METRICS = TableSpec(
    "active_test_metrics",
    {"round": pl.Int64, "qid": pl.String, "measure": pl.String, "value": pl.Float64},
    key=("round", "qid", "measure"),
)
TEST_MEASURES = ("RR", "AP")


class ActiveRun(NamedTuple):
    """One (method, seed) of the loop: the ACTIVE_CURVE rows and each round's per-query test values
    (ACTIVE_TEST_METRICS; the curve's test_RR/test_AP are their means), which paired comparisons need."""

    curve: pl.DataFrame
    test_metrics: pl.DataFrame


@dataclass(frozen=True)
class ActiveSettings:
    """Loop knobs (schema ``active``): fractions are of the train queries."""

    rounds: int = 6
    initial: float = 0.1
    budget: float = 0.1
    passes: int = 20
    lambda0: float = 1e-4
    lambda0_quantile: float | None = 0.1
    require_agreement: bool = True
    mu: float = 2.0
    spl_iterations: int = 3
    score_batch_size: int = 256

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ActiveSettings:
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})


class QueryPool:
    """The train queries with their candidate pairs, indexed for grouping scores into (Q, J) arrays."""

    def __init__(self, pairs: pl.DataFrame):
        self.pairs = pairs.sort("qid", "docid")
        self.qids = self.pairs["qid"].unique(maintain_order=True).to_list()
        q_index = {q: i for i, q in enumerate(self.qids)}
        self.row_query = np.array([q_index[q] for q in self.pairs["qid"].to_list()], dtype=np.int64)
        starts = np.searchsorted(self.row_query, np.arange(len(self.qids)))
        self.row_pos = np.arange(self.pairs.height) - starts[self.row_query]
        self.width = int(self.row_pos.max()) + 1 if self.pairs.height else 0

    def __len__(self) -> int:
        return len(self.qids)

    def rows_of(self, chosen: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.isin(self.row_query, np.flatnonzero(chosen)))

    def grid(self, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(queries, (Q', T, J) values, (Q', J) mask) of per-row ``values`` (T, len(rows)) grouped by query."""
        qs, local = np.unique(self.row_query[rows], return_inverse=True)
        out = np.zeros((len(qs), values.shape[0], self.width), dtype=np.float64)
        mask = np.zeros((len(qs), self.width), dtype=bool)
        out[local, :, self.row_pos[rows]] = values.T
        mask[local, self.row_pos[rows]] = True
        return qs, out, mask


def initial_labeled(n: int, fraction: float, seed: int) -> np.ndarray:
    """Bool mask (n,) of the queries labeled before round 0 (Algorithm 2's random initial D_L): ``fraction`` of
    them, at least one, drawn with the (seed, round 0) generator."""
    labeled = np.zeros(n, dtype=bool)
    labeled[np.random.default_rng([seed, 0]).choice(n, max(1, int(round(fraction * n))), replace=False)] = True
    return labeled


def fit_ranker(spec: TrainSpec, seed: int, train: pl.DataFrame, dev: pl.DataFrame, qrels: pl.DataFrame,
               runtime: JobRuntime, relevant_min: int = 1, progress: bool = False):
    """Train a ranker from scratch on ``train`` pairs (qid, context, response, rel); best-on-dev weights.

    Each step draws ``batch_size`` queries with a positive and a negative, one positive and ``negatives.m``
    negatives of each (Wang's tuples (q, a, l) with l = 1 for the best answer), and applies the spec's loss.
    Returns (ranker, best dev value of ``eval_metric``).
    """
    rel = train["rel"].to_numpy()
    q_codes = train["qid"].rank("dense").cast(pl.Int64).to_numpy() - 1
    pos_rows = [np.flatnonzero((q_codes == q) & (rel > 0)) for q in range(int(q_codes.max()) + 1)]
    neg_rows = [np.flatnonzero((q_codes == q) & (rel <= 0)) for q in range(int(q_codes.max()) + 1)]
    usable = np.array([q for q in range(len(pos_rows)) if len(pos_rows[q]) and len(neg_rows[q])])
    if len(usable) == 0:
        raise ValueError("no training query has both a relevant and a non-relevant candidate")
    contexts, responses = train["context"].to_list(), train["response"].to_list()
    m, objective, device = spec.arm.negatives.m, spec.objective, runtime.device
    rng = np.random.default_rng(seed)
    ranker = build_ranker(spec.ranker, seed).to(device)

    def step_loss(step: int) -> torch.Tensor:
        qs = rng.choice(usable, objective.batch_size)
        rows = np.array([[rng.choice(pos_rows[q]), *rng.choice(neg_rows[q], m)] for q in qs])  # (B, 1 + m)
        logits = ranker.pair_logits([contexts[i] for i in rows.reshape(-1)], [responses[i] for i in rows.reshape(-1)],
                                    device, runtime.precision)
        return weighted_mean(element_losses(objective.loss, logits.view(rows.shape), objective.margin), None)

    def evaluate(done: int) -> dict[str, float]:
        return {"value": dev_metric(ranker, dev, qrels, spec.evaluation, runtime, relevant_min, progress)}

    result = fit(ranker.module, step_loss, FitConfig.of(spec.fit), seed=seed, evaluate=evaluate, progress=False,
                 desc="active fit")
    return ranker, result.best_value


def rr_and_ap(ranker, pairs: pl.DataFrame, qrels: pl.DataFrame, spec: TrainSpec, runtime: JobRuntime,
              relevant_min: int) -> dict[str, float]:
    """MRR (trec_eval ``recip_rank``) and MAP of the ranker on a split's candidate pairs."""
    return ranker_metrics(ranker, pairs, qrels, ["RR", "AP"], batch_size=spec.evaluation.score_batch_size,
                          device=runtime.device, precision=runtime.precision, relevant_min=relevant_min,
                          desc="scoring")


def labeled_pairs(pool: QueryPool, labeled: np.ndarray, pseudo: Mapping[int, int] | None = None) -> pl.DataFrame:
    """Train pairs of the labeled queries (true rel) and of the pseudo-labeled ones (rel 1 = the pseudo answer)."""
    parts = [pool.pairs[pool.rows_of(labeled)]]
    if pseudo:
        chosen = np.zeros(len(pool), dtype=bool)
        chosen[list(pseudo)] = True
        rows = pool.rows_of(chosen)
        answer = np.array([pseudo[int(q)] for q in pool.row_query[rows]])
        parts.append(pool.pairs[rows].with_columns(
            rel=pl.Series((pool.row_pos[rows] == answer).astype(np.int64)).cast(pool.pairs.schema["rel"])))
    return pl.concat(parts)


def uncertainty(ranker, pool: QueryPool, eligible: np.ndarray, settings: ActiveSettings, runtime: JobRuntime,
                seed: int, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-query uncertainty over the ``eligible`` queries (EL or BALD; -inf elsewhere), the mean-score
    pseudo answer of each query (index within its candidates; -1 elsewhere) and whether all its passes put one
    candidate on top (:func:`curricula.active.acquisition.passes_agree_on_top`; False elsewhere)."""
    rows = pool.rows_of(eligible)
    scores = np.full(len(pool), -np.inf)
    answer = np.full(len(pool), -1, dtype=np.int64)
    agree = np.zeros(len(pool), dtype=bool)
    if len(rows) == 0:
        return scores, answer, agree
    torch.manual_seed(seed)
    sub = pool.pairs[rows]
    probs = mc_dropout_probabilities(ranker, sub["context"].to_list(), sub["response"].to_list(),
                                     passes=settings.passes, batch_size=settings.score_batch_size,
                                     device=runtime.device, precision=runtime.precision, progress=False)
    qs, grid, mask = pool.grid(probs, rows)
    scores[qs] = expected_loss(grid, mask) if kind == "el" else bald(grid, mask)
    answer[qs] = pseudo_positive(grid.mean(axis=1), mask)
    agree[qs] = passes_agree_on_top(grid, mask)
    return scores, answer, agree


def _save_state(path: Path, state: dict) -> None:
    write_text_atomically(path, json.dumps(state, sort_keys=True) + "\n")


def load_state(state_path: Path | None, fingerprint: str, method: str, seed: int,
               computes: Mapping[str, str] | None = None) -> dict | None:
    """The state a killed job left after its last finished round (labeled qids, curve rows, per-query test values),
    or None when there is none or it belongs to another configuration, method or seed. A state written before
    per-query test values were kept cannot give them for its rounds: None (the job starts over).

    ``computes`` is the job's arithmetic (:func:`curricula.training.determinism.arithmetic`: device type and autocast
    dtype). A state that recorded another is refused with a warning naming both (the job starts over): its rounds'
    models were computed otherwise, and a curve half of one arithmetic and half of the other is what no
    uninterrupted run gives (as :class:`~curricula.training.checkpoints.Checkpointer` refuses such a checkpoint). A
    state that recorded none (written before it was recorded) is resumed."""
    if state_path is None or not state_path.exists():
        return None
    state = json.loads(state_path.read_text())
    if not (state.get("fingerprint") == fingerprint and state.get("method") == method and state.get("seed") == seed
            and "test_metrics" in state):
        return None
    recorded = state.get("arithmetic")
    if computes is not None and recorded is not None and recorded != dict(computes):
        log.warning("ignoring the active-learning state %s: its rounds were computed on %s, this job computes on %s; "
                    "starting over", state_path, recorded, dict(computes))
        return None
    return state


@dataclass(frozen=True)
class ActiveJob:
    """What every round of one (method, seed) of :func:`run_active` reads: the train query pool, the dev and test
    pairs, the qrels, the ranker spec, the loop's knobs and (``coreset`` only) the train queries' embeddings."""

    method: str
    seed: int
    pool: QueryPool
    dev: pl.DataFrame
    test: pl.DataFrame
    qrels: pl.DataFrame
    spec: TrainSpec
    settings: ActiveSettings
    runtime: JobRuntime
    relevant_min: int
    embeddings: np.ndarray | None

    def fit(self, labeled: np.ndarray, pseudo: Mapping[int, int] | None = None):
        """A ranker trained from scratch on the labeled (and pseudo-labeled) queries: (ranker, best dev value)."""
        return fit_ranker(self.spec, self.seed, labeled_pairs(self.pool, labeled, pseudo), self.dev, self.qrels,
                          self.runtime, self.relevant_min)

    def uncertainty(self, model, eligible: np.ndarray, r: int, kind: str):
        """:func:`uncertainty` of round ``r`` (its MC-dropout passes seeded with ``seed * 1000 + r``)."""
        return uncertainty(model, self.pool, eligible, self.settings, self.runtime, self.seed * 1000 + r,
                           kind)

    def dasl_round(self, labeled: np.ndarray, r: int) -> tuple[Any, dict[int, int], np.ndarray, int]:
        """DASL's self-paced pseudo-labelling inside round ``r`` (Wang et al. 2020 Algorithm 2 lines 2-9): (the kept
        model, its pseudo-labels, the unlabeled queries' EL under it, the SPL iterations it took)."""
        settings = self.settings
        pseudo: dict[int, int] = {}
        best = None
        iterations = 1
        for it in range(settings.spl_iterations):
            model, value = self.fit(labeled, pseudo)
            if best is not None and value <= best[1]:
                break  # dev stopped improving: keep the previous model and its pseudo-labels
            el, answer, agree = self.uncertainty(model, ~labeled, r, "el")
            best = (model, value, dict(pseudo), el, answer)
            iterations = it + 1
            pool_el = el[~labeled]
            candidates = ~labeled & agree if settings.require_agreement else ~labeled
            if it == 0:  # each round starts at lambda0 (Algorithm 2 line 2), here or from the first model's EL
                lam0 = (settings.lambda0 if settings.lambda0_quantile is None
                        else quantile_lambda0(el[candidates], settings.lambda0_quantile))
            lam = spl_lambda(lam0, settings.mu, it)  # Algorithm 2 line 8
            log.info("EL of the unlabeled queries: 10%% %.3g, median %.3g, 90%% %.3g (lambda %.3g); all passes "
                     "agree on the top answer for %d of %d", *np.quantile(pool_el, [0.1, 0.5, 0.9]), lam,
                     int((~labeled & agree).sum()), int((~labeled).sum()))
            # eq. 14; with the quantile rule, the authors' EL <= lambda (a quantile of tied zeros is 0)
            inclusive = settings.lambda0_quantile is not None
            reliable = np.flatnonzero(candidates & self_paced_indicators(el, lam, inclusive))
            pseudo = {int(q): int(answer[q]) for q in reliable}
            log.info("round %d, spl iteration %d: dev %.4f, lambda %.3g, %d pseudo-labeled of %d", r, it,
                     value, lam, len(pseudo), int((~labeled).sum()))
        assert best is not None  # spl_iterations >= 1 (the config schema's minimum): the first iteration keeps one
        model, _, pseudo, el, _ = best
        return model, pseudo, el, iterations

    def scores(self, model, r: int) -> tuple[dict[str, float], dict[str, float], list[list]]:
        """The dev MRR and MAP of round ``r``'s model, its test means and its per-query test values (rows
        [round, qid, measure, value])."""
        d = rr_and_ap(model, self.dev, self.qrels, self.spec, self.runtime, self.relevant_min)
        t_pq = ranker_per_query(model, self.test, self.qrels, TEST_MEASURES,
                                batch_size=self.spec.evaluation.score_batch_size, device=self.runtime.device,
                                precision=self.runtime.precision, relevant_min=self.relevant_min,
                                desc="scoring")
        per_query = [[r, q, m, v] for q, m, v in t_pq.select("qid", "measure", "value").iter_rows()]
        return d, measure_means(t_pq, TEST_MEASURES), per_query

    def acquire(self, model, labeled: np.ndarray, el: np.ndarray | None, r: int, budget: int) -> np.ndarray:
        """The ``budget`` unlabeled queries the method picks after round ``r`` (with the (seed, r + 1) generator);
        ``el`` is the round's EL when DASL computed it already."""
        rng = np.random.default_rng([self.seed, r + 1])
        eligible = ~labeled
        if self.method == "random":
            return random_pick(eligible, budget, rng)
        if self.method == "coreset":
            assert self.embeddings is not None  # run_active's check_method refuses coreset without them
            return k_center_greedy(self.embeddings, labeled, budget)
        if self.method == "bald":
            scores, _, _ = self.uncertainty(model, eligible, r, "bald")
            return top_uncertain(scores, eligible, budget, rng)
        if el is None:  # dal, dasl: Algorithm 1's EL of the round's final model
            el, _, _ = self.uncertainty(model, eligible, r, "el")
        return top_uncertain(el, eligible, budget, rng)


def check_method(method: str, embeddings: np.ndarray | None) -> None:
    """Refuse an unknown method, or ``coreset`` without the train queries' embeddings."""
    if method not in METHODS:
        raise ValueError(f"unknown active-learning method {method!r}; known: {list(METHODS)}")
    if method == "coreset" and embeddings is None:
        raise ValueError("coreset needs the train queries' embeddings (dense stage)")


def curve_row(r: int, labeled: np.ndarray, pseudo: int, iterations: int, dev: Mapping[str, float],
              test: Mapping[str, float]) -> dict:
    """One ACTIVE_CURVE row: round ``r``'s labeled share, pseudo-labels, SPL iterations and dev/test RR and AP."""
    return {"round": r, "labeled": int(labeled.sum()), "labeled_fraction": float(labeled.mean()),
            "pseudo_labeled": pseudo, "spl_iterations": iterations, "dev_RR": dev["RR"], "dev_AP": dev["AP"],
            "test_RR": test["RR"], "test_AP": test["AP"]}


def run_active(method: str, seed: int, *, train: pl.DataFrame, dev: pl.DataFrame, test: pl.DataFrame,
               qrels: pl.DataFrame, spec: TrainSpec, settings: ActiveSettings,
               embeddings: np.ndarray | None = None, state_dir: str | Path | None = None, relevant_min: int = 1,
               fingerprint: str = "", on_round: Callable[[int], None] | None = None) -> ActiveRun:
    """Run the loop for one method and seed: the ACTIVE_CURVE rows (one per round) and each round's per-query test
    values (:class:`ActiveRun`).

    ``train``/``dev``/``test`` are candidate pairs (qid, docid, context, response, rel) of the splits;
    ``embeddings`` (Q, d) are the train queries' bi-encoder vectors in ``sorted(qid)`` order (``coreset`` only).
    """
    check_method(method, embeddings)
    runtime = start_job(spec.runtime, ranker_class(spec.ranker.ranker).transformer, "active learning")
    job = ActiveJob(method, seed, QueryPool(train), dev, test, qrels, spec, settings, runtime, relevant_min,
                    embeddings)
    computes = runtime.arithmetic
    pool, n = job.pool, len(job.pool)
    budget = max(1, int(round(settings.budget * n)))
    rounds = 1 if method == "all" else settings.rounds
    state_path = Path(state_dir) / "state.json" if state_dir else None
    labeled = np.ones(n, dtype=bool) if method == "all" else initial_labeled(n, settings.initial, seed)
    rows: list[dict] = []
    per_query: list[list] = []  # [round, qid, measure, value] of every finished round
    start = 0
    state = load_state(state_path, fingerprint, method, seed, computes)
    if state is not None:
        labeled = np.isin(np.array(pool.qids), state["labeled"])
        rows, start, per_query = state["rows"], int(state["round"]), state["test_metrics"]
        log.info("resuming %s seed %d after round %d of %d", method, seed, start, rounds)
    for r in range(start, rounds):
        if method == "dasl":
            model, pseudo, el, iterations = job.dasl_round(labeled, r)
        else:
            (model, _), pseudo, el, iterations = job.fit(labeled), {}, None, 1
        d, t, t_rows = job.scores(model, r)
        per_query += t_rows
        rows.append(curve_row(r, labeled, len(pseudo), iterations, d, t))
        log.info("%s seed %d round %d: %d labeled (%.0f%%), %d pseudo; dev MRR %.4f, test MRR %.4f", method, seed,
                 r, labeled.sum(), 100 * labeled.mean(), len(pseudo), d["RR"], t["RR"])
        if r < rounds - 1:
            picks = job.acquire(model, labeled, el, r, budget)
            if labeled[picks].any():
                raise AssertionError("an acquisition picked an already labeled query")
            labeled[picks] = True
        if state_path is not None:
            _save_state(state_path, {"fingerprint": fingerprint, "arithmetic": computes, "method": method,
                                     "seed": seed, "round": r + 1,
                                     "labeled": [q for q, x in zip(pool.qids, labeled) if x], "rows": rows,
                                     "test_metrics": per_query})
        if on_round is not None:
            on_round(r)
    return ActiveRun(pl.DataFrame(rows, schema=ACTIVE_CURVE.columns, orient="row"),
                     pl.DataFrame(per_query, schema=ACTIVE_TEST_METRICS.columns, orient="row"))


def active_job(data: Mapping[str, pl.DataFrame], vectors: pl.DataFrame | None, *, method: str, seed: int,
               spec: TrainSpec, settings: Mapping[str, Any], state_dir: str | Path, relevant_min: int = 1,
               vectors_source: str = "query_vectors") -> ActiveRun:
    """Rule ``active``'s run of the loop (:func:`run_active`) on the train, dev and test candidate pairs of the
    ingest frames ``data`` (each split needs some), with the dense query ``vectors`` for coreset
    (:func:`train_embeddings`; ``vectors_source`` names their file in errors).

    The per-round state lives in ``state_dir``, stamped with a digest of ``spec`` (its recorded form,
    :func:`curricula.experiments.spec.spec_record`) and ``settings`` so that a job resumes only a run of the same
    knobs.
    """
    split = {s: candidate_pairs(data, splits=(s,), relevant_min=relevant_min) for s in ("train", "dev", "test")}
    for name, frame in split.items():
        if frame.height == 0:
            raise ValueError(f"active learning needs {name} candidates; the {name} split is empty")
    embeddings = None if vectors is None else train_embeddings(vectors, split["train"], vectors_source)
    fingerprint = hashlib.sha256(json.dumps({"spec": spec_record(spec), "settings": dict(settings)}, sort_keys=True,
                                            default=str).encode()).hexdigest()[:16]
    return run_active(method, seed, train=split["train"], dev=split["dev"], test=split["test"], qrels=data["qrels"],
                      spec=spec, settings=ActiveSettings.from_config(settings), embeddings=embeddings,
                      state_dir=state_dir, relevant_min=relevant_min, fingerprint=fingerprint)


def train_embeddings(vectors: pl.DataFrame, train: pl.DataFrame, source: str) -> np.ndarray:
    """The ``VECTORS`` of the ``train`` pairs' queries in the pool's order (:class:`QueryPool`, coreset's
    embeddings); a ValueError naming ``source`` when a train query has no vector."""
    order = {qid: i for i, qid in enumerate(vectors["id"].to_list())}
    qids = QueryPool(train).qids
    missing = [x for x in qids if x not in order]
    if missing:
        raise ValueError(f"{source}: no vector for {len(missing)} train queries, e.g. {missing[0]}")
    return np.stack(list(vectors["vector"].to_numpy()))[[order[x] for x in qids]]
