rule active:
    """Active learning (Wang et al. 2020 Algorithm 2) for one (method, seed): per-round learning curve."""
    input:
        unpack(active_inputs),
    output:
        **active_outputs(),
    params:
        spec=lambda wildcards: {k: v for k, v in ACTIVE_SPEC.items() if k != "threads"},
        settings=active_settings(),
        relevant_min=config["dataset"]["relevant_min"],
    threads: lambda wildcards: ACTIVE_SPEC["threads"]
    log:
        f"{LOGS}/active/{{method}}/seed={{seed}}.log",
    benchmark:
        f"{BENCHMARKS}/active/{{method}}/seed={{seed}}.tsv"
    resources:
        mem_mb=4000,
        gpu=lambda wildcards: 1 if ACTIVE_SPEC["device"] == "cuda" else 0,
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/active.py"


rule report_active:
    """Learning curves (test MRR by labeled fraction) and the Wang Table 1-style label-fraction table."""
    input:
        **{
            f"curve|{m}|{s}": active_outputs(m, s)["curve"]
            for m in config["active"]["methods"]
            for s in config["active"]["seeds"]
        },
    output:
        table=report(active_report_outputs()["table"], caption="../report/table_active.rst", category="Active learning"),
        table_md=active_report_outputs()["table"].replace(".csv", ".md"),
        table_parquet=active_report_outputs()["table"].replace(".csv", ".parquet"),
        curves=report(active_report_outputs()["curves"], caption="../report/curves_active.rst", category="Active learning"),
        curves_md=active_report_outputs()["curves"].replace(".csv", ".md"),
        curves_parquet=active_report_outputs()["curves"].replace(".csv", ".parquet"),
        figure=report(active_report_outputs()["figure"], caption="../report/figure_active.rst", category="Active learning"),
    params:
        dataset=config["dataset"]["name"],
    log:
        f"{LOGS}/report_active.log",
    benchmark:
        f"{BENCHMARKS}/report_active.tsv"
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/report_active.py"
