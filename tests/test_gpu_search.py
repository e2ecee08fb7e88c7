"""The neighbour search's GPU branch, as far as a CPU can check it: which path a job takes (a fake faiss module), the
piece plan for a 16 GB card, the exact merge of pieces against one whole search, the whole branch wired through
``neighbors`` with a stand-in GPU faiss that computes on the CPU, and the comparison the smoke check makes. The GPU
search itself runs only where a GPU and faiss-gpu are (the ``gpu`` test at the end)."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import faiss
import numpy as np
import polars as pl
import pytest
import torch

from curricula.models import device as device_module
from curricula.retrieval import dense, gpu_search
from curricula.retrieval.gpu_search import GPU_RESERVE, choose_search_device, merge_topk, neighbors_device, plan_pieces
from tools.smoke.checks import Sizes, neighbour_ids
from tools.smoke.verdicts import TIE_ATOL, neighbours_verdict

IP = faiss.METRIC_INNER_PRODUCT


def frame(matrix: np.ndarray, prefix: str) -> pl.DataFrame:
    return dense.vectors_frame([f"{prefix}{i}" for i in range(len(matrix))], matrix)


def integer_vectors(rng, n: int, dim: int = 6) -> np.ndarray:
    """Small-integer vectors: every inner product is exact in float32, so ties are exact and everywhere."""
    return rng.integers(-2, 3, (n, dim)).astype(np.float32)


class FakeGpuFaiss(SimpleNamespace):
    """faiss as the GPU build presents it, computing on the CPU: records the calls the GPU branch makes."""

    def __init__(self, gpus: int = 1):
        calls: list[tuple] = []

        class Config:
            device, useFloat16 = -1, True

        def whole_index(res, dim, config):
            calls.append(("GpuIndexFlatIP", config.device, config.useFloat16))
            return faiss.IndexFlatIP(dim)

        def knn_gpu(res, q, xb, k, metric, device):
            assert k <= gpu_search.GPU_MAX_K and metric == IP and xb.flags.c_contiguous
            calls.append(("knn_gpu", device, len(xb), k))
            return faiss.knn(q, xb, k, metric=metric)

        def knn(q, xb, k, metric):
            calls.append(("knn", len(xb), k))
            return faiss.knn(q, xb, k, metric=metric)

        super().__init__(StandardGpuResources=lambda: calls.append(("resources",)) or object(),
                         get_num_gpus=lambda: gpus, GpuIndexFlatConfig=Config, GpuIndexFlatIP=whole_index,
                         knn_gpu=knn_gpu, knn=knn, METRIC_INNER_PRODUCT=IP, __version__="1.15.1 (stand-in)",
                         calls=calls)


# ------------------------------------------------------------------------------------------- which path a job takes
def test_the_neighbour_jobs_device_follows_the_environment():
    assert neighbors_device({"dense": {"device": "auto"}, "gpus": {"cuda": "13"}}) == "cpu"
    assert neighbors_device({"dense": {"device": "cuda"}, "gpus": {}}) == "cpu"  # default: CUDA 13, faiss-cpu
    assert neighbors_device({"dense": {"device": "auto"}, "gpus": {"cuda": "12"}}) == "auto"
    assert neighbors_device({"dense": {"device": "cpu"}, "gpus": {"cuda": "12"}}) == "cpu"


def test_the_search_takes_the_gpu_only_with_a_cuda_device_and_faiss_gpu(caplog):
    asked = []

    def select(device):
        asked.append(device)
        return torch.device("cuda", 1)

    caplog.set_level(logging.INFO, logger="curricula.retrieval.gpu_search")
    assert choose_search_device("auto", FakeGpuFaiss(), select) == 1 and asked == ["auto"]
    assert "exact search on the GPU: cuda:1" in caplog.text
    assert choose_search_device("cpu", FakeGpuFaiss(), select) is None and asked == ["auto"]  # no card claimed
    cpu_build = SimpleNamespace(get_num_gpus=lambda: 0)  # faiss-cpu: no StandardGpuResources
    assert choose_search_device("auto", cpu_build, select) is None and asked == ["auto"]
    assert "has no GPU here (faiss-cpu)" in caplog.text
    caplog.clear()
    assert choose_search_device("cuda", FakeGpuFaiss(gpus=0), select) is None and asked == ["auto"]
    assert [r.levelname for r in caplog.records] == ["WARNING"] and "faiss-gpu, but it sees no GPU" in caplog.text
    assert choose_search_device("auto", FakeGpuFaiss(), lambda d: torch.device("cpu")) is None


# ----------------------------------------------------------------------------------------------------- the plan
def test_pieces_planned_for_a_16_gb_card():
    """MS MARCO's passages (8,841,823 x 384, 13.6 GB in fp32) beside two 200k-doc pools: on a 16 GB card (15 GiB free
    after the CUDA context) the small pools stay whole and the large one is searched in two pieces; on a 40 GB card
    all stay whole. The card never holds more than the budget."""
    pools, dim = [200_000, 200_000, 8_841_823], 384
    budget = int(15 * 2**30) - GPU_RESERVE
    plan = plan_pieces(pools, dim, budget)
    assert plan[:2] == pools[:2] and plan[2] < pools[2] and math.ceil(pools[2] / plan[2]) == 2
    assert (sum(pools[:2]) + plan[2]) * 4 * dim <= budget
    assert plan_pieces(pools, dim, int(39 * 2**30) - GPU_RESERVE) == pools
    assert plan_pieces([0, 10], 4, 1000, min_piece=0) == [0, 10]
    with pytest.raises(ValueError, match=r"too little to search 8,841,823 docs .* set dense.device: cpu"):
        plan_pieces(pools, dim, int(0.75 * 2**30))  # the small pools leave 0.18 GiB: less than one piece's minimum


@pytest.mark.parametrize("k", [1, 7, 50])
def test_pieces_merged_equal_one_whole_search_ties_included(k):
    """The pieces' lists merged (score, then doc index) give exactly the whole search's list, through the same
    tie handling at the k-th place, on vectors tied everywhere."""
    rng = np.random.default_rng(4)
    X, Q = integer_vectors(rng, 700), integer_vectors(rng, 60)
    whole = faiss.IndexFlatIP(X.shape[1])
    whole.add(X)

    bounds = [(0, 250), (250, 333), (333, 600), (600, 700)]  # uneven pieces, not aligned to anything

    def pieced(q, width):
        parts = []
        for a, b in bounds:
            D, I = faiss.knn(q, X[a:b], min(width, b - a), metric=IP)
            parts.append((D, I + a))
        return merge_topk(parts, width)

    D1, I1 = dense._topk(whole.search, Q, k, len(X))
    D2, I2 = dense._topk(pieced, Q, k, len(X))
    np.testing.assert_array_equal(I1, I2)
    np.testing.assert_array_equal(D1, D2)
    exact = Q.astype(np.float64) @ X.T.astype(np.float64)  # the order the CPU path promises: score, then doc index
    want = np.lexsort((np.broadcast_to(np.arange(len(X)), exact.shape), -exact), axis=-1)[:, :k]
    np.testing.assert_array_equal(I1, want)


@pytest.mark.parametrize("free_docs", [10_000, 2_300])  # every pool whole; the large pool in pieces
def test_neighbours_through_the_gpu_branch_equal_the_cpu_path(monkeypatch, free_docs):
    """``neighbors(device="cuda")`` with a stand-in GPU faiss (computing on the CPU) gives the CPU path's table byte
    for byte: one StandardGpuResources for all pools and chunks, fp32, pieces merged exactly, widened searches past
    the GPU's k-selection on the CPU."""
    rng = np.random.default_rng(5)
    Q, X = frame(integer_vectors(rng, 90), "q"), frame(integer_vectors(rng, 3000), "d")
    cpu = dense.neighbors(Q, X, 12, chunk_size=16, progress=False, device="cpu")
    fake = FakeGpuFaiss()
    monkeypatch.setitem(__import__("sys").modules, "faiss", fake)
    monkeypatch.setattr(dense, "select_device", lambda d: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: (free_docs * 24 + GPU_RESERVE, 16 * 2**30))
    monkeypatch.setattr(device_module, "log_device", lambda *args, **kwargs: {})
    monkeypatch.setattr(gpu_search, "MIN_PIECE", 0)
    monkeypatch.setattr(gpu_search, "GPU_MAX_K", 16)  # so that the widened searches of tied rows pass it here
    gpu = dense.neighbors(Q, X, 12, chunk_size=16, progress=False, device="cuda")
    assert gpu.equals(cpu)
    kinds = {call[0] for call in fake.calls}
    assert [c for c in fake.calls if c[0] == "resources"] == [("resources",)]
    assert kinds == ({"resources", "GpuIndexFlatIP", "knn"} if free_docs > 3000 else {"resources", "knn_gpu", "knn"})
    assert all(c[1:] == (0, False) for c in fake.calls if c[0] == "GpuIndexFlatIP")  # the chosen card, fp32
    assert all(c[2] <= free_docs for c in fake.calls if c[0] == "knn_gpu")  # no piece larger than the card takes


@pytest.mark.gpu
def test_gpu_search_agrees_with_faiss_cpu():
    """On a GPU node with the CUDA 12 environment (faiss-gpu): the GPU's lists are faiss-cpu's apart from near-ties."""
    if not gpu_search.faiss_has_gpu(faiss):
        pytest.skip("this environment's faiss has no GPU support (faiss-cpu); the CUDA 12 environment has faiss-gpu")
    rng = np.random.default_rng(7)
    unit = rng.standard_normal((5000, 384)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    sizes = Sizes(texts=len(unit), k=100)
    cpu_ids, cpu_scores = neighbour_ids(unit, sizes)  # k + 1 wide: a tie across the k-th place is seen
    gpu_ids, gpu_scores = neighbour_ids(unit, sizes, torch.device("cuda"))
    verdict = neighbours_verdict(gpu_ids, cpu_ids, cpu_scores, sizes.k)
    assert verdict.ok, verdict.detail
    np.testing.assert_allclose(gpu_scores, cpu_scores, rtol=0, atol=TIE_ATOL)
