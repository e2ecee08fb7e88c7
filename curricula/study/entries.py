"""A finished run's ledger entry (:mod:`curricula.study.ledger`), built from the files its jobs wrote: the per-query
test metrics (and their BM25 interpolation's), the dev curve, the recorded config, the benchmark files, and the bytes
of every upstream table it read. Rule ``study_ledger_entry`` (rules/study.smk) builds it with :func:`run_entry`.

Provenance recorded per run:
- ``commit``: the project's commit the run trained at (its config.json's ``commit``), else the commit when the
  entry was written (runs trained before configs recorded one), ``unknown`` outside a git checkout; a ``+`` suffix
  marks uncommitted changes to tracked files;
- ``upstream``: {table path under the dataset's results folder: SHA-256 digest of its bytes (a folder's: of its files'
  relative paths and bytes)};
- ``compute``: the device, the CPU class (the widest of ``lscpu``'s amx_bf16, avx512_bf16, avx512f, avx2 flags), the
  GPU model and capability, the precision, torch's and CUDA's builds;
- ``host``: a digest of the machine's key (:func:`curricula.plumbing.provenance.machine_key`: the system's machine id
  and a random id kept in the user's cache folder), so that the ledger counts the machines that contributed without
  naming them. Entries written before 2026-12-02 hold a digest of the host name instead, and every machine of this
  project's own study was called ``vm``: those count as one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from curricula.plumbing.keys import UpstreamKey, input_key, with_bm25
from curricula.plumbing.provenance import cpu_class, machine_key, project_commit
from curricula.study.costs import active_benchmark_files, benchmark_value, run_benchmark_files
from curricula.study.grid import ACTIVE_PREFIX
from curricula.study.ledger import VERSION, Entry, digest, entry_frame, run_id

#: The entry kinds: a trained experiment, or an active-learning loop.
KINDS = ("train", "active")


def file_digest(path: str | Path) -> str:
    """A 16-hex-digit SHA-256 of a file's bytes, or of a folder's files (relative paths and bytes, sorted)."""
    path = Path(path)
    sha = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            sha.update(str(file.relative_to(path)).encode() + b"\0")
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()[:16]


def upstream_digests(tables: Mapping[str, str | Path], root: str | Path) -> dict[str, str]:
    """{table path relative to ``root`` (the dataset's results folder): :func:`file_digest`} of ``tables``
    ({input name: path})."""
    return {str(Path(p).relative_to(root)) if Path(p).is_relative_to(root) else str(p): file_digest(p)
            for p in tables.values()}


def curve_summary(curve: pl.DataFrame | None) -> dict[str, Any]:
    """The kept step, its dev value and why training stopped (``budget`` or early stopping), from a dev curve;
    None each for a run without one (active learning)."""
    if curve is None or curve.is_empty():
        return {"kept_step": None, "best_dev": None, "stopped": None}
    kept = curve.filter(pl.col("best")) if "best" in curve.columns else curve.tail(1)
    row = (kept if not kept.is_empty() else curve.tail(1)).row(0, named=True)
    stopped = curve["stopped"][-1] if "stopped" in curve.columns else None
    return {"kept_step": int(row["step"]), "best_dev": float(row["value"]), "stopped": stopped or "budget"}


def run_cost(benchmark_files: list[Path]) -> dict[str, float]:
    """The CPU seconds (summed) and peak memory in MB (largest) of a run's jobs' benchmark files."""
    return {"cpu_seconds": round(sum(benchmark_value(p, "cpu_time") for p in benchmark_files), 2),
            "peak_rss_mb": round(max((benchmark_value(p, "max_rss") for p in benchmark_files), default=0.0), 2)}


def compute_record(ran_on: Mapping[str, Any] | None, cpu: str | None = None) -> dict[str, Any]:
    """What a run's values depend on of the machine: the recorded ``ran_on`` (train's config.json) with the CPU
    class; without one (active learning, or an older config) the CPU and torch of this machine."""
    import torch

    record = dict(ran_on or {"device": "cpu", "dtype": "fp32", "gpu": None, "capability": None,
                             "torch": torch.__version__, "cuda": torch.version.cuda})
    record.setdefault("cpu", cpu or cpu_class())
    return record


def metrics_values(metrics: Mapping[str, str | Path]) -> pl.DataFrame:
    """A trained run's per-query test values in the ledger's long form, from {experiment form (the experiment, or
    ``<experiment>+bm25``): metrics.parquet}."""
    return pl.concat([pl.read_parquet(p, columns=["qid", "measure", "value"]).with_columns(experiment=pl.lit(name))
                      for name, p in metrics.items()])


def active_values(method: str, path: str | Path) -> pl.DataFrame:
    """An active-learning run's per-round test values, each round as ``active:<method>@<round>``."""
    from curricula.active.loop import ACTIVE_TEST_METRICS
    from curricula.plumbing.contracts import read_table

    return read_table(path, ACTIVE_TEST_METRICS).select(
        experiment=pl.format(ACTIVE_PREFIX + method + "@{}", pl.col("round")), qid="qid", measure="measure",
        value="value")


def build_entry(*, dataset: str, arm: str, seed: int, kind: str, values: pl.DataFrame, spec_digest: str,
                upstream: Mapping[str, str], compute: Mapping[str, Any], cost: Mapping[str, float],
                training: Mapping[str, Any], commit: str) -> Entry:
    """A ledger entry from its parts; its run id digests what determines its values (:func:`run_id`)."""
    if kind not in KINDS:
        raise ValueError(f"ledger entry kind {kind!r}: expected one of {', '.join(KINDS)}")
    record: dict[str, Any] = {"version": VERSION, "dataset": dataset, "arm": arm, "kind": kind, "seed": int(seed),
                              **training, **cost, "commit": commit, "spec_digest": spec_digest,
                              "upstream": dict(sorted(upstream.items())), "compute": dict(compute),
                              "host": digest(machine_key())}
    record["run_id"] = run_id(record)
    return Entry(entry_frame(values), record)


def run_entry(inputs: Mapping[str, str | Path], *, dataset: str, arm: str, seed: int, spec_digest: str,
              root: str | Path, benchmarks: str | Path) -> Entry:
    """Rule ``study_ledger_entry``: one finished run's ledger entry, from the files its jobs wrote.

    ``inputs``: ``metrics`` (and ``additive_metrics``), ``curve`` and ``config`` for a trained arm, ``active`` for
    an active-learning arm (``active:<method>``), and ``upstream|<name>`` for each table it read; ``root`` is the
    dataset's results folder (tables are named by their path under it), ``benchmarks`` its benchmark folder."""
    names = set(inputs.keys())  # a Snakemake Namedlist's `in` looks at values
    config: dict[str, Any]
    upstream = upstream_digests({k: v for k, v in dict(inputs.items()).items()
                                 if isinstance(input_key(k), UpstreamKey)}, root)
    if arm.startswith(ACTIVE_PREFIX):
        method = arm.removeprefix(ACTIVE_PREFIX)
        kind, values, config = "active", active_values(method, inputs["active"]), {}
        training, files = curve_summary(None), active_benchmark_files(benchmarks, method, seed)
    else:
        forms = {arm: inputs["metrics"], **({with_bm25(arm): inputs["additive_metrics"]}
                                           if "additive_metrics" in names else {})}
        kind, values = "train", metrics_values(forms)
        config = json.loads(Path(inputs["config"]).read_text(encoding="utf-8")) if "config" in names else {}
        training = curve_summary(pl.read_parquet(inputs["curve"]))
        files = run_benchmark_files(benchmarks, arm, seed)
    return build_entry(dataset=dataset, arm=arm, seed=seed, kind=kind, values=values, spec_digest=spec_digest,
                       upstream=upstream, compute=compute_record(config.get("ran_on")),
                       cost=run_cost(files), training=training, commit=config.get("commit") or project_commit())


__all__ = ["KINDS", "active_values", "build_entry", "compute_record",
           "curve_summary", "file_digest", "metrics_values", "run_cost", "run_entry",
           "upstream_digests"]
