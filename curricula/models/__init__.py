"""Rankers: every architecture behind one interface (:class:`curricula.models.base.Ranker`).

* ``cross_encoder``: a BERT-style cross-encoder (Penha & Hauff 2020, MacAvaney's Vanilla BERT, Su et al. 2021);
* ``convknrm``: ConvKNRM (Dai et al. 2018; MacAvaney et al. 2020 §4);
* ``cnn_qa`` / ``lstm_qa``: the CNN and LSTM answer-selection networks of Wang et al. 2020 §3.

Each is registered once, below (:func:`register_ranker`, :mod:`curricula.models.registry`): its class, knobs,
learning rate and schedule; a new ranker is one more call (here, or in a plugin module the config's ``plugins``
names). Training, dev selection, evaluation and MC-dropout only use :func:`build_ranker`, :func:`load_ranker` and the
Ranker methods; nothing outside this package branches on the architecture. Beside the rankers: loading local Hugging
Face checkpoints offline and choosing device and precision (:mod:`~curricula.models.hf`), and Penha & Hauff's teacher,
the cross-encoder fine-tuned on the train split whose scores order BERT_pred and BERT_loss
(:mod:`~curricula.models.teacher`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curricula.models.registry import (
    Knob,
    RankerEntry,
    RegistryNames,
    RegistryView,
    arithmetic_version,
    lookup_ranker,
    register_ranker,
    unregister_ranker,
)
from curricula.plugins import load_environment_plugins

if TYPE_CHECKING:
    from curricula.models.base import Ranker
    from curricula.training.spec import RankerSpec

#: The built-in rankers, one :func:`register_ranker` call each: the class (a lazy path: no torch at import), the
#: architecture knobs and their defaults (schema ``train.architecture``; the cross-encoder's knobs are ``model``,
#: ``layers`` and ``max_length`` instead), the Adam learning rate when the config leaves ``lr`` null (MacAvaney §4:
#: 1e-3 for ConvKNRM; 5e-5 is Penha's BERT rate and the measured-good rate for the 6-layer MiniLM here) and the
#: learning-rate schedule when it leaves ``schedule`` null (curricula.training.core.schedule_factor): constant for
#: ConvKNRM (MacAvaney §4 and OpenNIR: constant Adam, no warm-up); linear warm-up + decay for the cross-encoder (BERT
#: fine-tuning) and for cnn_qa / lstm_qa, whose schedule Wang et al. 2020 §5.1.2 do not state. ``embedding_dropout``
#: (default None) stays out of a resolved architecture unless set, so adding it changed no existing run's params;
#: ConvKNRM's ``compiled_pooling`` (default None: torch's operations; true: the compiled kernel sums of
#: curricula.models.compiled, another arithmetic, so the knob is in the params of the runs that set it) and
#: ``compiled`` (true: every compiled pass, the n-gram vectors at token windows, the kernel sums and eq. 4) likewise.
_TWO_SIDED = {"embeddings": "model", "freeze_embeddings": False, "query_length": 64, "doc_length": 64}
register_ranker("cross_encoder", "curricula.models.cross_encoder:CrossEncoderRanker", lr=5.0e-5, schedule="linear",
                citation="Penha & Hauff 2020; MacAvaney et al. 2020 (Vanilla BERT); Su et al. 2021",
                spec_knobs=("model", "layers", "max_length"))
# arithmetic 2: the kernel ladder's exponentials as powers of 2 and its upward ratio as a reciprocal, kernel-major
# sums, the n-gram vectors at token windows only, scoring batches of whole contexts, the scoring pass's taps of its
# distinct tokens in one product (docs/performance.md)
register_ranker("convknrm", "curricula.models.convknrm:ConvKNRMRanker", lr=1.0e-3, schedule="constant",
                knobs={**_TWO_SIDED, "ngrams": [1, 2, 3], "channels": 128, "kernels": 11, "hidden": 128,
                       "dropout": 0.0, "embedding_dropout": None, "compiled_pooling": None,
                       "compiled": None},
                citation="Dai et al. 2018; MacAvaney et al. 2020 §4", arithmetic=2)
register_ranker("cnn_qa", "curricula.models.qa:CNNQARanker", lr=1.0e-3, schedule="linear",
                knobs={**_TWO_SIDED, "channels": 128, "hidden": 128, "width": 5, "dropout": 0.5,
                       "embedding_dropout": None},
                citation="Wang et al. 2020 §3 (Severyn & Moschitti 2015)")
register_ranker("lstm_qa", "curricula.models.qa:LSTMQARanker", lr=1.0e-3, schedule="linear",
                knobs={**_TWO_SIDED, "channels": 128, "hidden": 128, "dropout": 0.5, "embedding_dropout": None},
                citation="Wang et al. 2020 §3 (Tan et al. 2015)")

#: {ranker: its architecture knobs and their defaults} (optional knobs left out), live over the registry
ARCHITECTURES: Mapping[str, dict[str, Any]] = RegistryView(lambda entry: entry.defaults)
#: {ranker: its learning rate when the config leaves ``lr`` null}
DEFAULT_LR: Mapping[str, float] = RegistryView(lambda entry: entry.lr)
#: {ranker: its learning-rate schedule when the config leaves ``schedule`` null}
DEFAULT_SCHEDULE: Mapping[str, str] = RegistryView(lambda entry: entry.schedule)
#: the registered rankers' names (a ranker a plugin registers later is in it)
RANKERS: Sequence[str] = RegistryNames()

__all__ = ["ARCHITECTURES", "DEFAULT_LR", "DEFAULT_SCHEDULE", "RANKERS", "Knob", "Ranker", "RankerEntry",
           "arithmetic_version", "build_ranker", "load_ranker", "lookup_ranker", "ranker_class", "register_ranker", "resolve_architecture",
           "score_pair_frame", "score_pair_rows", "score_pairs", "unregister_ranker"]


def __getattr__(name: str):
    # Ranker, score_pairs and the classes import torch; keep `import curricula.models` light for Snakemake's parse
    if name in ("Ranker", "score_pairs", "score_pair_rows", "score_pair_frame"):
        from curricula.models import base

        return getattr(base, name)
    raise AttributeError(name)


def ranker_class(name: str | None) -> type[Ranker]:
    """The class of a ranker name (imports torch); an unknown name (or None) is a ValueError listing the known
    ones."""
    return lookup_ranker(name).ranker_class()


def resolve_architecture(name: str, arch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The architecture knobs ``name`` uses with its defaults for those absent or null ({} for the cross-encoder),
    then its optional knobs that are set (:attr:`curricula.models.registry.Knob.optional`).

    Raises ValueError for an unknown ranker or a knob the ranker does not have (e.g. ``kernels`` for ``lstm_qa``).
    """
    return lookup_ranker(name).architecture(arch)


def build_ranker(spec: RankerSpec, seed: int) -> Ranker:
    """A new, untrained ranker for a ranker spec (``ranker``, ``model``, ``layers``, ``max_length``,
    ``architecture``).

    Every random initialisation is seeded with ``seed``: the same spec and seed give the same weights.
    """
    return ranker_class(spec.ranker).build(spec, seed)


def saved_ranker_class(folder: str | Path) -> type[Ranker]:
    """The class of a saved ranker folder: the one its ``ranker.json`` names, else the cross-encoder (a bare Hugging
    Face checkpoint); what a job needs to know (e.g. whether it is a transformer) before loading the weights."""
    from curricula.models.cross_encoder import CrossEncoderRanker
    from curricula.models.text import read_ranker_json

    config = read_ranker_json(Path(folder))
    return CrossEncoderRanker if config is None else ranker_class(config.get("ranker"))


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
        ranker: Ranker = CrossEncoderRanker.load(folder, None, max_length)
    else:
        ranker = ranker_class(config.get("ranker")).load(folder, config)
    ranker.eval()
    return ranker.to(device) if device is not None else ranker


# a plugin module named by the config's `plugins` registers its rankers in a job's process too (curricula.plugins)
load_environment_plugins()
