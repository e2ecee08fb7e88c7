"""Active learning with self-paced pseudo-labelling for rankers (DASL, Wang et al. 2020 §4) and its baselines.

A *sample* is one query with its J candidates. Scores come from T stochastic forward passes with dropout on
(MC-dropout, eq. 7): an array ``passes`` of shape (Q, T, J) holding each candidate's probability of being
relevant (the sigmoid of the ranker's logit, so every score is > 0 as eq. 12 needs), with a boolean ``mask``
(Q, J) marking the real candidates of queries with fewer than J.

Orientation: a *higher* expected loss EL means a *more uncertain* sample (§4.1, on Algorithm 1: "the sample is more
uncertain ... when its EL value is higher"); self-paced learning pseudo-labels the samples with EL < lambda
(eq. 14) and active learning queries the ones with the highest EL.
"""

from __future__ import annotations

import numpy as np

# ----------------------------------------------------------------------------------------------- uncertainty


#: the loop's methods (random, BALD, core-set, DAL and DASL as Wang et al. 2020 compare them; ``all`` labels every
#: query at once), one job per (method, seed); the rules' ``method`` wildcard is built from it
METHODS = ("random", "bald", "coreset", "dal", "dasl", "all")

def normalise_passes(passes: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Eq. 12: each pass's scores divided by their sum over the query's candidates (padding -> 0)."""
    y = np.asarray(passes, dtype=np.float64)
    if mask is not None:
        y = np.where(mask[:, None, :], y, 0.0)
    if np.any(y < 0):
        raise ValueError("eq. 12 needs non-negative relevance scores (use probabilities, not logits)")
    total = y.sum(axis=-1, keepdims=True)
    return np.divide(y, total, out=np.zeros_like(y), where=total > 0)


def dcg_of_order(gains: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Eq. 3: sum_j (2^{y_j} - 1) / log2(1 + pi(j)), with ``order`` listing candidate indices best first.

    ``gains`` (..., J) are the y values, ``order`` (..., J) a permutation of the last axis per row.
    """
    ranked = np.take_along_axis(gains, order, axis=-1)
    discount = 1.0 / np.log2(np.arange(2, gains.shape[-1] + 2, dtype=np.float64))
    return ((np.exp2(ranked) - 1.0) * discount).sum(axis=-1)


def _descending(values: np.ndarray) -> np.ndarray:
    # stable: equal scores keep candidate order, so EL is a pure function of the scores
    return np.argsort(-values, axis=-1, kind="stable")


def expected_loss(passes: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Algorithm 1 / eq. 8-11: EL(X) = c1 - c2 per query, shape (Q,). Always >= 0; 0 when every pass orders
    the candidates alike.

    c1 = mean_t DCG(pi^t, Y^t) with pi^t sorted by Y^t (eq. 9: each pass's own best ordering);
    c2 = mean_t DCG(pi*, Y^t) with pi* sorted by the mean normalised score y_hat (eq. 10-11).
    ``passes`` (Q, T, J) are positive scores (probabilities); ``mask`` (Q, J) marks real candidates.
    """
    y = normalise_passes(passes, mask)  # (Q, T, J); padding = 0 sorts last and adds 0 to DCG
    c1 = dcg_of_order(y, _descending(y)).mean(axis=1)
    y_hat = y.mean(axis=1)  # eq. 11
    star = np.broadcast_to(_descending(y_hat)[:, None, :], y.shape)
    c2 = dcg_of_order(y, star).mean(axis=1)
    return np.maximum(c1 - c2, 0.0)  # >= 0 up to rounding: pi^t maximises DCG(., Y^t)


def bald(passes: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """BALD on the top-1 choice (Houlsby et al. 2011; Gal et al. 2017): mutual information between the answer
    choice and the weights, H(mean_t p_t) - mean_t H(p_t), with p_t the pass's eq.-12 distribution over the
    query's candidates. Higher = the passes disagree more about which candidate is the answer. Shape (Q,)."""
    p = normalise_passes(passes, mask)

    def entropy(x: np.ndarray) -> np.ndarray:
        return -(np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)).sum(axis=-1)

    return np.maximum(entropy(p.mean(axis=1)) - entropy(p).mean(axis=1), 0.0)


# ----------------------------------------------------------------------------------------------- self-paced


def self_paced_indicators(el: np.ndarray, lam: float, inclusive: bool = False) -> np.ndarray:
    """Eq. 14: v_i = 1 where EL(X_i) < lambda (reliable enough to pseudo-label), else 0 (bool array).

    ``inclusive``: EL <= lambda, the authors' released code (``neural/util/trainer.py``,
    ``train_selfPacedLearning``: ``while PLdata[pseudoData_end]['el'] <= ld``), which pairs it with a lambda read off
    the sorted EL themselves (:func:`quantile_lambda0`). There the two differ in kind, not by a hair: EL is exactly 0
    for every query whose MC-dropout passes order its candidates alike, so on a dataset with many such queries the
    quantile is 0, and ``<`` would pseudo-label nothing at any pace (lambda0 * mu^k stays 0): DASL would silently be
    DAL (measured on WikiQA: lambda 0 in every round of every seed)."""
    el = np.asarray(el)
    return el <= lam if inclusive else el < lam


def spl_lambda(lam0: float, mu: float, iteration: int) -> float:
    """Algorithm 2 line 8, the self-paced threshold: lambda after ``iteration`` updates, lambda0 * mu^iteration.

    ``mu`` > 1 is the pace factor; lambda is on the scale of EL (eq. 14 pseudo-labels samples with EL < lambda).
    """
    if mu <= 1:
        raise ValueError(f"the pace factor mu must be > 1 (Algorithm 2), got {mu}")
    return lam0 * mu**iteration


def quantile_lambda0(el: np.ndarray, quantile: float) -> float:
    """An initial self-paced threshold on EL's scale from the unlabeled queries' EL: its ``quantile`` (0-1), so that
    eq. 14 pseudo-labels about that fraction of them at the first pace (lowest EL = most reliable first).

    Wang et al. tune the self-paced parameter on the validation data (§5.1.2; their §5.3 finds pseudo-labelling 30%
    better than 10% or 50% for the self-training baseline ST, not for DASL); EL's absolute scale depends on the
    candidate count and the model, so a quantile carries across datasets where a fixed lambda0 does not. Their
    released code starts from a quantile too: ``neural/util/trainer.py``, ``Trainer.train_selfPacedLearning``, sets
    ``ld = PLdata[int(0.1 * len(PLdata))]['el']``, the 10% quantile of the EL of the queries whose passes all agree
    (:func:`passes_agree_on_top`), and pseudo-labels those with ``el <= ld``.
    """
    if not 0 < quantile <= 1:
        raise ValueError(f"the lambda0 quantile must be in (0, 1], got {quantile}")
    values = np.sort(np.asarray(el, dtype=np.float64))
    if values.size == 0:
        return 0.0
    return float(values[min(values.size - 1, int(quantile * values.size))])  # the authors' PLdata[int(0.1 * len)]


def passes_agree_on_top(passes: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """True for the queries whose MC-dropout passes all put the same candidate on top, shape (Q,).

    Wang et al.'s released code (github BUAAw-ML/Active-Self-paced-Learning, ``active_learning/acquisition.py``,
    ``Acquisition.get_DASL``) takes each pass's top answer (``_index = np.argmax(tp1, axis=1)``), their mode
    (``predict``) and its count (``predict_confidence``, ``scipy.stats.mode``), and pseudo-labels a query only when
    ``predict_confidence == 100``, i.e. when all of its 100 passes (``nsamp``) agree; the paper (§4.2, eq. 14) states
    the EL threshold only. Its pseudo answer is then that unanimous top, which is also the top of the mean scores
    (:func:`pseudo_positive`). ``passes`` (Q, T, J) are the pass scores, ``mask`` (Q, J) the real candidates.
    """
    s = np.asarray(passes, dtype=np.float64)
    if mask is not None:
        s = np.where(mask[:, None, :], s, -np.inf)
    top = np.argmax(s, axis=-1)  # (Q, T): each pass's best candidate
    return (top == top[:, :1]).all(axis=1)


def pseudo_positive(mean_scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """The candidate index each query's pseudo-label marks relevant: the top of the mean-score ordering
    (Wang §3: l_ij = 1 for the best answer). ``mean_scores`` (Q, J)."""
    s = np.asarray(mean_scores, dtype=np.float64)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return np.argmax(s, axis=1)


# ----------------------------------------------------------------------------------------------- acquisition


def k_center_greedy(points: np.ndarray, labeled: np.ndarray, budget: int) -> np.ndarray:
    """Core-Set (Sener & Savarese 2018): ``budget`` indices chosen one by one as the point farthest (Euclidean)
    from every labeled or already chosen point. ``labeled`` is a bool mask; returns indices in pick order.

    Memory O(N): distances to the nearest centre are updated after each pick.
    """
    x = np.asarray(points, dtype=np.float64)
    labeled = np.asarray(labeled, dtype=bool)
    n = len(x)
    budget = min(int(budget), int((~labeled).sum()))
    sq = (x**2).sum(axis=1)

    def dist_to(i: int | np.integer) -> np.ndarray:
        return np.sqrt(np.maximum(sq - 2 * x @ x[i] + sq[i], 0.0))

    nearest = np.full(n, np.inf)
    for j in np.flatnonzero(labeled):
        nearest = np.minimum(nearest, dist_to(j))
    taken = labeled.copy()
    picks = []
    for _ in range(budget):
        cand = np.where(taken, -np.inf, nearest)
        i = int(np.argmax(cand))  # with nothing labeled yet every distance is inf: the first index starts
        picks.append(i)
        taken[i] = True
        nearest = np.minimum(nearest, dist_to(i))
    return np.array(picks, dtype=np.int64)


def top_uncertain(scores: np.ndarray, eligible: np.ndarray, budget: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the ``budget`` highest ``scores`` among ``eligible`` ones; ties broken by a seeded shuffle."""
    idx = np.flatnonzero(eligible)
    if len(idx) == 0 or budget <= 0:
        return np.array([], dtype=np.int64)
    perm = rng.permutation(len(idx))
    idx = idx[perm]
    order = np.argsort(-np.asarray(scores)[idx], kind="stable")
    return np.sort(idx[order[:budget]])


def random_pick(eligible: np.ndarray, budget: int, rng: np.random.Generator) -> np.ndarray:
    """``budget`` indices drawn uniformly without replacement among ``eligible`` ones."""
    idx = np.flatnonzero(eligible)
    return np.sort(rng.choice(idx, size=min(budget, len(idx)), replace=False)) if len(idx) else idx
