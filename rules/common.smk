# Paths, input functions and wildcard constraints shared by every rule file.
import os
from pathlib import Path

RESULTS = str(Path(config["results"]) / config["dataset"]["name"])
LOGS = f"logs/{config['dataset']['name']}"
BENCHMARKS = f"benchmarks/{config['dataset']['name']}"


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",


def dataset_files(wildcards=None):
    """Every input file named in dataset.files (nested split maps flattened), so a changed file re-runs ingest."""
    out = []
    for value in config["dataset"].get("files", {}).values():
        out.extend(value.values() if isinstance(value, dict) else [value])
    return sorted(out)


def ingest_outputs():
    return {name: f"{RESULTS}/data/{name}.parquet" for name in ("queries", "docs", "qrels", "candidates")}


def all_outputs():
    """The final targets of `rule all`; later stages add theirs here."""
    return list(ingest_outputs().values())
