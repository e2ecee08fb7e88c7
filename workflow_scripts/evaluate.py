from curricula.evaluation.rerank import evaluate_stage
from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    wc = dict(snakemake.wildcards.items())
    tag = wc.get("reference") or f"{wc['experiment']}.seed{wc['seed']}"
    params = dict(snakemake.params.items())
    knobs = dict(params["knobs"], threads=snakemake.threads) if "knobs" in params else None
    evaluate_stage(snakemake.input, snakemake.output, tag=tag, measures=params["measures"],
                   relevant_min=params["relevant_min"], seed=params["seed"], model_knobs=knobs,
                   additivity=params.get("additivity"))
