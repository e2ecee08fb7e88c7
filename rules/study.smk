# A study: the pipeline (rules/pipeline.smk) once per dataset of config `study.datasets`, each a Snakemake module
# with its own config (curricula.study.grid.study_configs) whose rules are named `<dataset>_<rule>` and whose outputs
# are under results/<dataset>/, then the findings page over all of them.


include: "study_common.smk"


# The profile's set-resources / set-threads entries for the bare rule names (train, teacher_train...) apply to every
# dataset's copy of the rule too (`<dataset>_train`; curricula.pipeline.devices.study_overwrites); an entry the
# profile writes for a copy itself is checked like the bare ones (a GPU for jobs pinned to the CPU stops the run).
STUDY_GPU_CONFLICTS = [line for name, plan in STUDY_PLAN.datasets.items()
                       for line in profile_gpu_conflicts(rule_devices(plan.config, plan.runs, plan.active),
                                                         workflow.resource_settings.overwrite_resources, f"{name}_")]
if STUDY_GPU_CONFLICTS:
    sys.exit("\n".join(f"profile: {line}" for line in STUDY_GPU_CONFLICTS))
# Snakemake reads these parsed tables when it creates each rule, and passes them to every cluster job
workflow.resource_settings._parsed_overwrite_resources.update(
    study_overwrites(workflow.resource_settings._parsed_overwrite_resources, STUDY_PLAN.datasets))
workflow.resource_settings._parsed_overwrite_threads.update(
    study_overwrites(workflow.resource_settings._parsed_overwrite_threads, STUDY_PLAN.datasets))


for STUDY_DATASET, STUDY_DATASET_PLAN in STUDY_PLAN.datasets.items():
    STUDY_MODULE = study_module(STUDY_DATASET)
    STUDY_RULES = f"{STUDY_DATASET}_"
    workflow.module(name=STUDY_MODULE, snakefile=os.path.join(workflow.basedir, "rules", "pipeline.smk"),
                    config=STUDY_DATASET_PLAN.config)

    use rule * from STUDY_MODULE as STUDY_RULES*


rule study_ledger_entry:
    """A finished run's ledger entry: its per-query test values, training summary, cost and provenance, appended to
    the study's ledger (committed with the project; curricula/study/entries.py)."""
    input:
        unpack(study_entry_inputs),
    output:
        STUDY_LAYOUT.study_entry(),
    params:
        spec_digest=lambda wildcards: study_entry_params(wildcards)["spec_digest"],
        root=lambda wildcards: study_entry_params(wildcards)["root"],
        benchmarks=lambda wildcards: study_entry_params(wildcards)["benchmarks"],
        ledger=STUDY_LAYOUT.study_ledger,
        manifest=STUDY_PLAN.manifest,  # written with the ledger's first entry; another study's refused
    wildcard_constraints:
        dataset=one_of(list(STUDY_PLAN.datasets)),
        seed=r"-?[0-9]+",
    priority: 10  # ahead of the next training: a run is in the ledger as soon as it is evaluated
    log:
        STUDY_LAYOUT.study_log("study_ledger_entry/{dataset}/{arm}/seed={seed}"),
    benchmark:
        STUDY_LAYOUT.study_benchmark("study_ledger_entry/{dataset}/{arm}/seed={seed}")
    resources:
        mem_mb=1000,
    conda:
        CONDA_ENVS_STUDY["cpu"]
    script:
        "../workflow_scripts/study_ledger_entry.py"


if STUDY_PLAN.looks is not None:

    checkpoint study_round:
        """Seeds in rounds: the verdict of every (claim, dataset) cell after a round's seeds (the group-sequential
        seed-aware test), and the arms that need the next round's seeds (curricula/study/rounds.py)."""
        input:
            unpack(study_round_inputs),
        output:
            STUDY_LAYOUT.study_round("{round}"),
        params:
            ledger=STUDY_LAYOUT.study_ledger,
            round_=lambda wildcards: int(wildcards.round),
            **{k: v for k, v in STUDY_PLAN.round_settings(1).items() if k != "round_"},
        wildcard_constraints:
            round=r"[1-9][0-9]*",
        log:
            STUDY_LAYOUT.study_log("study_round/round={round}"),
        benchmark:
            STUDY_LAYOUT.study_benchmark("study_round/round={round}")
        resources:
            mem_mb=2000,
        conda:
            CONDA_ENVS_STUDY["cpu"]
        script:
            "../workflow_scripts/study_round.py"


rule report_study:
    """The findings page: each paper's claim on each dataset (effect, CI, seed-aware and per-query p, MDE,
    equivalence, verdict, multiplicity), the verdicts changed since the last study, the cost per dataset in
    core-hours, the planner per dataset, and its forest plot."""
    input:
        unpack(study_report_inputs),
    output:
        findings=report(STUDY_LAYOUT.study_report()["findings"], caption="../report/study_findings.rst",
                        category="Study"),
        table=STUDY_LAYOUT.study_report()["table"],
        parquet=STUDY_LAYOUT.study_report()["parquet"],
        figure=report(STUDY_LAYOUT.study_report()["figure"], caption="../report/study_figure.rst", category="Study"),
        costs=STUDY_LAYOUT.study_report()["costs"],
    params:
        ledger=STUDY_LAYOUT.study_ledger,
        claims=STUDY_PLAN.claims,
        **STUDY_PLAN.report_settings(),
    log:
        STUDY_LAYOUT.study_log("report_study"),
    benchmark:
        STUDY_LAYOUT.study_benchmark("report_study")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS_STUDY["cpu"]
    script:
        "../workflow_scripts/report_study.py"
