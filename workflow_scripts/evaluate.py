from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.evaluate import evaluate

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    # rules evaluate_reference* have no knobs (no model), rule evaluate_reference no additivity
    evaluate(snakemake.input, snakemake.output, wildcards=snakemake.wildcards, measures=snakemake.params.measures,
             relevant_min=snakemake.params.relevant_min, seed=snakemake.params.seed,
             knobs=snakemake.params.get("knobs"), additivity=snakemake.params.get("additivity"),
             threads=snakemake.threads)
