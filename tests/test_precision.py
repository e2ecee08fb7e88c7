"""Precision rules (curricula.models.hf): bf16 only for transformers on bf16 hardware, the chosen GPU's compute
capability deciding on CUDA, never fp16, fp32 on CUDA without TF32; and every ranker scoring and training on the CPU
in every precision the schema allows.

No GPU here: the CUDA rules are checked by faking ``torch.cuda.get_device_capability`` / ``is_available`` (the rule is
under test, not CUDA)."""

from __future__ import annotations

import pytest
import torch

from curricula.experiments.spec import parse_train_spec
from curricula.experiments.specs import resolve_ranker
from curricula.models import RANKERS, build_ranker
from curricula.models.hf import (
    FP32_BACKENDS,
    PRECISIONS,
    auto_dtype,
    autocast,
    autocast_dtype,
    cuda_bf16_native,
    fp32_exact,
)
from curricula.plumbing.errors import DeviceError
from curricula.training.losses import binary_ce
from tests.ranker_inputs import CONTEXTS, RESPONSES, spec
from tools.config_reference import load_schema

CPU = torch.device("cpu")


@pytest.fixture
def gpus(monkeypatch) -> dict[int, tuple[int, int]]:
    """Fake CUDA devices: fill the returned dict with index -> compute capability (``cuda`` alone is device 0)."""
    caps: dict[int, tuple[int, int]] = {}

    def capability(device=None) -> tuple[int, int]:
        index = device if isinstance(device, int) else torch.device(device or "cuda").index
        return caps[index or 0]

    def emulation_counts(*args, **kwargs):
        raise AssertionError("is_bf16_supported() counts emulated bf16 and asks the current device")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", emulation_counts)
    return caps


def backend(path: str):
    """``torch.backends.<path>`` (e.g. ``cuda.matmul``)."""
    found = torch.backends
    for part in path.split("."):
        found = getattr(found, part)
    return found


@pytest.fixture
def allow_tf32():
    """A function that turns TF32 on for cuBLAS and cuDNN (as a user's code might); the settings are restored after."""
    saved = {path: backend(path).fp32_precision for path in FP32_BACKENDS}

    def allow() -> None:
        for path in FP32_BACKENDS:
            backend(path).fp32_precision = "tf32"

    yield allow
    for path, value in saved.items():
        backend(path).fp32_precision = value


def tf32_off() -> bool:
    return all(backend(path).fp32_precision == "ieee" for path in FP32_BACKENDS)


# ------------------------------------------------------------------------------------------- the pure rules
def test_bf16_is_native_from_compute_capability_8_0():
    assert not cuda_bf16_native((6, 1)) and not cuda_bf16_native((7, 0)) and not cuda_bf16_native((7, 5))
    assert cuda_bf16_native((8, 0)) and cuda_bf16_native((8, 6)) and cuda_bf16_native((9, 0))
    assert cuda_bf16_native((10, 0)) and cuda_bf16_native((12, 0))


def test_auto_is_bf16_only_for_a_transformer_on_bf16_hardware():
    assert auto_dtype(transformer=True, native_bf16=True) == torch.bfloat16
    assert auto_dtype(transformer=True, native_bf16=False) is None
    assert auto_dtype(transformer=False, native_bf16=True) is None
    assert auto_dtype(transformer=False, native_bf16=False) is None


# ------------------------------------------------------------------------------------------- CUDA, faked
def test_auto_on_cuda_follows_the_capability_and_the_architecture(gpus):
    gpus[0] = (7, 5)  # T4
    assert autocast_dtype("cuda", "auto", transformer=True) is None
    assert autocast_dtype("cuda", "auto", transformer=False) is None
    gpus[0] = (8, 0)  # A100
    assert autocast_dtype("cuda", "auto", transformer=True) == torch.bfloat16
    assert autocast_dtype("cuda", "auto", transformer=False) is None  # convknrm, cnn_qa, lstm_qa stay fp32
    assert autocast_dtype("cuda", "fp32", transformer=True) is None
    assert autocast_dtype("cuda", "bf16", transformer=False) == torch.bfloat16


def test_bf16_forced_below_capability_8_is_a_clear_error(gpus):
    gpus[0] = (7, 5)
    with pytest.raises(DeviceError, match=r"cuda.*capability 7\.5.*use precision fp32") as err:
        autocast_dtype(torch.device("cuda"), "bf16", transformer=True)
    assert "\n" not in str(err.value)
    with pytest.raises(DeviceError, match="capability 7.5"):
        with autocast("cuda", "bf16", transformer=True):
            pass
    assert autocast_dtype("cuda", "fp32", transformer=True) is None


def test_the_chosen_devices_capability_decides(gpus):
    gpus.update({0: (8, 0), 1: (7, 5)})
    assert autocast_dtype("cuda:0", "auto", transformer=True) == torch.bfloat16
    assert autocast_dtype("cuda:1", "auto", transformer=True) is None
    with pytest.raises(DeviceError, match="cuda:1"):
        autocast_dtype(torch.device("cuda:1"), "bf16", transformer=True)
    gpus.update({0: (7, 5), 1: (9, 0)})
    assert autocast_dtype("cuda:1", "auto", transformer=True) == torch.bfloat16
    assert autocast_dtype("cuda:1", "bf16") == torch.bfloat16
    assert autocast_dtype("cuda:0", "auto", transformer=True) is None


