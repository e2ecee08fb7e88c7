"""The compiled kernel sums (``architecture.compiled_pooling``, curricula/models/compiled.py): the torch path's
values and gradients up to float round-off, the same bits on every call, built once per source and compiler, a clear
error without a compiler, and a knob that leaves every run that does not set it as it was."""

from __future__ import annotations

import pytest
import torch

from curricula.experiments.spec import parse_train_spec, spec_params
from curricula.experiments.specs import resolve_ranker
from curricula.models import compiled, resolve_architecture
from curricula.models.compiled import (
    CompiledKernelError,
    CompiledRowKernelSum,
    build,
    compiled_applies,
    compiler,
    library,
)
from curricula.models.convknrm import ConvKNRMModule
from curricula.models.kernel_pooling import RowKernelSum, kernel_mus, kernel_sigmas


def _no_compiler() -> str:
    """Why the compiled kernel sums cannot be built here (the error :func:`compiler` raises), or ''."""
    try:
        compiler()
    except CompiledKernelError as err:
        return str(err)
    return ""


NO_COMPILER = _no_compiler()
#: the tests that build and run the C code (the others need no compiler)
needs_compiler = pytest.mark.skipif(bool(NO_COMPILER), reason=NO_COMPILER or "a C compiler is on PATH")


def _rows(n: int, lq: int, batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine-like match rows in [-1, 1] with a few exact and near-exact matches, and each row's pair (unsorted)."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.rand(n, lq, generator=g) * 2 - 1
    rows[torch.rand(n, lq, generator=g) < 0.03] = 1.0
    rows[torch.rand(n, lq, generator=g) < 0.01] = 0.9996
    return rows, torch.randint(0, batch, (n,), generator=g)


def values_and_grads(functions, x: torch.Tensor, grad: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(output, d x) of each of ``functions`` applied to a fresh copy of ``x``, under the upstream gradient ``grad``."""
    out = []
    for function in functions:
        copy = x.clone().requires_grad_(True)
        value = function(copy)
        value.backward(grad)
        out.append((value.detach(), copy.grad))
    return out


def _both(rows, pair, batch, count, grad):
    """(forward, d rows) of the compiled pass and of the torch path under the same upstream gradient."""
    mus, sigmas = torch.tensor(kernel_mus(count)), torch.tensor(kernel_sigmas(count))
    return values_and_grads([lambda r, f=f: f.apply(r, pair, batch, mus, sigmas)
                             for f in (CompiledRowKernelSum, RowKernelSum)], rows, grad)


def convknrm_pair(**knob: bool) -> tuple[list[ConvKNRMModule], tuple[torch.Tensor, ...], torch.Generator]:
    """Two ConvKNRM modules with the same weights (trainable embeddings), the first with ``knob`` set, the second
    on torch's path; a batch of six pairs, two per context, of ragged lengths; the generator that drew it."""
    torch.manual_seed(0)
    emb = torch.randn(60, 8)
    modules = [ConvKNRMModule(emb, [1, 2, 3], channels=6, kernels=11, hidden=4, dropout=0.0, freeze_embeddings=False,
                              **(knob if first else {})) for first in (True, False)]
    modules[1].load_state_dict(modules[0].state_dict())
    g = torch.Generator().manual_seed(4)
    q, d = torch.randint(1, 60, (6, 9), generator=g), torch.randint(1, 60, (6, 7), generator=g)
    q_mask = (torch.arange(9)[None] < torch.tensor([9, 9, 5, 5, 3, 3])[:, None]).float()
    d_mask = (torch.arange(7)[None] < torch.tensor([7, 2, 6, 4, 7, 1])[:, None]).float()
    q, q_mask = q[[0, 0, 2, 2, 4, 4]], q_mask[[0, 0, 2, 2, 4, 4]]
    return modules, (q, q_mask, d, d_mask), g


def assert_same_training_step(modules, batch, g: torch.Generator) -> None:
    """The two modules' training-mode logits, and every parameter's gradient under random weights on them (each
    gradient non-zero), equal up to float round-off."""
    logits = [m.train()(*batch) for m in modules]
    torch.testing.assert_close(logits[0], logits[1], rtol=1e-5, atol=1e-5)
    w = torch.randn(logits[0].shape, generator=g)
    for out in logits:
        (out * w).sum().backward()
    for (name, a), b in zip(modules[0].named_parameters(), modules[1].parameters()):
        assert a.grad is not None and a.grad.abs().sum() > 0, name
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5, msg=name)


def assert_same_scores(modules, batch) -> None:
    """The two modules' evaluation-mode scores, without gradients, equal up to float round-off."""
    with torch.no_grad():
        scores = [m.eval()(*batch) for m in modules]
    torch.testing.assert_close(scores[0], scores[1], rtol=1e-5, atol=1e-5)


@needs_compiler
@pytest.mark.parametrize(("n", "lq", "batch", "count"), [(300, 37, 12, 11), (90, 300, 5, 21), (40, 9, 3, 5)])
def test_compiled_kernel_sums_equal_the_torch_paths_values_and_gradients(n, lq, batch, count):
    """Forward soft-TF and the gradient on the match rows equal the torch path's (RowKernelSum) to float round-off,
    over more positions than one block of the C loop (300 > 128), for 5, 11 and 21 kernels."""
    rows, pair = _rows(n, lq, batch)
    grad = torch.randn(batch, count, lq, generator=torch.Generator().manual_seed(1))
    (soft, d_rows), (want_soft, want_d) = _both(rows, pair, batch, count, grad)
    torch.testing.assert_close(soft, want_soft, rtol=2e-5, atol=1e-5)
    scale = want_d.abs().max().item()
    torch.testing.assert_close(d_rows, want_d, rtol=1e-4, atol=2e-5 * scale)
    assert (d_rows - want_d).norm() / want_d.norm() < 1e-5


@needs_compiler
def test_compiled_kernel_sums_give_the_same_bits_on_every_call_and_zeros_without_rows():
    rows, pair = _rows(200, 40, 7, seed=2)
    mus, sigmas = torch.tensor(kernel_mus(11)), torch.tensor(kernel_sigmas(11))
    a = CompiledRowKernelSum.apply(rows, pair, 7, mus, sigmas)
    b = CompiledRowKernelSum.apply(rows.clone(), pair.clone(), 7, mus, sigmas)
    assert torch.equal(a, b) and a.shape == (7, 11, 40)
    empty = CompiledRowKernelSum.apply(rows[:0], pair[:0], 3, mus, sigmas)
    assert empty.shape == (3, 11, 40) and not empty.any()


def test_the_compiled_path_applies_to_constant_kernels_on_cpu_float32_rows_only():
    rows, _ = _rows(10, 8, 2)
    mus, sigmas = torch.tensor(kernel_mus(11)), torch.tensor(kernel_sigmas(11))
    assert compiled_applies(rows, mus, sigmas)
    assert not compiled_applies(rows.double(), mus, sigmas)
    assert not compiled_applies(rows, mus.clone().requires_grad_(True), sigmas)
    uneven = torch.tensor([1.0, 0.9, 0.5, 0.3, -0.9])  # soft centres not evenly spaced: no ladder
    assert not compiled_applies(rows, uneven, torch.tensor(kernel_sigmas(5)))


@needs_compiler
def test_the_library_is_built_once_per_source_and_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULA_KERNEL_CACHE", str(tmp_path))
    first = build()
    stamp = first.stat().st_mtime_ns
    assert build() == first and first.stat().st_mtime_ns == stamp and first.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temporary left behind
    assert library() is library()


def test_without_a_compiler_the_error_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("CURRICULA_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(CompiledKernelError, match="no 'no-such-compiler-here' on PATH.*leave compiled and compiled_pooling unset"):
        build()


@needs_compiler
def test_convknrm_with_compiled_pooling_matches_the_torch_path(monkeypatch):
    """A training step's logits and every parameter's gradient, and the scores of an evaluation pass, equal the
    torch path's up to float round-off; the compiled pass is the one that ran (forward and backward)."""
    calls = []

    class Spy(CompiledRowKernelSum):
        @staticmethod
        def forward(ctx, *args):
            calls.append("forward")
            return CompiledRowKernelSum.forward(ctx, *args)

        @staticmethod
        def backward(ctx, grad):
            calls.append("backward")
            return CompiledRowKernelSum.backward(ctx, grad)

    monkeypatch.setattr(compiled, "CompiledRowKernelSum", Spy)
    modules, batch, g = convknrm_pair(compiled_pooling=True)
    assert_same_training_step(modules, batch, g)
    assert_same_scores(modules, batch)
    assert calls == ["forward", "backward", "forward"]


def test_the_knob_is_in_the_params_of_the_runs_that_set_it_only():
    """Unset (the default), compiled_pooling stays out of the resolved architecture, so no existing run's params or
    digest changed; set, it is in the params (another arithmetic, another run)."""
    assert "compiled_pooling" not in resolve_architecture("convknrm", {})
    assert resolve_architecture("convknrm", {"compiled_pooling": True})["compiled_pooling"] is True

    def params(arch):
        run = resolve_ranker({"ranker": "convknrm", "model": "minilm", "architecture": arch, "lr": None})
        return spec_params(parse_train_spec(run))

    plain, compiled = params({}), params({"compiled_pooling": True})
    assert "compiled_pooling" not in str(plain) and "compiled_pooling" in str(compiled)
    assert plain != compiled
