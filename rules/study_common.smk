# A study's configs, paths and input functions (rules/study.smk holds its modules and rules).
import os

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from curricula.evaluation.comparisons import BM25_SUFFIX, trained_experiment
from curricula.plumbing.config import side_folder
from curricula.study.rounds import first_round_arms, look_seeds, read_round, study_looks
from curricula.statistics.sequential import SEQUENTIAL_MULTIPLICITIES
from curricula.study.grid import (check_claim_datasets, claim_datasets, claim_differences, listed_claims,
                             parse_active_name, study_configs, study_name)

validate(config, os.path.join(workflow.basedir, "schemas", "config.schema.yaml"))

# DEFAULT_CONFIG is config.yaml as the Snakefile read it
try:
    STUDY = study_configs(DEFAULT_CONFIG, workflow.config_settings.overwrite_config,
                          {"results": config["results"], "shards": config["shards"]})
except ValueError as err:
    raise WorkflowError(f"config: {err}") from None

# the study's own outputs (round records, findings page, their logs): a study.only selection has its own folder
STUDY_NAME = study_name(list(config["study"]["datasets"]), config["study"]["only"])
STUDY_RESULTS = f"{config['results']}/report/{STUDY_NAME}"
CONDA_ENVS_STUDY = {"cpu": "../envs/cpu.yaml"}

STUDY_SETTINGS = config["study"]
STUDY_CLAIMS = listed_claims(STUDY_SETTINGS["claims"])
try:
    check_claim_datasets(STUDY_CLAIMS, list(STUDY_SETTINGS["datasets"]))
except ValueError as err:
    raise WorkflowError(f"config: {err}") from None


def sequential_looks(settings):
    """The looks of a sequential study (study.sequential.looks capped by study.max_seeds), or None when it trains
    every seed of `seeds`; a bad setting stops the run before any job."""
    try:
        if not settings["sequential"]["enabled"]:
            if settings["max_seeds"] is not None:
                raise ValueError(f"study.max_seeds ({settings['max_seeds']}) caps the rounds of study.sequential; "
                                 "enable study.sequential or drop study.max_seeds")
            return None
        if settings["multiplicity"] not in SEQUENTIAL_MULTIPLICITIES:
            raise ValueError(f"study.multiplicity {settings['multiplicity']} with study.sequential: expected one of "
                             f"{', '.join(SEQUENTIAL_MULTIPLICITIES)} (no sequential Benjamini-Hochberg is built; "
                             f"Holm bounds the false discovery rate too)")
        return study_looks(settings["sequential"]["looks"], settings["max_seeds"])
    except ValueError as err:
        raise WorkflowError(f"config: {err}") from None


# Sequential seeding (curricula/study/rounds.py): STUDY_SEEDS holds each dataset's seeds up to the last look; its module's
# own targets (all_outputs, its report) get the first look's only, and the rounds ask for the rest by wildcard.
STUDY_LOOKS = sequential_looks(STUDY_SETTINGS)
STUDY_SEEDS = {}
if STUDY_LOOKS is not None:
    for _dataset, _config in STUDY.items():
        STUDY_SEEDS[_dataset] = look_seeds(_config["seeds"], STUDY_LOOKS[-1])
        _config["seeds"] = STUDY_SEEDS[_dataset][:STUDY_LOOKS[0]]


def study_module(dataset):
    """The name of a dataset's module (its rules are named ``<dataset>_<rule>``)."""
    return f"dataset_{dataset}"


def study_namespace(dataset):
    """The globals of a dataset's module (its input functions, bound to its own config)."""
    return workflow.globals[study_module(dataset)]


def study_claim_metrics():
    """{"metrics|<dataset>|<experiment>|<seed>": path} of every experiment a claim names, and
    {"active|<dataset>|<method>|<seed>": path} of every active-learning method a claim names (active:<method>@<round>),
    on every dataset it is tested on (study.claims.<id>.datasets, default all); a claim naming what such a dataset
    does not run stops the run before any job."""
    try:
        parsed = {name: parse_active_name(name) for claim in STUDY_CLAIMS for name in (claim["experiment"],
                                                                                         claim["against"])}
    except ValueError as err:
        raise WorkflowError(f"config: study.claims: {err}") from None
    out = {}
    for dataset in STUDY:
        # what the claims tested on this dataset name (study.claims.<id>.datasets)
        here = {name for claim in STUDY_CLAIMS if claim_datasets(claim, [dataset])
                for name in (claim["experiment"], claim["against"])}
        active = {name: parsed[name] for name in here if parsed[name] is not None}
        named = here - set(active)
        settings = STUDY[dataset]["active"]  # validated (defaults filled) when its module was loaded
        for name, (method, rnd) in active.items():
            rounds = 1 if method == "all" else settings["rounds"]
            if not settings["enabled"] or method not in settings["methods"] or rnd >= rounds:
                raise WorkflowError(f"config: study.claims name {name}, which {dataset} does not run (active: "
                                    f"enabled {settings['enabled']}, methods {settings['methods']}, "
                                    f"rounds 0-{rounds - 1}; all has round 0 only; a claim tested on some datasets "
                                    f"only lists them in study.claims.<id>.datasets)")
            for seed in settings["seeds"]:
                out[f"active|{dataset}|{method}|{seed}"] = study_namespace(dataset).active_outputs(
                    method, seed)["test_metrics"]
        runs = study_namespace(dataset).runs_by_key("metrics", additive=True)
        have = {key.split("|")[1] for key in runs}
        missing = sorted(named - have)
        if missing:
            raise WorkflowError(f"config: study.claims name {missing}, which {dataset}'s grid does not evaluate "
                                f"(it has {sorted(have)}; +bm25 forms need evaluate.additivity.enabled)")
        for key, path in runs.items():
            _, experiment, seed = key.split("|")
            if experiment in named:
                out[f"metrics|{dataset}|{experiment}|{seed}"] = path
    study_claim_differences()
    return out


