# Paths, input functions and wildcard constraints shared by every rule file.
import os
import re
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError

from curricula.plumbing.config import side_folder
from curricula.difficulty import check_names, function_knobs, needed_inputs
from curricula.evaluation.rerank import parse_rnk
from curricula.experiments.specs import (active_spec, experiment_runs, finetune_dense_model, job_params, needed_tables,
                                   tuned_values)
from curricula.data.ingest import INGEST_TABLES
from curricula.retrieval.stages import dense_max_length

RESULTS = str(Path(config["results"]) / config["dataset"]["name"])
LOGS = side_folder(config, "logs")  # logs/<dataset>, or logs/<results>/<dataset> for another results folder
BENCHMARKS = side_folder(config, "benchmarks")
# Environments for --software-deployment-method conda: rules that can use a GPU get the CUDA build
CONDA_ENVS = {"cpu": "../envs/cpu.yaml", "gpu": "../envs/gpu.yaml"}


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    kind=r"queries|docs",
    function=r"[a-z0-9_]+",
    scoring=r"[a-z0-9_]+",
    experiment=r"[A-Za-z0-9_.@=+-]+",
    seed=r"-?[0-9]+",
    reference=r"bm25|bm25_tuned|teacher",
    method=r"random|bald|coreset|dal|dasl|all",
    scatteritem=r"[0-9]+-of-[0-9]+",


def log_path(stem):
    """A rule's log file; ``stem``: the rule's name and wildcards in plain braces, e.g. ``"curriculum/{scoring}"``."""
    return f"{LOGS}/{stem}.log"


def benchmark_path(stem):
    """A rule's benchmark file, under the same ``stem`` as its log."""
    return f"{BENCHMARKS}/{stem}.tsv"


def gpus(device):
    """Cards a job on ``device`` asks for (resource ``gpu``): 1 for ``cuda`` or ``cuda:N``, else 0.

    ``auto`` asks for none: it picks CUDA only where the node has a GPU (profiles/slurm gives the GPU-capable rules
    ``gpu: 1`` itself)."""
    return 1 if device == "cuda" or str(device).startswith("cuda:") else 0


def shard_path(stage, table):
    """One scatter shard of a stage's table (a temporary file; ``{scatteritem}`` is ``<i>-of-<n>``)."""
    return f"{RESULTS}/{stage}/shards/{table}.{{scatteritem}}.parquet"


def dataset_files(wildcards=None):
    """Every input file named in dataset.files (nested split maps flattened), so a changed file re-runs ingest."""
    out = []
    for value in config["dataset"].get("files", {}).values():
        out.extend(value.values() if isinstance(value, dict) else [value])
    return sorted(out)


def ingest_table(name="{kind}"):
    return f"{RESULTS}/data/{name}.parquet"


def ingest_outputs():
    return {name: ingest_table(name) for name in INGEST_TABLES}


def bm25_outputs():
    return {
        "index": f"{RESULTS}/bm25/index",
        "run": f"{RESULTS}/bm25/run.parquet",
        "trec": f"{RESULTS}/bm25/run.trec",
        "candidate_scores": f"{RESULTS}/bm25/candidate_scores.parquet",
        "tuned_grid": f"{RESULTS}/bm25/tuned/grid.parquet",
        "tuned_scores": f"{RESULTS}/bm25/tuned/candidate_scores.parquet",
    }


def bm25_tune_seed():
    """The seed of the R<n>@<k> candidate cut when the tuning measure is one (else it cannot change the grid)."""
    return config["seed"] if parse_rnk(config["bm25"]["tune"]["measure"]) else None


def dense_vectors(kind="{kind}"):
    return f"{RESULTS}/dense/{kind}.parquet"


def dense_outputs():
    return {
        "biencoder": f"{RESULTS}/dense/biencoder",
        "queries": dense_vectors("queries"),
        "docs": dense_vectors("docs"),
        "neighbors": f"{RESULTS}/dense/neighbors.parquet",
        "positive_ranks": f"{RESULTS}/dense/positive_ranks.parquet",
    }


def section(name, *keys):
    """Only the given keys of a config section: a rule's params, so that other knobs never re-run it."""
    return {key: config[name][key] for key in keys}


def biencoder_input(wildcards):
    """The fine-tuned bi-encoder folder when G is fine-tuned (FINETUNE_G), else nothing (the pre-trained model)."""
    return {"biencoder": dense_outputs()["biencoder"]} if FINETUNE_G else {}


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
    return {
        "table": f"{RESULTS}/difficulty/difficulty.parquet",
        "function": f"{RESULTS}/difficulty/functions/{{function}}.parquet",
    }


