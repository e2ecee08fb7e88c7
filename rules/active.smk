rule active:
    """Active learning (Wang et al. 2020 Algorithm 2) for one (method, seed): per-round learning curve."""
    input:
        unpack(active_inputs),
    output:
        **LAYOUT.active(),
    params:
        spec=active_params,
        settings=PLAN.active_settings(),
        relevant_min=config["dataset"]["relevant_min"],
    threads: active_threads
    log:
        LAYOUT.log("active/{method}/seed={seed}"),
    benchmark:
        LAYOUT.benchmark("active/{method}/seed={seed}")
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
        **targets.active_curves(PLAN),
    output:
        table=report(LAYOUT.active_report()["table"], caption="../report/table_active.rst",
                     category="Active learning"),
        table_md=LAYOUT.active_report()["table_md"],
        table_parquet=LAYOUT.active_report()["table_parquet"],
        curves=report(LAYOUT.active_report()["curves"], caption="../report/curves_active.rst",
                      category="Active learning"),
        curves_md=LAYOUT.active_report()["curves_md"],
        curves_parquet=LAYOUT.active_report()["curves_parquet"],
        figure=report(LAYOUT.active_report()["figure"], caption="../report/figure_active.rst",
                      category="Active learning"),
    params:
        dataset=config["dataset"]["name"],
    log:
        LAYOUT.log("report_active"),
    benchmark:
        LAYOUT.benchmark("report_active")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_active.py"
