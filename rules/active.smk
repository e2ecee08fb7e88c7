rule active:
    """Active learning (Wang et al. 2020 Algorithm 2) for one (method, seed): per-round learning curve."""
    input:
        unpack(active_inputs),
    output:
        **active_outputs(),
    params:
        spec=active_params,
        settings=active_settings(),
        relevant_min=config["dataset"]["relevant_min"],
    threads: active_threads
    log:
        log_path("active/{method}/seed={seed}"),
    benchmark:
        benchmark_path("active/{method}/seed={seed}")
    resources:
        mem_mb=4000,
        gpu=active_gpus,
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/active.py"


rule report_active:
    """Learning curves (test MRR by labeled fraction) and the Wang Table 1-style label-fraction table."""
    input:
        **active_curves(),
    output:
        table=report(active_report_outputs()["table"], caption="../report/table_active.rst", category="Active learning"),
        table_md=active_report_outputs()["table_md"],
        table_parquet=active_report_outputs()["table_parquet"],
        curves=report(active_report_outputs()["curves"], caption="../report/curves_active.rst", category="Active learning"),
        curves_md=active_report_outputs()["curves_md"],
        curves_parquet=active_report_outputs()["curves_parquet"],
        figure=report(active_report_outputs()["figure"], caption="../report/figure_active.rst", category="Active learning"),
    params:
        dataset=config["dataset"]["name"],
    log:
        log_path("report_active"),
    benchmark:
        benchmark_path("report_active")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_active.py"
