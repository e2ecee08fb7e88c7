from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.teacher import teacher_score_shard

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    teacher_score_shard(snakemake.input, snakemake.output, teacher=snakemake.params.teacher,
                        seed=snakemake.params.seed, relevant_min=snakemake.params.relevant_min,
                        threads=snakemake.threads, scatteritem=snakemake.wildcards.scatteritem)