STUDY_DIFFERENCES = {}


def study_claim_differences():
    """{claim id: {dataset: the keys its two arms' resolved specs differ in}} (curricula.study.grid.claim_differences
    over each dataset's resolved grid); a claim whose arms differ in a key its factors do not declare stops the run
    before any job."""
    if not STUDY_DIFFERENCES:
        try:
            STUDY_DIFFERENCES.update(claim_differences(STUDY_CLAIMS, {d: study_namespace(d).RUNS_OF for d in STUDY}))
        except ValueError as err:
            raise WorkflowError(f"config: {err}") from None
    return STUDY_DIFFERENCES


def study_report_outputs():
    return {
        "findings": f"{STUDY_RESULTS}/findings.md",
        "table": f"{STUDY_RESULTS}/findings.csv",
        "parquet": f"{STUDY_RESULTS}/findings.parquet",
        "figure": f"{STUDY_RESULTS}/findings.png",
        "costs": f"{STUDY_RESULTS}/costs.csv",
    }


if STUDY_SETTINGS["previous"] is not None and os.path.normpath(STUDY_SETTINGS["previous"]) in {
        os.path.normpath(path) for path in study_report_outputs().values()}:
    raise WorkflowError(f"config: study.previous {STUDY_SETTINGS['previous']} is this study's own findings table, "
                        "which the re-run replaces: copy it aside first (e.g. to findings-previous.parquet) and name "
                        "the copy")


def study_benchmark_folders():
    """{dataset: its benchmark folder}, where the findings page reads each dataset's cost (curricula/study/costs.py)."""
    return {name: side_folder(dataset_config, "benchmarks") for name, dataset_config in STUDY.items()}


def study_outputs():
    """The final targets of a study: every dataset's `all_outputs()` and the findings page."""
    return [path for name in STUDY for path in study_namespace(name).all_outputs()] + \
        list(study_report_outputs().values())



# ----------------------------------------------------------------------------------------- seeds in rounds
def study_arm_metrics(dataset, arm, seed):
    """The per-query test metrics of one arm of a claim (an experiment, or ``<experiment>+bm25``) for one seed."""
    outputs = study_namespace(dataset).evaluate_outputs(trained_experiment(arm), seed)
    return outputs["additive_metrics" if arm.endswith(BM25_SUFFIX) else "metrics"]


def study_arms_metrics(arms):
    """{"metrics|<dataset>|<arm>|<seed>": path} of each (dataset, arm) for its first ``count`` seeds, from
    {(dataset, arm): count}."""
    return {f"metrics|{dataset}|{arm}|{seed}": study_arm_metrics(dataset, arm, seed)
            for (dataset, arm), count in arms.items() for seed in STUDY_SEEDS[dataset][:count]}


def study_round_path(round_):
    """The record of one round, waiting for its checkpoint (Snakemake re-evaluates the caller once it exists)."""
    return checkpoints.study_round.get(round=round_).output[0]


def study_round_inputs(wildcards):
    """Round 1: every arm of every sequential claim on every dataset; round k > 1: the arms round k - 1 listed as
    needing more seeds, and its record. Each arm for the first looks[k] seeds."""
    round_ = int(wildcards.round)
    count = STUDY_LOOKS[round_ - 1]
    if round_ == 1:
        return study_arms_metrics({arm: count for arm in first_round_arms(STUDY_CLAIMS, list(STUDY))})
    previous = study_round_path(round_ - 1)
    return {"previous": previous, **study_arms_metrics({arm: count for arm in read_round(previous)["next"]})}


def study_final_round():
    """The record of the last round the study needs: the first whose undecided cells need no more seeds (all
    decided, or the last look)."""
    for round_ in range(1, len(STUDY_LOOKS) + 1):
        path = study_round_path(round_)
        if not read_round(path)["next"]:
            return path
    raise WorkflowError(f"study rounds: the last round ({len(STUDY_LOOKS)}) still lists arms to extend")


def study_report_inputs(wildcards):
    """The findings page's inputs: without rounds the claims' metrics for every seed (study_claim_metrics); with
    rounds the last round's record and every claim arm's metrics for the seeds it trained, plus the fixed-seed
    active-learning claims' metrics; and the last study's findings table when study.previous names one."""
    previous = {} if STUDY_SETTINGS["previous"] is None else {"previous": STUDY_SETTINGS["previous"]}
    if STUDY_LOOKS is None:
        return {**STUDY_CLAIM_METRICS, **previous}
    final = study_final_round()
    active = {key: path for key, path in STUDY_CLAIM_METRICS.items() if key.startswith("active|")}
    return {"rounds": final, **study_arms_metrics(read_round(final)["trained"]), **active, **previous}
