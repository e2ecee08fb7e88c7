rule report_tables:
    """Penha Table 5-style (seeds x experiments) and MacAvaney Table 3-style (experiments x measures) tables, and the
    power table (minimum detectable effect per experiment)."""
    input:
        **targets.runs_by_key(PLAN, "metrics", additive=True),
        **targets.reference_metrics(PLAN),
    output:
        seeds=report(LAYOUT.report()["seeds"], caption="../report/table_seeds.rst", category="Tables"),
        metrics=report(LAYOUT.report()["metrics"], caption="../report/table_metrics.rst", category="Tables"),
        seeds_md=LAYOUT.report()["seeds_md"],
        seeds_parquet=LAYOUT.report()["seeds_parquet"],
        metrics_md=LAYOUT.report()["metrics_md"],
        metrics_parquet=LAYOUT.report()["metrics_parquet"],
        power=report(LAYOUT.report()["power"], caption="../report/table_power.rst", category="Tables"),
        power_md=LAYOUT.report()["power_md"],
        power_parquet=LAYOUT.report()["power_parquet"],
    params:
        measure=config["report"]["measure"],
        measures=config["evaluate"]["measures"],
        holm=config["report"]["holm"],
        test=config["report"]["test"],
        permutations=config["report"]["permutations"],
        inference=config["report"]["inference"],
        plan_max_queries=config["report"]["plan_max_queries"],
        seed=config["pipeline_seed"],
        dataset=config["dataset"]["name"],
    log:
        LAYOUT.log("report_tables"),
    benchmark:
        LAYOUT.benchmark("report_tables")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_tables.py"


rule report_figures:
    """Pacing functions, dev curves, test metric by turns, by difficulty bucket and by domain (PNG)."""
    input:
        **targets.runs_by_key(PLAN, "curve"),
        **targets.runs_by_key(PLAN, "metrics"),
        queries=LAYOUT.data("queries"),
        **targets.difficulty_tests(PLAN),
    output:
        figures=report(
            directory(LAYOUT.report()["figures"]),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
    params:
        specs=PLAN.experiment_params(),
        measure=config["report"]["measure"],
        turn_edges=config["report"]["turn_edges"],
    log:
        LAYOUT.log("report_figures"),
    benchmark:
        LAYOUT.benchmark("report_figures")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_figures.py"


if PLAN.tuned:  # the rule exists only when an experiment tunes a knob

    rule report_tuning:
        """The knobs tuned on dev: every value's dev result per experiment and seed, and the chosen one."""
        input:
            **targets.selections(PLAN),
        output:
            tuning=report(LAYOUT.tuning_report()["tuning"], caption="../report/table_tuning.rst", category="Tables"),
            tuning_md=LAYOUT.tuning_report()["tuning_md"],
            tuning_parquet=LAYOUT.tuning_report()["tuning_parquet"],
        params:
            dataset=config["dataset"]["name"],
        log:
            LAYOUT.log("report_tuning"),
        benchmark:
            LAYOUT.benchmark("report_tuning")
        resources:
            mem_mb=1000,
        conda:
            CONDA_ENVS["cpu"]
        script:
            "../workflow_scripts/report_tuning.py"
