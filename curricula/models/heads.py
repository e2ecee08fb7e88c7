"""A one-logit cross-encoder on a local transformer checkpoint: its head (``[CLS]`` or mean-pooled), computing in fp32
under autocast, and its folder in the layouts Hugging Face and sentence-transformers load.

* :func:`load_cross_encoder` builds the model: a Hugging Face ``*ForSequenceClassification`` (``[CLS]`` pooler and
  classifier) or :class:`MeanPooledCrossEncoder` (mean of the token states, then a linear head), a new head seeded, a
  trained one read back; :func:`save_cross_encoder` writes it atomically.
* :func:`fp32_head` makes the pooler and the head compute in fp32 inside any autocast context, so that under bf16
  autocast only the transformer body runs in bf16 and scores leave the model as fp32 values.

Loading checkpoints offline, devices and precision are :mod:`curricula.models.hf`'s.
"""

from __future__ import annotations

import json
import logging
import types
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
import transformers

from curricula.models.hf import (
    check_loading_info,
    layer_kwargs,
    load_encoder,
    mean_pool,
    model_config,
    quiet_transformers,
    resolve_model_dir,
    save_model,
)
from curricula.plumbing.atomic import write_dir_atomically

log = logging.getLogger(__name__)

#: how a cross-encoder turns the last hidden states into its one logit
POOLINGS = ("cls", "mean")


def _as_fp32(value: Any) -> Any:
    return value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def _forward_in_fp32(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """``type(self).forward`` with autocast off and floating inputs cast to fp32 (bound by :func:`run_in_fp32`)."""
    args = tuple(_as_fp32(a) for a in args)
    kwargs = {key: _as_fp32(value) for key, value in kwargs.items()}
    with torch.autocast(next(self.parameters()).device.type, enabled=False):
        return type(self).forward(self, *args, **kwargs)


def run_in_fp32(module: torch.nn.Module) -> torch.nn.Module:
    """Make ``module`` compute in fp32 inside any autocast context (its floating inputs cast up, autocast off for its
    own forward), keeping its class, parameters and state-dict keys. A cross-encoder's pooler and head go through
    it, so that under bf16 autocast only the transformer body runs in bf16 and scores leave the model as fp32 values
    rather than bf16-quantised ones (a bf16 logit near 3 has a step of 0.016, so a query's candidates tie). The
    forward is bound to the instance, so ``copy.deepcopy`` rebinds it to the copy. Returns ``module``."""
    setattr(module, "forward", types.MethodType(_forward_in_fp32, module))
    return module


def fp32_head(model: torch.nn.Module) -> torch.nn.Module:
    """Run a one-logit cross-encoder's pooler and classification head in fp32 (:func:`run_in_fp32`): the head of a
    :class:`MeanPooledCrossEncoder` (its mean pooling is fp32 already), or a Hugging Face sequence classifier's
    ``[CLS]`` pooler (where the model has one) and its ``classifier`` / ``score`` head. Returns ``model``."""
    if isinstance(model, MeanPooledCrossEncoder):
        run_in_fp32(model.head)
        return model
    pooler = getattr(getattr(model, "base_model", None), "pooler", None)
    head = getattr(model, "classifier", None) or getattr(model, "score", None)
    if not isinstance(head, torch.nn.Module):
        raise TypeError(f"{type(model).__name__}: no classifier or score head to run in fp32")
    for part in (pooler, head):
        if isinstance(part, torch.nn.Module):
            run_in_fp32(part)
    return model


class MeanPooledCrossEncoder(torch.nn.Module):
    """Encoder -> mean of the last hidden states over the attention mask -> dropout -> one linear logit.

    The layout of a sentence-transformers ``CrossEncoder`` built as Transformer -> Pooling(mean) -> Dense(d, 1)
    writing ``scores``, which is how :func:`save_cross_encoder` saves it, so ``CrossEncoder(folder)`` loads it.
    Use it for a cut of a mean-pooled sentence encoder: the packaged all-MiniLM-L6-v2 was trained with mean pooling
    and its ``[CLS]`` state hardly depends on the input before the last layer (relative spread across inputs under
    1% through layer 4), so a ``[CLS]``-pooled classifier on its first N < 6 layers sees a constant and stays at
    chance loss, while the mean over tokens carries the input.
    """

    def __init__(self, encoder: transformers.PreTrainedModel, head: torch.nn.Linear):
        super().__init__()
        self.encoder = encoder
        self.config = encoder.config
        self.dropout = torch.nn.Dropout(getattr(encoder.config, "hidden_dropout_prob", 0.1))
        self.head = head

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        pooled = mean_pool(hidden, attention_mask, normalize=False)  # hidden is fp32 (LayerNorm) under autocast
        return transformers.modeling_outputs.SequenceClassifierOutput(logits=self.head(self.dropout(pooled)))


_ST_POOLING, _ST_HEAD = "1_Pooling", "2_Dense"
#: sentence-transformers' module files of a mean-pooled cross-encoder (folder name -> config); the weights of
#: the Dense head go to ``2_Dense/model.safetensors`` as ``linear.weight`` / ``linear.bias``
_ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
    {"idx": 1, "name": "1", "path": _ST_POOLING,
     "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
    {"idx": 2, "name": "2", "path": _ST_HEAD, "type": "sentence_transformers.base.modules.dense.Dense"},
]


def checkpoint_pooling(model_dir: str | Path) -> str | None:
    """The pooling of a trained cross-encoder folder: ``"mean"`` for a sentence-transformers layout with a mean
    Pooling and a Dense head writing ``scores`` (:func:`save_cross_encoder`), ``"cls"`` for a Hugging Face
    ``*ForSequenceClassification`` checkpoint, None for a bare encoder (no trained head)."""
    path = resolve_model_dir(model_dir)
    head = path / _ST_HEAD / "config.json"
    pooling = path / _ST_POOLING / "config.json"
    if head.exists() and pooling.exists():
        head_cfg, pool_cfg = json.loads(head.read_text()), json.loads(pooling.read_text())
        if head_cfg.get("module_output_name") == "scores" and pool_cfg.get("pooling_mode") == "mean":
            return "mean"
    architectures = model_config(path).architectures or []
    return "cls" if any(a.endswith("ForSequenceClassification") for a in architectures) else None


def load_cross_encoder(
    model_dir: str | Path,
    layers: int | None = None,
    seed: int = 0,
    device: torch.device | str | None = None,
    pooling: str | None = None,
) -> torch.nn.Module:
    """A one-logit cross-encoder on the checkpoint, optionally truncated to ``layers``.

    ``pooling`` ``"cls"`` is a Hugging Face ``*ForSequenceClassification`` (``num_labels=1``: pooler on ``[CLS]``,
    then the classifier); ``"mean"`` is :class:`MeanPooledCrossEncoder`. None = the checkpoint's own head
    (:func:`checkpoint_pooling`), ``"cls"`` for a bare encoder. A checkpoint without a trained head gets a new one;
    its initialisation is seeded with ``seed`` (``torch.manual_seed`` right before the model is built), so the
    same seed gives the same model. A checkpoint saved by :func:`save_cross_encoder` reloads with its trained head.
    """
    path = resolve_model_dir(model_dir)
    own = checkpoint_pooling(path)
    pooling = pooling or own or "cls"
    if pooling not in POOLINGS:
        raise ValueError(f"pooling={pooling!r}: expected one of {POOLINGS}")
    if own is not None and own != pooling:
        raise ValueError(f"{path}: a trained {own}-pooled cross-encoder cannot be loaded with pooling={pooling!r}")
    extra, total = layer_kwargs(path, layers)
    torch.manual_seed(seed)
    if pooling == "mean":
        encoder = load_encoder(path, layers)
        model = MeanPooledCrossEncoder(encoder, torch.nn.Linear(encoder.config.hidden_size, 1))
        _init_head(model.head, model.config, seed, path if own == "mean" else None)
        new_head = own is None
    else:
        with quiet_transformers():
            model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
                path, num_labels=1, local_files_only=True, output_loading_info=True, **extra
            )
        check_loading_info(path, info, layers, allow_missing=("classifier.", "score.", "pre_classifier."))
        new_head = bool([k for k in info.get("missing_keys", []) if "pooler" not in k])
    fp32_head(model)  # under bf16 autocast the body alone runs in bf16: fp32 scores
    log.info(
        "loaded %s-pooled cross-encoder %s (%s of %d layers; %s)",
        pooling,
        path,
        layers or total,
        total,
        f"new head seeded with {seed}" if new_head else "trained head",
    )
    model.eval()
    return model.to(device) if device is not None else model


