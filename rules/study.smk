# A study: the pipeline (rules/pipeline.smk) once per dataset of config `study.datasets`, each a Snakemake module
# with its own config (curricula.study.grid.study_configs) whose rules are named `<dataset>_<rule>` and whose outputs
# are under results/<dataset>/, then the findings page over all of them.


include: "study_common.smk"


for STUDY_DATASET, STUDY_CONFIG in STUDY.items():
    STUDY_MODULE = study_module(STUDY_DATASET)
    STUDY_RULES = f"{STUDY_DATASET}_"
    workflow.module(name=STUDY_MODULE, snakefile=os.path.join(workflow.basedir, "rules", "pipeline.smk"),
                    config=STUDY_CONFIG)

    use rule * from STUDY_MODULE as STUDY_RULES*


# every claim's metrics for every seed (checked against each dataset's grid here, before any job)
STUDY_CLAIM_METRICS = study_claim_metrics()


if STUDY_LOOKS is not None:

    checkpoint study_round:
        """Seeds in rounds: the verdict of every (claim, dataset) cell after a round's seeds (the group-sequential
        seed-aware test), and the arms that need the next round's seeds (curricula/study/rounds.py)."""
        input:
            unpack(study_round_inputs),
        output:
            f"{STUDY_RESULTS}/rounds/round={{round}}.json",
        params:
            claims=STUDY_CLAIMS,  # all of them: the active-learning claims' share of alpha is left to them
            looks=list(STUDY_LOOKS),
            kind=STUDY_SETTINGS["sequential"]["kind"],
            alpha=STUDY_SETTINGS["alpha"],
            seeds=STUDY_SEEDS,
            round_=lambda wildcards: int(wildcards.round),
            measure=STUDY_SETTINGS["measure"],
            margin=STUDY_SETTINGS["equivalence_margin"],
            multiplicity=STUDY_SETTINGS["multiplicity"],
        wildcard_constraints:
            round=r"[1-9][0-9]*",
        log:
            f"{side_folder(config, 'logs', STUDY_NAME)}/study_round/round={{round}}.log",
        benchmark:
            f"{side_folder(config, 'benchmarks', STUDY_NAME)}/study_round/round={{round}}.tsv"
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
        findings=report(study_report_outputs()["findings"], caption="../report/study_findings.rst", category="Study"),
        table=study_report_outputs()["table"],
        parquet=study_report_outputs()["parquet"],
        figure=report(study_report_outputs()["figure"], caption="../report/study_figure.rst", category="Study"),
        costs=study_report_outputs()["costs"],
    params:
        claims=STUDY_CLAIMS,
        differing_keys=study_claim_differences(),
        measure=STUDY_SETTINGS["measure"],
        alpha=STUDY_SETTINGS["alpha"],
        power=STUDY_SETTINGS["power"],
        inference=STUDY_SETTINGS["inference"],
        margin=STUDY_SETTINGS["equivalence_margin"],
        multiplicity=STUDY_SETTINGS["multiplicity"],
        plan_max_queries=STUDY_SETTINGS["plan_max_queries"],
        benchmarks=study_benchmark_folders(),
        **({"seeds": STUDY_SEEDS} if STUDY_LOOKS is not None else {}),
    log:
        f"{side_folder(config, 'logs', STUDY_NAME)}/report_study.log",
    benchmark:
        f"{side_folder(config, 'benchmarks', STUDY_NAME)}/report_study.tsv"
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS_STUDY["cpu"]
    script:
        "../workflow_scripts/report_study.py"
