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


def teacher_outputs():
    return {"model": f"{RESULTS}/teacher/model", "scores": f"{RESULTS}/teacher/scores.parquet"}


TEACHER_SCORE_ONLY = ("folds", "score_batch_size")


def teacher_params(stage):
    """The teacher knobs that change this stage's output (threads go to `threads:`).

    Cross-fitting folds and the scoring batch size only affect `teacher_score`, so changing them keeps the trained
    model."""
    skip = {"threads"} | (set(TEACHER_SCORE_ONLY) if stage == "train" else set())
    return {k: v for k, v in config["teacher"].items() if k not in skip}


def difficulty_outputs():
    return {"table": f"{RESULTS}/difficulty/difficulty.parquet"}


def difficulty_inputs(wildcards):
    """Ingest tables plus only what the configured scoring functions read (no teacher unless bert_* is asked)."""
    from curricula.difficulty import needed_inputs

    paths = {
        "candidate_scores": bm25_outputs()["candidate_scores"],
        "run": bm25_outputs()["run"],
        "teacher": teacher_outputs()["scores"],
        "query_vectors": dense_outputs()["queries"],
        "doc_vectors": dense_outputs()["docs"],
    }
    need = needed_inputs(config["difficulty"]["functions"], config["difficulty"]["bm25_list"])
    return {**ingest_outputs(), **{name: paths[name] for name in sorted(need)}}


def all_outputs():
    """The final targets of `rule all`; later stages add theirs here."""
    return [
        *ingest_outputs().values(),
        bm25_outputs()["run"],
        bm25_outputs()["trec"],
        bm25_outputs()["candidate_scores"],
        dense_outputs()["neighbors"],
        teacher_outputs()["scores"],
        difficulty_outputs()["table"],
    ]
