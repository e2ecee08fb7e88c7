rule report_tables:
    """Penha Table 5-style (seeds x experiments) and MacAvaney Table 3-style (experiments x measures) tables, and the
    power table (minimum detectable effect per experiment)."""
    input:
        **runs_by_key("metrics", additive=True),
        **reference_metrics(),
    output:
        seeds=report(report_outputs()["seeds"], caption="../report/table_seeds.rst", category="Tables"),
        metrics=report(report_outputs()["metrics"], caption="../report/table_metrics.rst", category="Tables"),
        seeds_md=report_outputs()["seeds_md"],
        seeds_parquet=report_outputs()["seeds_parquet"],
        metrics_md=report_outputs()["metrics_md"],
        metrics_parquet=report_outputs()["metrics_parquet"],
        power=report(report_outputs()["power"], caption="../report/table_power.rst", category="Tables"),
        power_md=report_outputs()["power_md"],
        power_parquet=report_outputs()["power_parquet"],
    params:
        measure=config["report"]["measure"],
        measures=config["evaluate"]["measures"],
        holm=config["report"]["holm"],
        test=config["report"]["test"],
        permutations=config["report"]["permutations"],
        inference=config["report"]["inference"],
        plan_max_queries=config["report"]["plan_max_queries"],
        seed=config["seed"],
        dataset=config["dataset"]["name"],
    log:
        log_path("report_tables"),
    benchmark:
        benchmark_path("report_tables")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_tables.py"


rule report_figures:
    """Pacing functions, dev curves, test metric by turns, by difficulty bucket and by domain (PNG)."""
    input:
        **runs_by_key("curve"),
        **runs_by_key("metrics"),
        queries=ingest_outputs()["queries"],
        **{f"difficulty|{f}": difficulty_test_path(f) for f in report_functions()},
    output:
        figures=report(
            directory(report_outputs()["figures"]),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
    params:
        specs=experiment_params(),
        measure=config["report"]["measure"],
        turn_edges=config["report"]["turn_edges"],
    log:
        log_path("report_figures"),
    benchmark:
        benchmark_path("report_figures")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_figures.py"


if TUNED:  # the rule exists only when an experiment tunes a knob

    rule report_tuning:
        """The knobs tuned on dev: every value's dev result per experiment and seed, and the chosen one."""
        input:
            **selections(),
        output:
            tuning=report(tuning_report_outputs()["tuning"], caption="../report/table_tuning.rst", category="Tables"),
            tuning_md=tuning_report_outputs()["tuning_md"],
            tuning_parquet=tuning_report_outputs()["tuning_parquet"],
        params:
            dataset=config["dataset"]["name"],
        log:
            log_path("report_tuning"),
        benchmark:
            benchmark_path("report_tuning")
        resources:
            mem_mb=1000,
        conda:
            CONDA_ENVS["cpu"]
        script:
            "../workflow_scripts/report_tuning.py"