def difficulty_function_path(function):
    return difficulty_outputs()["function"].format(function=function)


def difficulty_function_inputs(wildcards):
    """Ingest tables plus only what this scoring function reads (the teacher only for bert_*)."""
    paths = {
        "candidate_scores": bm25_outputs()["candidate_scores"],
        "run": bm25_outputs()["run"],
        "teacher": teacher_outputs()["scores"],
        "query_vectors": dense_outputs()["queries"],
        "doc_vectors": dense_outputs()["docs"],
    }
    need = needed_inputs([wildcards.function], config["difficulty"]["bm25_list"])
    return {**ingest_outputs(), **{name: paths[name] for name in sorted(need)}}


def difficulty_function_knobs(wildcards):
    return function_knobs(wildcards.function, config["difficulty"], config["seed"])


def load_schema():
    with open(os.path.join(workflow.basedir, "schemas", "config.schema.yaml")) as fh:
        return yaml.safe_load(fh)


def resolved(resolve):
    """``resolve(config, schema)``; a bad spec (ValueError) stops the run before any job, naming the key."""
    try:
        return resolve(config, load_schema())
    except ValueError as err:
        raise WorkflowError(f"config: {err}") from None


def resolve_experiments():
    """{experiment: {training run: resolved spec}} (curricula.experiments.specs.experiment_runs)."""
    return resolved(experiment_runs)


RUNS_OF = resolve_experiments()
# every training run's spec: an untuned experiment is one run of its own name, a tuned one a run per value
RUNS = {run: spec for runs in RUNS_OF.values() for run, spec in runs.items()}
# the experiments that tune a knob on dev: {experiment: {run: {knob: value}}} (curricula.experiments.tuning)
TUNED = tuned_values(config)
# the experiments the report shows; a tuned experiment's runtime knobs (threads, device, scoring) are its first run's
EXPERIMENTS = {name: next(iter(runs.values())) for name, runs in RUNS_OF.items()}
# dense.finetune.enabled, null resolved: G is fine-tuned whenever a curriculum uses it (Su et al. 2021 §3.4)
FINETUNE_G = finetune_dense_model(config, RUNS)
# dense.max_length, null resolved: the length G was fine-tuned at, else 128
DENSE_MAX_LENGTH = dense_max_length(config, FINETUNE_G)


