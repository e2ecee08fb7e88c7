from curricula.models.teacher import teacher_config, teacher_train_stage
from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    cfg = teacher_config(dict(snakemake.params.teacher, threads=snakemake.threads), snakemake.params.seed)
    teacher_train_stage(snakemake.input, snakemake.output.model, cfg, snakemake.params.relevant_min)
