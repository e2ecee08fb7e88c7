from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.teacher import teacher_train

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    teacher_train(snakemake.input, snakemake.output, teacher=snakemake.params.teacher, seed=snakemake.params.seed,
                  relevant_min=snakemake.params.relevant_min, threads=snakemake.threads)
