from curricula.models.teacher import teacher_config, teacher_train_stage
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]):
    cfg = teacher_config(dict(snakemake.params.teacher, threads=snakemake.threads), snakemake.params.seed)
    teacher_train_stage(snakemake.input, snakemake.output.model, cfg, snakemake.params.relevant_min)
