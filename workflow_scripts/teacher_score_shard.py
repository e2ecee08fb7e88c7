from curricula.models.teacher import teacher_config, teacher_score_stage
from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.plumbing.shards import parse_scatteritem

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    cfg = teacher_config(dict(snakemake.params.teacher, threads=snakemake.threads), snakemake.params.seed)
    teacher_score_stage(snakemake.input, snakemake.input.model, snakemake.output.scores, cfg,
                        snakemake.params.relevant_min, shard=parse_scatteritem(snakemake.wildcards.scatteritem))
