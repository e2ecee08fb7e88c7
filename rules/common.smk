# Paths, input functions and wildcard constraints shared by every rule file.
import os
from pathlib import Path

RESULTS = str(Path(config["results"]) / config["dataset"]["name"])
LOGS = f"logs/{config['dataset']['name']}"
BENCHMARKS = f"benchmarks/{config['dataset']['name']}"


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    kind=r"queries|docs",


def dataset_files(wildcards=None):
    """Every input file named in dataset.files (nested split maps flattened), so a changed file re-runs ingest."""
    out = []
    for value in config["dataset"].get("files", {}).values():
        out.extend(value.values() if isinstance(value, dict) else [value])
    return sorted(out)


def ingest_outputs():
    return {name: f"{RESULTS}/data/{name}.parquet" for name in ("queries", "docs", "qrels", "candidates")}


def bm25_outputs():
    return {
        "index": f"{RESULTS}/bm25/index",
        "run": f"{RESULTS}/bm25/run.parquet",
        "trec": f"{RESULTS}/bm25/run.trec",
        "candidate_scores": f"{RESULTS}/bm25/candidate_scores.parquet",
    }


def dense_outputs():
    return {
        "biencoder": f"{RESULTS}/dense/biencoder",
        "queries": f"{RESULTS}/dense/queries.parquet",
        "docs": f"{RESULTS}/dense/docs.parquet",
        "neighbors": f"{RESULTS}/dense/neighbors.parquet",
    }


def section(name, *keys):
    """Only the given keys of a config section: a rule's params, so that other knobs never re-run it."""
    return {key: config[name][key] for key in keys}


def biencoder_input(wildcards):
    """The fine-tuned bi-encoder folder when dense.finetune is enabled, else nothing (the pre-trained model)."""
    return {"biencoder": dense_outputs()["biencoder"]} if config["dense"]["finetune"]["enabled"] else {}


def all_outputs():
    """The final targets of `rule all`; later stages add theirs here."""
    return [
        *ingest_outputs().values(),
        bm25_outputs()["run"],
        bm25_outputs()["trec"],
        bm25_outputs()["candidate_scores"],
        dense_outputs()["neighbors"],
    ]
