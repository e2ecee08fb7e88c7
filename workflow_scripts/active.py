from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.active import active

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    active(snakemake.input, snakemake.output, method=snakemake.wildcards.method, seed=snakemake.wildcards.seed,
           spec=snakemake.params.spec, settings=snakemake.params.settings, relevant_min=snakemake.params.relevant_min,
           threads=snakemake.threads)
