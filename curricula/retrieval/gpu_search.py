"""The exact neighbour search on a GPU (FAISS's GPU build, in the CUDA 12 environment) and what a CPU can check of it.

The neighbour jobs search on the GPU when the job's device is a CUDA device and this environment's faiss has GPU
support (``faiss-gpu`` on a machine with a card: :func:`faiss_has_gpu`), else with faiss-cpu, as before
(:func:`choose_search_device`). In the CUDA 13 environment, which carries faiss-cpu, they are CPU jobs
(:func:`neighbors_device`).

On the card the doc vectors stay fp32, so the scores are the CPU's up to the last float bits (cuBLAS sums in another
order) and the lists are faiss-cpu's apart from near-ties. One ``StandardGpuResources`` serves every pool of a job.
A pool is kept whole on the card while it fits (smallest pools first); one that does not fit (MS MARCO's 8.8M
passages x 384 dimensions are 13.6 GB in fp32, beyond what a 16 GB card leaves free with a pool beside them) is
searched in pieces, each copied to the card for a search, and the pieces' lists are merged exactly: by score, then by
doc index (:func:`plan_pieces`, :func:`merge_topk`). fp16 storage would halve the memory but change the scores in
the third decimal and reorder near-ties by the hundred at k = 1,000, so it is not used. Lists wider than FAISS's GPU
k-selection (:data:`GPU_MAX_K`; only the widened searches of rows tied at the k-th place) run on the CPU.

The GPU smoke check (:mod:`tools.smoke.gpu`) compares the card's lists with faiss-cpu's reference apart from ties.
Nothing of the GPU branch has run on a GPU yet: the tests check the choice of path with a fake faiss module, the
piece plan, and the exact merge against one whole search, on the CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: the widest list FAISS's GPU k-selection returns (GPU_MAX_SELECTION_K of faiss/gpu/utils/DeviceDefs.cuh)
GPU_MAX_K = 2048
#: bytes of the card left free beside the doc vectors: FAISS's scratch memory (StandardGpuResources takes up to
#: 1.5 GiB on a card over 8 GiB), a chunk's queries and lists (1,024 x 2,048 x 12 bytes), allocator slack
GPU_RESERVE = 2 * 2**30
#: the smallest piece worth copying to the card (bytes); less free memory than this stops the job
MIN_PIECE = 256 * 2**20

Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def neighbors_device(config: Mapping[str, Any]) -> str:
    """The device the neighbour jobs (rule ``dense_neighbors_shard``) run with: the dense model's (``dense.device``)
    in the CUDA 12 environment (``gpus.cuda: "12"``, whose FAISS is faiss-gpu), else ``cpu`` (the CUDA 13
    environment carries faiss-cpu, so there the jobs ask for no card)."""
    settings = config.get("gpus") or {}
    return str(config["dense"]["device"]) if str(settings.get("cuda", "13")) == "12" else "cpu"


def faiss_has_gpu(faiss: Any) -> bool:
    """Whether this faiss can search on a GPU here: a GPU build (``StandardGpuResources``) that sees a card."""
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def choose_search_device(device: str, faiss: Any, select: Callable[[str], Any]) -> int | None:
    """The CUDA device index the exact search runs on, or None for the CPU, logging which and why.

    ``device`` is the job's (``cpu``, ``auto``, ``cuda``, ``cuda:N``); ``select`` chooses the job's torch device from
    it (:func:`curricula.models.device.select_device`: it claims the card, and stops a job given a card it cannot
    use). The GPU needs this environment's faiss to have GPU support (:func:`faiss_has_gpu`)."""
    device = str(device)
    if device == "cpu":
        log.info("exact search on the CPU (device: cpu)")
        return None
    if not faiss_has_gpu(faiss):
        build = "faiss-cpu" if not hasattr(faiss, "StandardGpuResources") else "faiss-gpu, but it sees no GPU"
        say = log.info if device == "auto" else log.warning
        say("exact search on the CPU: this environment's faiss has no GPU here (%s); the GPU search needs the CUDA "
            "12 environment (gpus.cuda: \"12\") on a GPU node", build)
        return None
    chosen = select(device)
    if getattr(chosen, "type", "cpu") != "cuda":
        log.info("exact search on the CPU (device %s resolved to %s)", device, chosen)
        return None
    index = chosen.index if chosen.index is not None else 0
    log.info("exact search on the GPU: cuda:%d, FAISS %s", index, getattr(faiss, "__version__", "?"))
    return index