def one_of(names):
    """A wildcard constraint matching exactly these names (none: a pattern that matches nothing)."""
    names = sorted(names, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else r"(?!x)x"


def spec_of(name):
    """The spec of a training run or of a (tuned) experiment."""
    return RUNS[name] if name in RUNS else EXPERIMENTS[name]


def check_difficulty_functions(config, schema):
    """The difficulty functions the config names must be registered (curricula.difficulty.FUNCTIONS)."""
    check_names(config["difficulty"]["functions"], "difficulty.functions")
    check_names(config["report"]["difficulty_functions"], "report.difficulty_functions")


resolved(check_difficulty_functions)


def curriculum_dir(scoring):
    return f"{RESULTS}/curricula/{scoring}"


def experiment_dir(experiment="{experiment}", seed="{seed}"):
    return f"{RESULTS}/experiments/{experiment}/seed={seed}"


def train_outputs(experiment="{experiment}", seed="{seed}"):
    out = experiment_dir(experiment, seed)
    return {"model": f"{out}/model", "dev_curve": f"{out}/dev_curve.parquet", "config": f"{out}/config.json"}


def train_inputs(wildcards):
    """Ingest tables, the experiment's curriculum shards, and only the extra tables its axes read."""
    spec = RUNS[wildcards.experiment]
    extra = {
        "weights": lambda: difficulty_function_path(spec["weighting"]["scoring"]),
        "neighbors": lambda: dense_outputs()["neighbors"],
        "run": lambda: bm25_outputs()["run"],
        "query_vectors": lambda: dense_outputs()["queries"],
        "doc_vectors": lambda: dense_outputs()["docs"],
    }
    return {
        **ingest_outputs(),
        "curriculum": curriculum_dir(spec["scoring"]),
        **{name: extra[name]() for name in sorted(needed_tables(spec))},
    }


def train_params(wildcards):
    return job_params(RUNS[wildcards.experiment])


def tuned_inputs(wildcards):
    """The dev curves and models of a tuned experiment's runs for one seed, keyed ``curve|<run>`` / ``model|<run>``."""
    out = {}
    for run in TUNED[wildcards.experiment]:
        paths = train_outputs(run, wildcards.seed)
        out[f"curve|{run}"], out[f"model|{run}"] = paths["dev_curve"], paths["model"]
    return out


def tuned_params(wildcards):
    """{run: {knob: value}} of a tuned experiment, in the tuning grid's order (what breaks ties)."""
    return TUNED[wildcards.experiment]


def selection_path(experiment="{experiment}", seed="{seed}"):
    return f"{experiment_dir(experiment, seed)}/selection.parquet"


def experiment_params():
    """Every experiment's spec without runtime knobs (params of rules that read all of them)."""
    return {name: job_params(spec) for name, spec in EXPERIMENTS.items()}


def experiment_knob(key):
    """A per-experiment knob for threads:/resources: (runtime knobs are not params, so they never re-run a job)."""
    return lambda wildcards: spec_of(wildcards.experiment)[key]


def experiment_gpus(wildcards):
    """The ``gpu`` resource of a per-experiment job (its spec's device)."""
    return gpus(spec_of(wildcards.experiment)["device"])


ADDITIVE = config["evaluate"]["additivity"]["enabled"]


def additive_outputs(out):
    """The score-additivity outputs in folder ``out`` (when evaluate.additivity is enabled)."""
    if not ADDITIVE:
        return {}
    return {"additive_run": f"{out}/test+bm25.run", "additive_metrics": f"{out}/metrics+bm25.parquet",
            "additivity": f"{out}/additivity.parquet"}


def evaluate_outputs(experiment="{experiment}", seed="{seed}"):
    out = experiment_dir(experiment, seed)
    return {"run": f"{out}/test.run", "metrics": f"{out}/metrics.parquet", **additive_outputs(out)}


def reference_outputs(reference="{reference}", additive=None):
    """A reference ranker's test run and metrics, plus its score-additivity outputs unless it is a BM25 (BM25
    interpolated with BM25 is no new ranker); ``additive`` says which for the rules' wildcard patterns."""
    out = f"{RESULTS}/references/{reference}"
    plain = {"run": f"{out}/test.run", "metrics": f"{out}/metrics.parquet"}
    if additive is None:
        additive = not reference.startswith("bm25")
    return {**plain, **additive_outputs(out)} if additive else plain


def additive_input():
    """BM25's candidate scores, which score additivity interpolates with (when enabled)."""
    return {"bm25": bm25_outputs()["candidate_scores"]} if ADDITIVE else {}


def additivity_params(wildcards):
    """The interpolation knobs, or None when off."""
    return {k: v for k, v in config["evaluate"]["additivity"].items() if k != "enabled"} if ADDITIVE else None


def reference_scores(wildcards):
    scores = {"bm25": bm25_outputs()["candidate_scores"], "bm25_tuned": bm25_outputs()["tuned_scores"],
              "teacher": teacher_outputs()["scores"]}
    return {**ingest_outputs(), "scores": scores[wildcards.reference]}


def check_references(config, schema):
    """The reference ranker bm25_tuned needs the tuning (rule bm25_tune) enabled."""
    if "bm25_tuned" in config["evaluate"]["references"] and not config["bm25"]["tune"]["enabled"]:
        raise ValueError("evaluate.references names bm25_tuned but bm25.tune.enabled is false; enable the tuning "
                         "or drop bm25_tuned from evaluate.references")


resolved(check_references)


def evaluate_knobs(wildcards):
    """The scoring knobs of an experiment's model (what changes its test scores)."""
    spec = spec_of(wildcards.experiment)
    return {k: spec[k] for k in ("score_batch_size", "precision", "device")}


def all_evaluated():
    runs = [evaluate_outputs(name, seed)["metrics"] for name in EXPERIMENTS for seed in config["seeds"]]
    return runs + [reference_outputs(ref)["metrics"] for ref in config["evaluate"]["references"]]


def report_functions():
    chosen = config["report"]["difficulty_functions"]
    if chosen is None:
        chosen = sorted({spec["scoring"] for spec in EXPERIMENTS.values()} - {"random"})
    return list(chosen)


def difficulty_test_path(function):
    return f"{RESULTS}/difficulty/test/{function}.parquet"


def table_outputs(name, stem):
    """The files of one report table ``<stem>.{csv,md,parquet}``, keyed ``name``, ``name_md`` and ``name_parquet``
    (the CSV is the one shown in the Snakemake report)."""
    return {name: f"{stem}.csv", f"{name}_md": f"{stem}.md", f"{name}_parquet": f"{stem}.parquet"}


def report_outputs():
    out = f"{RESULTS}/report"
    return {
        **table_outputs("seeds", f"{out}/table_seeds"),
        **table_outputs("metrics", f"{out}/table_metrics"),
        **table_outputs("power", f"{out}/table_power"),
        "figures": f"{out}/figures",
    }


def runs_by_key(kind, additive=False):
    """{"<kind>|<experiment>|<seed>": path} of every (experiment, seed)'s dev curve or test metrics, as a flat
    input dict; with ``additive`` also each experiment's metrics with score additivity, as ``<experiment>+bm25``."""
    paths = {}
    for name in EXPERIMENTS:
        for seed in config["seeds"]:
            if kind == "curve":
                paths[f"curve|{name}|{seed}"] = train_outputs(name, seed)["dev_curve"]
                continue
            out = evaluate_outputs(name, seed)
            paths[f"metrics|{name}|{seed}"] = out["metrics"]
            if additive and ADDITIVE:
                paths[f"metrics|{name}+bm25|{seed}"] = out["additive_metrics"]
    return paths


def reference_metrics():
    """{"reference|<name>": path} of every reference ranker's test metrics, with ``<name>+bm25`` under additivity."""
    out = {}
    for ref in config["evaluate"]["references"]:
        paths = reference_outputs(ref)
        out[f"reference|{ref}"] = paths["metrics"]
        if "additive_metrics" in paths:
            out[f"reference|{ref}+bm25"] = paths["additive_metrics"]
    return out


def selections():
    """{"selection|<experiment>|<seed>": path} of every tuned experiment's dev selection."""
    return {f"selection|{name}|{seed}": selection_path(name, seed) for name in TUNED for seed in config["seeds"]}


def tuning_report_outputs():
    return table_outputs("tuning", f"{RESULTS}/report/table_tuning") if TUNED else {}


def all_trained():
    return [
        path
        for name in EXPERIMENTS
        for seed in config["seeds"]
        for path in (train_outputs(name, seed)["model"], train_outputs(name, seed)["dev_curve"])
    ] + list(selections().values())


def all_outputs():
    """The final targets of `rule all`; later stages add theirs here."""
    return [
        *ingest_outputs().values(),
        bm25_outputs()["run"],
        bm25_outputs()["trec"],
        bm25_outputs()["candidate_scores"],
        dense_outputs()["neighbors"],
        dense_outputs()["positive_ranks"],  # where G ranks the true replies: wherever the neighbours are built
        teacher_outputs()["scores"],
        difficulty_outputs()["table"],
        *all_trained(),
        *all_evaluated(),
        *report_outputs().values(),
        *tuning_report_outputs().values(),
        *all_active(),
    ]


# ------------------------------------------------------------------------------------------- active learning
def resolve_active():
    """The active-learning ranker's resolved spec (curricula.experiments.specs.active_spec), or None when disabled."""
    if not config["active"]["enabled"]:
        return None
    return resolved(active_spec)


ACTIVE_SPEC = resolve_active()


def active_outputs(method="{method}", seed="{seed}"):
    out = f"{RESULTS}/active/{method}/seed={seed}"
    return {"curve": f"{out}/curve.parquet", "test_metrics": f"{out}/test_metrics.parquet"}


def active_report_outputs():
    out = f"{RESULTS}/report"
    return {
        **table_outputs("table", f"{out}/table_active"),
        **table_outputs("curves", f"{out}/curves_active"),
        "figure": f"{out}/figures_active/learning_curves.png",
    }


def active_params(wildcards):
    """The active-learning ranker's spec without its thread count (a function: ACTIVE_SPEC is None when disabled)."""
    return {k: v for k, v in ACTIVE_SPEC.items() if k != "threads"}


def active_threads(wildcards):
    return ACTIVE_SPEC["threads"]


def active_gpus(wildcards):
    return gpus(ACTIVE_SPEC["device"])


def active_curves():
    """{"curve|<method>|<seed>": path} of every (method, seed)'s learning curve, as a flat input dict."""
    methods, seeds = config["active"]["methods"], config["active"]["seeds"]
    return {f"curve|{m}|{s}": active_outputs(m, s)["curve"] for m in methods for s in seeds}


def active_inputs(wildcards):
    """The ingest tables, plus the dense query vectors for Core-Set."""
    inputs = ingest_outputs()
    if wildcards.method == "coreset":
        inputs["query_vectors"] = dense_outputs()["queries"]
    return inputs


def active_settings():
    """The loop knobs of config `active` (what a job's curve depends on besides the ranker spec)."""
    skip = ("enabled", "methods", "seeds", "train")
    return {k: v for k, v in config["active"].items() if k not in skip}


def all_active():
    if ACTIVE_SPEC is None:
        return []
    return [*active_curves().values(), *active_report_outputs().values()]
