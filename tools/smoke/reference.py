"""The CPU reference of the GPU smoke check: every value the GPU's are compared with, computed on a CPU machine
beforehand and kept beside the code (``cpu_reference.npz``), with a record of how it was made.

Arrays (``pairs``, ``steps``, ``compared_steps``, ``k`` and ``texts`` from :class:`~tools.smoke.checks.Sizes`):

* ``logits/<ranker>`` (pairs,) fp32 logits of each smoke model, dropout off;
* ``logits_bf16/cross_encoder`` (pairs,) the cross-encoder's logits with its body under bf16 autocast on this CPU
  (the head in fp32): how far bf16 alone moves them here, beside the GPU's ``auto``;
* ``losses/<ranker>`` (steps,) fp32 training losses in nats; ``untrained/<ranker>`` (compared_steps,) the losses of
  the same batches under the initial weights (what a broken backward reports);
* ``mc/<ranker>`` (2, passes, pairs) MC-dropout probabilities of two runs with one seed (for the self-test: the GPU
  draws other masks);
* ``weights/<ranker>/<name>`` the output layer of ConvKNRM and the cross-encoder after their training runs (for the
  self-test of the kill-and-resume checks);
* ``vectors`` (texts, 384) fp32 dense vectors; ``neighbour_ids`` / ``neighbour_scores`` (texts / 2, k + 1).
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tools.smoke import checks
from tools.smoke.checks import MC_RANKERS, RANKERS, RESUME_RANKERS, Sizes

REFERENCE = Path(__file__).with_name("cpu_reference.npz")
#: the layout of the arrays above; a reference of another layout must be written anew
FORMAT = 2
#: the CPU flags that decide how bf16 runs here (native: AVX512-BF16 or AMX; else emulated, e.g. on AVX2 only)
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")


def cpu_description() -> tuple[str, list[str]]:
    """(the CPU's model name, which of :data:`CPU_FLAGS` it has) from /proc/cpuinfo
    (:func:`curricula.plumbing.provenance.cpu_info`; the platform's processor name where unreadable)."""
    from curricula.plumbing.provenance import cpu_info

    fields = cpu_info()
    flags = set(fields.get("flags", "").split())
    return fields.get("model name", platform.processor()), [flag for flag in CPU_FLAGS if flag in flags]


def made_record(sizes: Sizes, bf16_rho: float, bf16_drift: float) -> dict[str, Any]:
    """How a reference was made: sizes, versions, the CPU and its bf16, the precision of each array, the models."""
    import transformers

    from curricula.models import DEFAULT_LR
    from curricula.models.hf import cpu_has_native_bf16

    model, flags = cpu_description()
    bf16 = "native" if cpu_has_native_bf16() else "emulated"
    return {
        "format": FORMAT, "made_by": "python -m tools.smoke.gpu --write-reference", "sizes": asdict(sizes),
        "torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__,
        "faiss": checks.faiss_build(torch.device("cpu")),
        "machine": platform.machine(), "cpu": model, "cpu_flags": flags, "cpu_bf16": bf16,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"), "threads": torch.get_num_threads(),
        "precision": {
            "logits/*": "fp32, dropout off", "losses/* untrained/*": "fp32 training, nats",
            "logits_bf16/cross_encoder": f"bf16 autocast of the body ({bf16} on this CPU), pooling and head fp32",
            "mc/*": "fp32, dropout on", "weights/*": "fp32", "vectors": "fp32",
            "neighbour_*": "fp32 inner products (faiss IndexFlatIP)"},
        "models": {name: {"body": "minilm, 1 layer, mean pooling" if name == "cross_encoder" else "minilm's embeddings",
                          "head_std": checks.HEAD_STD[name], "dropout": "off (p = 0) but in mc/*",
                          "lr": DEFAULT_LR[name], "schedule": "constant", "seed": checks.SEED,
                          "batch": checks.BATCH} for name in RANKERS},
        "cpu_bf16_spearman": bf16_rho, "cpu_bf16_drift": bf16_drift,
    }


def write_reference(path: Path, sizes: Sizes) -> dict[str, Any]:
    """Compute every reference value on this CPU and save them (a small .npz) with :func:`made_record`; returns the
    record."""
    from tools.smoke.verdicts import spearman

    cpu = torch.device("cpu")
    arrays: dict[str, np.ndarray] = {}
    for name in RANKERS:
        arrays[f"logits/{name}"] = checks.ranker_logits(name, cpu, sizes, "fp32")
        losses, ranker, _ = checks.train_losses(name, cpu, sizes)
        arrays[f"losses/{name}"] = np.asarray(losses, dtype=np.float64)
        arrays[f"untrained/{name}"] = checks.untrained_losses(name, cpu, sizes)
        if name in RESUME_RANKERS:
            layer = checks.output_layer(ranker).state_dict()
            arrays.update({f"weights/{name}/{key}": value.detach().cpu().numpy() for key, value in layer.items()})
    for name in MC_RANKERS:
        arrays[f"mc/{name}"] = checks.mc_dropout_runs(name, cpu, sizes)
    fp32, bf16 = arrays["logits/cross_encoder"], checks.ranker_logits("cross_encoder", cpu, sizes, "bf16")
    arrays["logits_bf16/cross_encoder"] = bf16
    arrays["vectors"] = checks.dense_vectors(cpu, sizes)
    arrays["neighbour_ids"], arrays["neighbour_scores"] = checks.neighbour_ids(arrays["vectors"], sizes)
    made = made_record(sizes, spearman(bf16, fp32), float(np.abs(bf16 - fp32).max() / np.ptp(fp32)))
    np.savez_compressed(path, meta=np.array(json.dumps(made, sort_keys=True)), **arrays)
    return made


def read_reference(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(the record of how it was made, the arrays) of a reference file; ValueError for one of an older layout."""
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    made = json.loads(str(arrays.pop("meta")))
    if made.get("format") != FORMAT:
        raise ValueError(f"{path} was written by an older smoke check (layout {made.get('format', 1)}, this one "
                         f"reads {FORMAT}): write it anew with python -m tools.smoke.gpu --write-reference")
    return made, arrays


def weights_of(ref: dict[str, np.ndarray], name: str) -> dict[str, np.ndarray]:
    """The ``weights/<name>/...`` arrays of a reference, by parameter name."""
    prefix = f"weights/{name}/"
    return {key.removeprefix(prefix): value for key, value in ref.items() if key.startswith(prefix)}