def _init_head(head: torch.nn.Linear, config, seed: int, trained: Path | None) -> None:
    """The Dense head's trained weights from ``trained``, or a new head as Hugging Face initialises a classifier
    (normal(0, initializer_range), zero bias), seeded with ``seed``."""
    if trained is not None:
        state = safetensors.torch.load_file(trained / _ST_HEAD / "model.safetensors")
        head.load_state_dict({"weight": state["linear.weight"], "bias": state["linear.bias"]})
        return
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=gen) * getattr(config, "initializer_range", 0.02))
        head.bias.zero_()


def save_cross_encoder(model: torch.nn.Module, tokenizer, out_dir: str | Path,
                       extra_files: dict[str, str] | None = None) -> Path:
    """Save a cross-encoder so that Hugging Face and sentence-transformers load it, atomically.

    A ``[CLS]``-pooled model is a plain ``*ForSequenceClassification`` folder (``AutoModelForSequenceClassification``
    and ``sentence_transformers.CrossEncoder`` both read it). A :class:`MeanPooledCrossEncoder` is the encoder's
    folder plus sentence-transformers' module files (``modules.json``, ``1_Pooling/``, ``2_Dense/``), which
    ``CrossEncoder(folder)`` assembles into the same scorer.
    """
    if not isinstance(model, MeanPooledCrossEncoder):
        return save_model(model, tokenizer, out_dir, extra_files)
    hidden = model.head.in_features
    files = {
        "modules.json": _ST_MODULES,
        "sentence_bert_config.json": {
            "transformer_task": "feature-extraction",
            "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
            "module_output_name": "token_embeddings",
        },
        "config_sentence_transformers.json": {
            "model_type": "CrossEncoder", "activation_fn": "torch.nn.modules.activation.Sigmoid",
            "prompts": {}, "default_prompt_name": None,
        },
        f"{_ST_POOLING}/config.json": {"embedding_dimension": hidden, "pooling_mode": "mean", "include_prompt": True},
        f"{_ST_HEAD}/config.json": {
            "in_features": hidden, "out_features": 1, "bias": True,
            "activation_function": "torch.nn.modules.linear.Identity",
            "module_input_name": "sentence_embedding", "module_output_name": "scores",
        },
    }

    def fill(tmp: Path) -> None:
        with quiet_transformers():
            model.encoder.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        for name, content in files.items():
            (tmp / name).parent.mkdir(exist_ok=True)
            (tmp / name).write_text(json.dumps(content, indent=2) + "\n")
        head = {"linear.weight": model.head.weight.detach().float().cpu().contiguous(),
                "linear.bias": model.head.bias.detach().float().cpu().contiguous()}
        safetensors.torch.save_file(head, tmp / _ST_HEAD / "model.safetensors")
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)

    return write_dir_atomically(out_dir, fill)
