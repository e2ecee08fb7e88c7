rule report_tables:
    """Penha Table 5-style (seeds x experiments) and MacAvaney Table 3-style (experiments x measures) tables."""
    input:
        **runs_by_key("metrics"),
        **{f"reference|{ref}": reference_outputs(ref)["metrics"] for ref in config["evaluate"]["references"]},
    output:
        seeds=report(report_outputs()["seeds"], caption="../report/table_seeds.rst", category="Tables"),
        metrics=report(report_outputs()["metrics"], caption="../report/table_metrics.rst", category="Tables"),
        seeds_md=report_outputs()["seeds_md"],
        seeds_parquet=report_outputs()["seeds_parquet"],
        metrics_md=report_outputs()["metrics_md"],
        metrics_parquet=report_outputs()["metrics_parquet"],
    params:
        measure=config["report"]["measure"],
        measures=config["evaluate"]["measures"],
        holm=config["report"]["holm"],
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
