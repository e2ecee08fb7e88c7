# A study's configs, paths and input functions (rules/study.smk holds its modules and rules).
import os

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from curricula.config import side_folder
from curricula.study import claim_differences, listed_claims, parse_active_name, study_configs

validate(config, os.path.join(workflow.basedir, "schemas", "config.schema.yaml"))

# DEFAULT_CONFIG is config.yaml as the Snakefile read it
try:
    STUDY = study_configs(DEFAULT_CONFIG, workflow.config_settings.overwrite_config,
                          {"results": config["results"], "shards": config["shards"]})
except ValueError as err:
    raise WorkflowError(f"config: {err}") from None

STUDY_RESULTS = f"{config['results']}/report/study"
CONDA_ENVS_STUDY = {"cpu": "../envs/cpu.yaml"}

STUDY_SETTINGS = config["study"]
STUDY_CLAIMS = listed_claims(STUDY_SETTINGS["claims"])


def study_module(dataset):
    """The name of a dataset's module (its rules are named ``<dataset>_<rule>``)."""
    return f"dataset_{dataset}"


def study_namespace(dataset):
    """The globals of a dataset's module (its input functions, bound to its own config)."""
    return workflow.globals[study_module(dataset)]


def study_claim_metrics():
    """{"metrics|<dataset>|<experiment>|<seed>": path} of every experiment a claim names, and
    {"active|<dataset>|<method>|<seed>": path} of every active-learning method a claim names (active:<method>@<round>),
    on every dataset; a claim naming what a dataset does not run stops the run before any job."""
    named = {name for claim in STUDY_CLAIMS for name in (claim["experiment"], claim["against"])}
    try:
        active = {name: parse_active_name(name) for name in named}
    except ValueError as err:
        raise WorkflowError(f"config: study.claims: {err}") from None
    active = {name: parsed for name, parsed in active.items() if parsed is not None}
    named -= set(active)
    out = {}
    for dataset in STUDY:
        settings = STUDY[dataset]["active"]  # validated (defaults filled) when its module was loaded
        for name, (method, rnd) in active.items():
            rounds = 1 if method == "all" else settings["rounds"]
            if not settings["enabled"] or method not in settings["methods"] or rnd >= rounds:
                raise WorkflowError(f"config: study.claims name {name}, which {dataset} does not run (active: "
                                    f"enabled {settings['enabled']}, methods {settings['methods']}, "
                                    f"rounds 0-{rounds - 1}; all has round 0 only)")
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
    """{claim id: {dataset: the keys its two arms' resolved specs differ in}} (curricula.study.claim_differences
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
    }


def study_outputs():
    """The final targets of a study: every dataset's `all_outputs()` and the findings page."""
    return [path for name in STUDY for path in study_namespace(name).all_outputs()] + \
        list(study_report_outputs().values())

