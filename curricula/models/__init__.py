"""Rankers: every architecture behind one interface (:class:`curricula.models.base.Ranker`).

* ``cross_encoder``: a BERT-style cross-encoder (Penha & Hauff 2020, MacAvaney's Vanilla BERT, Su et al. 2021);
* ``convknrm``: ConvKNRM (Dai et al. 2018; MacAvaney et al. 2020 §4);
* ``cnn_qa`` / ``lstm_qa``: the CNN and LSTM answer-selection networks of Wang et al. 2020 §3.

Training, dev selection, evaluation and MC-dropout only use :func:`build_ranker`, :func:`load_ranker` and the
Ranker methods; nothing outside this package branches on the architecture. Beside the rankers: loading local Hugging
Face checkpoints offline and choosing device and precision (:mod:`~curricula.models.hf`), and Penha & Hauff's teacher,
the cross-encoder fine-tuned on the train split whose scores order BERT_pred and BERT_loss
(:mod:`~curricula.models.teacher`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from curricula.models.base import Ranker

#: the architecture knobs of each ranker and their defaults (schema ``train.architecture``); the cross-encoder's
#: knobs are ``model``, ``layers`` and ``max_length`` instead
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "cross_encoder": {},
    "convknrm": {"embeddings": "model", "freeze_embeddings": False, "query_length": 64, "doc_length": 64,
                 "ngrams": [1, 2, 3], "channels": 128, "kernels": 11, "hidden": 128, "dropout": 0.0},
    "cnn_qa": {"embeddings": "model", "freeze_embeddings": False, "query_length": 64, "doc_length": 64,
               "channels": 128, "hidden": 128, "width": 5, "dropout": 0.5},
    "lstm_qa": {"embeddings": "model", "freeze_embeddings": False, "query_length": 64, "doc_length": 64,
                "channels": 128, "hidden": 128, "dropout": 0.5},
}
#: Adam learning rate of each ranker when the config leaves ``lr`` null (MacAvaney §4: 1e-3 for ConvKNRM;
#: 5e-5 is Penha's BERT rate and the measured-good rate for the 6-layer MiniLM here)
DEFAULT_LR = {"cross_encoder": 5.0e-5, "convknrm": 1.0e-3, "cnn_qa": 1.0e-3, "lstm_qa": 1.0e-3}
#: learning-rate schedule of each ranker when the config leaves ``schedule`` null
#: (curricula.training.core.schedule_factor):
#: constant for ConvKNRM (MacAvaney §4 and OpenNIR: constant Adam, no warm-up); linear warm-up + decay for the
#: cross-encoder (BERT fine-tuning) and for cnn_qa / lstm_qa, whose schedule Wang et al. 2020 §5.1.2 do not state
DEFAULT_SCHEDULE = {"cross_encoder": "linear", "convknrm": "constant", "cnn_qa": "linear", "lstm_qa": "linear"}
#: knobs a ranker also takes that stay out of a resolved architecture unless set (null = the behaviour from before
#: they existed), so adding one changes no existing run's spec (nor its params for Snakemake)
OPTIONAL_KNOBS: dict[str, tuple[str, ...]] = {name: ("embedding_dropout",)
                                             for name in ("convknrm", "cnn_qa", "lstm_qa")}
RANKERS = tuple(ARCHITECTURES)

__all__ = ["ARCHITECTURES", "DEFAULT_LR", "DEFAULT_SCHEDULE", "RANKERS", "Ranker", "build_ranker", "load_ranker",
           "ranker_class", "resolve_architecture", "score_pair_frame", "score_pair_rows", "score_pairs"]


def __getattr__(name: str):
    # Ranker, score_pairs and the classes import torch; keep `import curricula.models` light for Snakemake's parse
    if name in ("Ranker", "score_pairs", "score_pair_rows", "score_pair_frame"):
        from curricula.models import base

        return getattr(base, name)
    raise AttributeError(name)


def ranker_class(name: str) -> type[Ranker]:
    """The class of a ranker name (imports torch)."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown ranker {name!r}; known: {list(RANKERS)}")
    from curricula.models.convknrm import ConvKNRMRanker
    from curricula.models.cross_encoder import CrossEncoderRanker
    from curricula.models.qa import CNNQARanker, LSTMQARanker

    return {cls.name: cls for cls in (CrossEncoderRanker, ConvKNRMRanker, CNNQARanker, LSTMQARanker)}[name]


def resolve_architecture(name: str, arch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The architecture knobs ``name`` uses with its defaults for those absent or null ({} for the cross-encoder).

    Raises ValueError for a knob the ranker does not have (e.g. ``kernels`` for ``lstm_qa``).
    """
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown ranker {name!r}; known: {list(RANKERS)}")
    defaults = ARCHITECTURES[name]
    given = {k: v for k, v in (arch or {}).items() if v is not None}
    unknown = sorted(set(given) - set(defaults) - set(OPTIONAL_KNOBS.get(name, ())))
    if unknown:
        raise ValueError(f"architecture knob(s) {unknown} do not apply to ranker {name!r} "
                         f"(its knobs: {sorted(defaults) or 'none; use model, layers, max_length'})")
    return {**defaults, **given}


def build_ranker(spec: Mapping[str, Any], seed: int) -> Ranker:
    """A new, untrained ranker for a train spec (``ranker``, ``model``, ``layers``, ``max_length``, ``architecture``).

    Every random initialisation is seeded with ``seed``: the same spec and seed give the same weights.
    """
    return ranker_class(spec.get("ranker", "cross_encoder")).build(spec, seed)


def load_ranker(folder: str | Path, device=None, max_length: int | None = None) -> Ranker:
    """A ranker saved by :meth:`Ranker.save` (its ``ranker.json`` names the architecture), or any Hugging Face
    cross-encoder checkpoint (``max_length`` then gives its pair budget)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"ranker folder {folder} does not exist")
    from curricula.models.cross_encoder import CrossEncoderRanker
    from curricula.models.text import read_ranker_json

    config = read_ranker_json(folder)
    if config is None:
        ranker = CrossEncoderRanker.load(folder, None, max_length)
    else:
        ranker = ranker_class(config.get("ranker")).load(folder, config)
    ranker.eval()
    return ranker.to(device) if device is not None else ranker