def plan_pieces(pool_rows: Sequence[int], dim: int, budget: int, min_piece: int | None = None) -> list[int]:
    """Docs per piece for each pool, on a card with ``budget`` bytes free for doc vectors (fp32: 4 x ``dim`` bytes a
    doc). Pools are kept whole on the card (piece = the pool) smallest first while they fit; a pool that does not fit
    is searched in pieces of what is left, each copied to the card for a search and freed after it. Raises ValueError
    when less than ``min_piece`` bytes (default :data:`MIN_PIECE`) or less than one doc are left for such a pool."""
    row, left = 4 * dim, budget
    min_piece = MIN_PIECE if min_piece is None else min_piece
    plan = [0] * len(pool_rows)
    for i in sorted(range(len(pool_rows)), key=lambda i: pool_rows[i]):
        if pool_rows[i] * row <= left:
            plan[i], left = pool_rows[i], left - pool_rows[i] * row
        elif left < max(min_piece, row):
            raise ValueError(f"the GPU has {max(left, 0) / 2**30:.2f} GiB free for doc vectors beside the other pools, "
                             f"too little to search {pool_rows[i]:,} docs of {dim} dimensions in pieces; free the "
                             f"card (gpus.slots: 1) or set dense.device: cpu")
        else:
            plan[i] = left // row
    return plan


def merge_topk(parts: Sequence[tuple[np.ndarray, np.ndarray]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``width`` of several pieces' lists ((scores, global doc indexes), each query's row sorted or not):
    by score descending, then doc index ascending, as one search over all the pieces' docs orders them."""
    D = np.concatenate([d for d, _ in parts], axis=1)
    I = np.concatenate([i for _, i in parts], axis=1)
    order = np.lexsort((I, -D), axis=-1)[:, :width]
    return np.take_along_axis(D, order, axis=1), np.take_along_axis(I, order, axis=1)


def _gpu_search(faiss: Any, res: Any, docs: np.ndarray, device: int, piece: int) -> tuple[Search, str]:
    """One pool's exact inner-product search on card ``device``: resident (``GpuIndexFlatIP``, fp32) when ``piece``
    covers the pool, else in pieces of ``piece`` docs merged exactly; lists wider than :data:`GPU_MAX_K` on the CPU."""
    n, dim = docs.shape
    ip = faiss.METRIC_INNER_PRODUCT
    if piece >= n:
        config = faiss.GpuIndexFlatConfig()
        config.device, config.useFloat16 = device, False
        index = faiss.GpuIndexFlatIP(res, dim, config)
        index.add(docs)
        on_card, kind = index.search, f"faiss GpuIndexFlatIP (cuda:{device}, fp32, whole)"
    else:
        starts = range(0, n, piece)

        def on_card(q: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
            parts = []
            for a in starts:
                D, I = faiss.knn_gpu(res, q, docs[a:a + piece], min(width, len(docs[a:a + piece])), metric=ip,
                                     device=device)
                parts.append((D, I + a))
            return merge_topk(parts, width)

        kind = f"faiss knn_gpu (cuda:{device}, fp32, {len(starts)} pieces of <= {piece:,} docs, merged exactly)"

    def search(q: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        if width > GPU_MAX_K:  # beyond FAISS's GPU k-selection: only the widened searches of rows tied at the k-th
            return faiss.knn(q, docs, width, metric=ip)
        return on_card(q, width)

    setattr(search, "resources", res)  # the GPU index and pieces need the resources alive as long as the search
    return search, kind


def gpu_searches(faiss: Any, pools: Sequence[np.ndarray | None], device: int, free: int,
                 reserve: int = GPU_RESERVE, min_piece: int | None = None) -> list[tuple[Search, str] | None]:
    """Exact searches over each pool (None stays None) on card ``device`` with ``free`` bytes free there: one
    ``StandardGpuResources`` for all, pools whole or in pieces by :func:`plan_pieces` with ``free - reserve`` bytes."""
    res = faiss.StandardGpuResources()
    sizes = [0 if X is None else len(X) for X in pools]
    dim = next((X.shape[1] for X in pools if X is not None), 1)
    plan = plan_pieces(sizes, dim, free - reserve, min_piece)
    log.info("GPU memory: %.2f GiB free, %.2f GiB kept back; pools of %s docs in pieces of %s", free / 2**30,
             reserve / 2**30, "/".join(map(str, sizes)), "/".join(map(str, plan)))
    return [None if X is None else _gpu_search(faiss, res, X, device, piece) for X, piece in zip(pools, plan)]
