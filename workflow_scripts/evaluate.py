from curricula.evaluate import evaluate_stage
from curricula.logs import logged

with logged(snakemake.log[0]):
    wc = dict(snakemake.wildcards.items())
    tag = wc.get("reference") or f"{wc['experiment']}.seed{wc['seed']}"
    knobs = dict(snakemake.params.knobs, threads=snakemake.threads) if "knobs" in snakemake.params.keys() else None
    evaluate_stage(snakemake.input, snakemake.output, tag=tag, measures=snakemake.params.measures,
                   relevant_min=snakemake.params.relevant_min, seed=snakemake.params.seed, model_knobs=knobs)
