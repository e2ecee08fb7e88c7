"""ConvKNRM's compiled passes (``architecture.compiled: true``, curricula/models/compiled.py): the window vectors and
K-NRM eq. 4 equal torch's path's values and gradients up to float round-off with the same bits on every call, the
whole model with the knob matches torch's path with every compiled pass run, and the knob is in the params of the
runs that set it only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from curricula.experiments.spec import parse_train_spec, spec_params
from curricula.experiments.specs import resolve_ranker
from curricula.models import compiled, resolve_architecture
from curricula.models.compiled import CompiledPooledLogs, CompiledWindowVectors
from curricula.models.convknrm import ConvKNRMModule
from curricula.models.packed import TapSums
from tests.test_compiled_pooling import (
    assert_same_scores,
    assert_same_training_step,
    convknrm_pair,
    needs_compiler,
    values_and_grads,
)


def _table_and_index(rows: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """A tap table whose row ``rows - 4`` is zeros, windows of 1 to 3 taps padded with it plus a bias row, and one
    window whose sum is all negative (ReLU 0, norm 0)."""
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(rows, 24, generator=g) * 0.3
    zero = rows - 4
    table[zero] = 0
    table[rows - 1] = -5.0
    index = torch.randint(0, zero, (4, n), generator=g)
    index[1, : n // 3] = zero
    index[2, : 2 * n // 3] = zero
    index[:, 0] = torch.tensor([rows - 1, zero, zero, rows - 1])
    return table, index, zero


def _windows_both(table, index, zero, grad):
    return values_and_grads([lambda t: CompiledWindowVectors.apply(t, index, zero),
                             lambda t: F.normalize(F.relu(TapSums.apply(t, index)), dim=-1)], table, grad)


@needs_compiler
@pytest.mark.parametrize(("rows", "n"), [(40, 300), (400, 7), (10, 1)])
def test_compiled_window_vectors_equal_the_torch_paths_values_and_gradients(rows, n):
    """Unit vectors ReLU(sum of the window's rows) / max(norm, 1e-12), a window of norm 0 included, and the table's
    gradient, equal torch's (TapSums, ReLU, F.normalize) to float round-off; the zero row's gradient, which no
    parameter receives, is not computed."""
    table, index, zero = _table_and_index(rows, n)
    grad = torch.randn(n, 24, generator=torch.Generator().manual_seed(1))
    (got, d_table), (want, want_d) = _windows_both(table, index, zero, grad)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not got[0].any()  # the all-negative window
    keep = torch.arange(rows) != zero
    torch.testing.assert_close(d_table[keep], want_d[keep], rtol=1e-5, atol=1e-6)
    assert not d_table[zero].any()
    again = CompiledWindowVectors.apply(table.clone(), index.clone(), zero)
    assert torch.equal(again, got)


def _logs_both(soft, q_mask, widths, batch, grad):
    module = ConvKNRMModule(torch.randn(10, 4), [1, 2], channels=3, kernels=soft.shape[0], hidden=2, dropout=0.0,
                            freeze_embeddings=True)
    return values_and_grads([lambda s: CompiledPooledLogs.apply(s, q_mask, tuple(widths), batch),
                             lambda s: module.pooled_logs(s.permute(1, 0, 2), q_mask, widths, batch)], soft, grad)


@needs_compiler
@pytest.mark.parametrize(("count", "sides", "batch", "widths"), [(11, 3, 5, (9, 8, 7)), (5, 2, 3, (40, 1))])
def test_compiled_pooled_logs_equal_the_torch_paths_values_and_gradients(count, sides, batch, widths):
    """K-NRM eq. 4, sum over a query n-gram's valid positions of 0.01 log(max(soft-TF, 1e-10)), laid out query
    n-gram, document n-gram, kernel, and its gradient (0 below the floor) equal torch's to float round-off, soft-TF
    values at, below and far below the floor included; the same bits on every call."""
    g = torch.Generator().manual_seed(2)
    soft = torch.rand(count, sides * batch, sum(widths), generator=g) * 6
    soft[0, :, :3] = 1e-30
    soft[1, 0, 0], soft[1, 0, 1] = 1e-10, 0.0
    q_mask = (torch.rand(batch, sum(widths), generator=g) > 0.3).float()
    grad = torch.randn(batch, len(widths) * sides * count, generator=g)
    (got, d_soft), (want, want_d) = _logs_both(soft, q_mask, widths, batch, grad)
    assert got.shape == want.shape == (batch, len(widths) * sides * count)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(d_soft, want_d, rtol=1e-5, atol=1e-6)
    assert not d_soft[0, :, :3].any() and not d_soft[1, 0, 1]
    assert torch.equal(CompiledPooledLogs.apply(soft.clone(), q_mask, tuple(widths), batch), got)


def _spied(monkeypatch, name: str, calls: list[str]) -> None:
    base = getattr(compiled, name)

    class Spy(base):  # type: ignore[misc, valid-type]
        @staticmethod
        def forward(ctx, *args):
            calls.append(f"{name} forward")
            return base.forward(ctx, *args)

        @staticmethod
        def backward(ctx, *grads):
            calls.append(f"{name} backward")
            return base.backward(ctx, *grads)

    monkeypatch.setattr(compiled, name, Spy)
    if name == "CompiledPooledLogs":
        import curricula.models.convknrm as convknrm
        monkeypatch.setattr(convknrm, name, Spy)


@needs_compiler
def test_convknrm_with_every_compiled_pass_matches_the_torch_path(monkeypatch):
    """``compiled=True``: a training step's logits and every parameter's gradient, and an evaluation pass's scores,
    equal torch's path's up to float round-off, and each of the three compiled passes ran forward and backward."""
    calls: list[str] = []
    for name in ("CompiledWindowVectors", "CompiledRowKernelSum", "CompiledPooledLogs"):
        _spied(monkeypatch, name, calls)
    modules, batch, g = convknrm_pair(compiled=True)
    assert_same_training_step(modules, batch, g)
    assert sorted(calls) == sorted(f"{n} {way}" for n in ("CompiledWindowVectors", "CompiledRowKernelSum",
                                                          "CompiledPooledLogs") for way in ("forward", "backward"))
    calls.clear()
    assert_same_scores(modules, batch)
    assert sorted(calls) == ["CompiledPooledLogs forward", "CompiledRowKernelSum forward",
                             "CompiledWindowVectors forward"]


def test_the_compiled_knob_is_in_the_params_of_the_runs_that_set_it_only():
    """Unset (the default), ``compiled`` stays out of the resolved architecture, so no existing run's params or
    digest changed; set, it is in the params, apart from compiled_pooling's (each another arithmetic)."""
    assert "compiled" not in resolve_architecture("convknrm", {})

    def params(arch):
        run = resolve_ranker({"ranker": "convknrm", "model": "minilm", "architecture": arch, "lr": None})
        return spec_params(parse_train_spec(run))

    plain, every, pooling = params({}), params({"compiled": True}), params({"compiled_pooling": True})
    assert "'compiled'" not in str(plain) and "'compiled'" in str(every)
    assert len({str(plain), str(every), str(pooling)}) == 3
