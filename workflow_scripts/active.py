from curricula.active.loop import active_stage
from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    spec = dict(snakemake.params.spec, threads=snakemake.threads)
    active_stage(snakemake.input, snakemake.output, method=snakemake.wildcards.method,
                 seed=int(snakemake.wildcards.seed), spec=spec, settings=snakemake.params.settings,
                 relevant_min=snakemake.params.relevant_min)