def test_autocast_never_uses_fp16(gpus):
    for cap in ((6, 0), (7, 0), (7, 5), (8, 0), (8, 9), (9, 0)):
        gpus[0] = cap
        for device in ("cuda", "cpu"):
            for precision in PRECISIONS:
                for transformer in (False, True):
                    try:
                        dtype = autocast_dtype(device, precision, transformer)
                    except DeviceError:
                        assert (device, precision) == ("cuda", "bf16") and cap < (8, 0)
                        continue
                    assert dtype in (None, torch.bfloat16), (cap, device, precision, transformer)


def test_fp32_on_cuda_turns_tf32_off_and_leaves_the_cpu_alone(gpus, allow_tf32):
    gpus[0] = (8, 0)
    allow_tf32()
    with autocast(CPU, "fp32"), autocast(CPU, "auto"), autocast(CPU, "bf16"):
        pass
    fp32_exact(CPU)
    assert all(backend(path).fp32_precision == "tf32" for path in FP32_BACKENDS)
    with autocast("cuda", "auto", transformer=False):  # convknrm on an A100: fp32, exact
        assert tf32_off()
    assert tf32_off()  # still off for the backward pass, which runs after the context
    allow_tf32()
    with autocast(torch.device("cuda:0"), "fp32", transformer=True):
        assert tf32_off()
    allow_tf32()
    fp32_exact("cuda:0")
    assert tf32_off()


# ------------------------------------------------------------------------------------------- every ranker on the CPU
def test_the_matrix_below_covers_the_schemas_precisions():
    """The rankers below are the registry's (the schema names none: a plugin may register more)."""
    props = load_schema()["properties"]
    assert "enum" not in props["train"]["properties"]["ranker"]
    for section in ("train", "teacher", "dense"):
        assert set(props[section]["properties"]["precision"]["enum"]) == set(PRECISIONS)


def _rankers():
    return [pytest.param(name, marks=pytest.mark.slow) if name == "cross_encoder" else name for name in RANKERS]


# fp32 in the fast tier; bf16 and auto (bf16 where the CPU has it) in `make test`: without bf16 instructions a bf16
# step is emulated and several times slower
@pytest.mark.parametrize("precision", [p if p == "fp32" else pytest.param(p, marks=pytest.mark.slow)
                                       for p in PRECISIONS])
@pytest.mark.parametrize("name", _rankers())
def test_every_ranker_scores_and_trains_on_the_cpu_in_every_precision(name, precision):
    values = spec(name) if name == "cross_encoder" else spec(name, channels=8, hidden=8)
    ranker = build_ranker(parse_train_spec(resolve_ranker(values)).ranker, seed=1)
    with torch.no_grad():
        logits = ranker.eval().pair_logits(CONTEXTS, RESPONSES, CPU, precision)
    assert logits.shape == (len(CONTEXTS),) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    before = [p.detach().clone() for p in ranker.parameters()]
    optimizer = torch.optim.Adam([p for p in ranker.parameters() if p.requires_grad], lr=1e-3)
    labels = torch.tensor([1.0, 0.0] * (len(CONTEXTS) // 2))
    ranker.train()
    for _ in range(3):
        loss = binary_ce(ranker.pair_logits(CONTEXTS, RESPONSES, CPU, precision), labels).mean()
        assert torch.isfinite(loss), loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    assert any(not torch.equal(a, p) for a, p in zip(before, ranker.parameters()))
    assert all(torch.isfinite(p).all() for p in ranker.parameters())


def bf16_representable(values: torch.Tensor) -> torch.Tensor:
    """Which fp32 values a bf16 holds exactly (a score that left a bf16 head)."""
    return values.bfloat16().float() == values


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_cross_encoder_scores_are_fp32_when_its_body_runs_in_bf16(pooling):
    """Under bf16 autocast only the transformer body runs in bf16: the pooler, the head and the loss are fp32, so
    scores are not bf16-quantised (with a bf16 head a logit near 1 moves in steps of 2^-7 and a query's candidates
    tie). Fails when any of them runs in bf16: then every score is a bf16 value."""
    from curricula.models.cross_encoder import CrossEncoderRanker
    from curricula.models.heads import load_cross_encoder
    from curricula.models.hf import load_tokenizer
    from tools.smoke.checks import smoke_pairs

    model = load_cross_encoder("minilm", layers=1, seed=3, pooling=pooling)
    torch.nn.init.normal_(model.head.weight if pooling == "mean" else model.classifier.weight, std=1.0)
    ranker = CrossEncoderRanker(model, load_tokenizer("minilm"), 32)
    contexts, responses, labels = smoke_pairs(64)
    batch = ranker.collate(ranker.encode(contexts, responses))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = ranker.forward(batch)
        loss = binary_ce(logits, torch.from_numpy(labels)).mean()
    assert logits.dtype == loss.dtype == torch.float32
    assert float(bf16_representable(logits).float().mean()) < 0.1, logits[:8]
    assert len(torch.unique(logits)) == len(set(zip(contexts, responses)))
    with torch.no_grad():
        exact = ranker.forward(batch)  # all fp32: the bf16 body moves the scores, the head adds no rounding of its own
    assert float((logits - exact).abs().max()) < 0.05 * float(exact.abs().max())
